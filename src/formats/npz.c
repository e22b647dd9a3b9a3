/* NumPy's .npz (np.savez): a zip of "<name>.npy" members, each the NPY
 * format of numpy/lib/format.py: "\x93NUMPY", major, minor, a header
 * length (u16 in 1.0, u32 in 2.0 and 3.0), then a Python literal dict
 * {'descr': ..., 'fortran_order': ..., 'shape': (...)} padded with spaces
 * and a newline, then the array's bytes. np.savez_compressed deflates
 * the members, which cannot be mapped, and object arrays are pickles:
 * both are refused. See shared/docs/tensor-formats.md section 4. */
#include "formats/npz.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/jscan.h"
#include "formats/zip.h"

/* numpy's own bound on header size (format.py _MAX_HEADER_SIZE). */
#define NPY_HEADER_MAX 10000

struct lit {
	const unsigned char *p, *end;
	struct tfs_diag *d;
};

static void ws(struct lit *l)
{
	while (l->p < l->end && (*l->p == ' ' || *l->p == '\t' || *l->p == '\n' || *l->p == '\r'))
		l->p++;
}

static tfs_err lbad(struct lit *l, const char *what)
{
	return tfs_fail(l->d, TFS_ERR_FORMAT, "bad .npy header: %s", what);
}

static int eat(struct lit *l, char c)
{
	ws(l);
	if (l->p < l->end && *l->p == c) {
		l->p++;
		return 1;
	}
	return 0;
}

/* A quoted string without escapes (numpy's keys and simple descrs). */
static tfs_err str(struct lit *l, const unsigned char **s, size_t *n)
{
	ws(l);
	if (l->p >= l->end || (*l->p != '\'' && *l->p != '"'))
		return lbad(l, "expected a quoted string");
	unsigned char q = *l->p++;
	const unsigned char *b = l->p;
	while (l->p < l->end && *l->p != q) {
		if (*l->p == '\\')
			return lbad(l, "a string with an escape");
		l->p++;
	}
	if (l->p >= l->end)
		return lbad(l, "an unterminated string");
	*s = b;
	*n = (size_t)(l->p - b);
	l->p++;
	return TFS_OK;
}

static int word(struct lit *l, const char *w)
{
	size_t n = strlen(w);
	ws(l);
	if ((size_t)(l->end - l->p) >= n && memcmp(l->p, w, n) == 0) {
		l->p += n;
		return 1;
	}
	return 0;
}

static tfs_err shape(struct lit *l, struct tfs_npy *o)
{
	if (!eat(l, '('))
		return lbad(l, "the shape is not a tuple");
	o->ndim = 0;
	while (!eat(l, ')')) {
		ws(l);
		if (l->p >= l->end || *l->p < '0' || *l->p > '9')
			return lbad(l, "a shape entry that is not a non-negative integer");
		uint64_t v = 0;
		while (l->p < l->end && *l->p >= '0' && *l->p <= '9') {
			if (v > (UINT64_MAX - 9) / 10)
				return lbad(l, "a dimension over 64 bits");
			v = v * 10 + (uint64_t)(*l->p++ - '0');
		}
		if (l->p < l->end && *l->p == 'L') /* Python 2 long literals */
			l->p++;
		if (o->ndim == sizeof o->shape / sizeof o->shape[0])
			return lbad(l, "more than 32 dimensions (numpy's limit)");
		o->shape[o->ndim++] = v;
		if (!eat(l, ',')) {
			if (!eat(l, ')'))
				return lbad(l, "a shape tuple that does not close");
			break;
		}
	}
	return TFS_OK;
}

static tfs_err descr(struct lit *l, const unsigned char *s, size_t n, struct tfs_npy *o)
{
	static const struct {
		const char *code;
		unsigned dt;
	} codes[] = {
		{"b1", TFS_DT_BOOL}, {"i1", TFS_DT_I8},    {"u1", TFS_DT_U8},  {"i2", TFS_DT_I16},
		{"u2", TFS_DT_U16},  {"i4", TFS_DT_I32},   {"u4", TFS_DT_U32}, {"i8", TFS_DT_I64},
		{"u8", TFS_DT_U64},  {"f2", TFS_DT_F16},   {"f4", TFS_DT_F32}, {"f8", TFS_DT_F64},
		{"c8", TFS_DT_C64},  {"c16", TFS_DT_C128},
	};
	char q[64];
	tfs_quote(q, sizeof q, (const char *)s, n);
	if (n < 2)
		return lbad(l, "an empty dtype");
	if (s[1] == 'O')
		return tfs_fail(
			l->d, TFS_ERR_FORMAT,
			"an object array (dtype %s): its elements are pickled Python objects, which tensorfs never loads",
			q);
	if (s[0] == '>' && !(n == 3 && s[2] == '1'))
		return tfs_fail(
			l->d, TFS_ERR_FORMAT,
			"a big-endian array (dtype %s): tensorfs serves stored bytes as they are and does not swap them",
			q);
	if (s[0] == '<' || s[0] == '|' || s[0] == '=' || s[0] == '>')
		for (size_t i = 0; i < sizeof codes / sizeof codes[0]; i++)
			if (strlen(codes[i].code) == n - 1 && memcmp(codes[i].code, s + 1, n - 1) == 0) {
				o->dtype = codes[i].dt;
				return TFS_OK;
			}
	return tfs_fail(
		l->d, TFS_ERR_FORMAT,
		"dtype %s has no tensor equivalent (strings, datetimes, records and void are not tensors)",
		q);
}

tfs_err tfs_npy_parse(const unsigned char *p, size_t n, struct tfs_npy *o, struct tfs_diag *d)
{
	memset(o, 0, sizeof *o);
	if (n < 10 || memcmp(p, "\x93NUMPY", 6) != 0)
		return tfs_fail(d, TFS_ERR_FORMAT, "not an .npy array (no \\x93NUMPY magic)");
	unsigned major = p[6];
	size_t hl, at;
	if (major == 1) {
		hl = (size_t)p[8] | (size_t)p[9] << 8;
		at = 10;
	} else if (major == 2 || major == 3) {
		if (n < 12)
			return tfs_fail(d, TFS_ERR_FORMAT, "truncated .npy header");
		hl = (size_t)p[8] | (size_t)p[9] << 8 | (size_t)p[10] << 16 | (size_t)p[11] << 24;
		at = 12;
	} else {
		return tfs_fail(d, TFS_ERR_FORMAT, "unknown .npy format version %u.%u", major, p[7]);
	}
	if (hl > NPY_HEADER_MAX)
		return tfs_fail(d, TFS_ERR_FORMAT, "the .npy header is %zu bytes, over numpy's %d-byte limit",
				hl, NPY_HEADER_MAX);
	if (at + hl > n)
		return tfs_fail(d, TFS_ERR_FORMAT, "truncated .npy header (%zu bytes announced)", hl);
	const unsigned char *h = p + at;
	/* 1.0 and 2.0 headers are latin-1; 3.0 allows UTF-8. Our keys and
	 * values are ASCII either way: anything else fails below. */
	if (major == 3 && tfs_utf8_check(h, hl) != hl)
		return tfs_fail(d, TFS_ERR_FORMAT, "bad .npy header: version 3.0 but not UTF-8");
	struct lit l = {.p = h, .end = h + hl, .d = d};
	int seen_descr = 0, seen_fo = 0, seen_shape = 0;
	tfs_err e;
	if (!eat(&l, '{'))
		return lbad(&l, "not a dict");
	while (!eat(&l, '}')) {
		const unsigned char *k, *v;
		size_t kl, vl;
		if ((e = str(&l, &k, &kl)))
			return e;
		if (!eat(&l, ':'))
			return lbad(&l, "a key without ':'");
		if (kl == 5 && memcmp(k, "descr", 5) == 0 && !seen_descr) {
			ws(&l);
			if (l.p < l.end && *l.p == '[')
				return tfs_fail(
					d, TFS_ERR_FORMAT,
					"a structured array (a record dtype): its fields are not one tensor");
			if ((e = str(&l, &v, &vl)) || (e = descr(&l, v, vl, o)))
				return e;
			seen_descr = 1;
		} else if (kl == 13 && memcmp(k, "fortran_order", 13) == 0 && !seen_fo) {
			if (word(&l, "True"))
				o->fortran = 1;
			else if (!word(&l, "False"))
				return lbad(&l, "fortran_order is not True or False");
			seen_fo = 1;
		} else if (kl == 5 && memcmp(k, "shape", 5) == 0 && !seen_shape) {
			if ((e = shape(&l, o)))
				return e;
			seen_shape = 1;
		} else {
			char q[64];
			tfs_quote(q, sizeof q, (const char *)k, kl);
			return tfs_fail(
				d, TFS_ERR_FORMAT,
				"bad .npy header: key %s is not one of descr, fortran_order, shape (or appears twice)",
				q);
		}
		if (!eat(&l, ',')) {
			if (!eat(&l, '}'))
				return lbad(&l, "the dict does not close");
			break;
		}
	}
	ws(&l);
	if (l.p != l.end)
		return lbad(&l, "bytes after the dict");
	if (!seen_descr || !seen_fo || !seen_shape)
		return lbad(&l, "descr, fortran_order or shape is missing");
	o->data = at + hl;
	return TFS_OK;
}

static void warn(const struct tfs_parse_opts *o, const char *msg)
{
	if (o && o->warn)
		o->warn(o->warn_ctx, msg);
}

tfs_err tfs_npz_read(struct tfs_source *src, const struct tfs_parse_opts *o, struct tfs_table *out,
		     struct tfs_diag *d)
{
	struct tfs_zip z;
	struct tfs_table_builder b = {.t = out};
	unsigned char *hb = NULL;
	uint32_t fortran = 0, skipped = 0;
	char q[160], msg[TFS_DIAG_MAX];
	memset(out, 0, sizeof *out);
	tfs_err e = tfs_zip_open(src, &z, d);
	if (e)
		return e;
	out->format = "npz";
	out->file_size = src->id.size;
	if (!(hb = malloc(12 + NPY_HEADER_MAX))) {
		e = tfs_fail(d, TFS_ERR_NOMEM, "out of memory");
		goto out;
	}
	for (uint32_t i = 0; i < z.n; i++) {
		const struct tfs_zip_entry *m = &z.e[i];
		tfs_quote(q, sizeof q, m->name, m->nlen);
		if (m->nlen < 4 || memcmp(m->name + m->nlen - 4, ".npy", 4) != 0) {
			skipped++;
			snprintf(msg, sizeof msg, "member %s is not an .npy array; not shown", q);
			warn(o, msg);
			continue;
		}
		if (m->method != 0) {
			e = tfs_fail(
				d, TFS_ERR_FORMAT,
				"member %s is compressed (zip method %u, as np.savez_compressed writes): tensorfs maps stored bytes and cannot serve it; save with np.savez",
				q, m->method);
			goto out;
		}
		size_t want = m->csize < 12 + NPY_HEADER_MAX ? (size_t)m->csize : 12 + NPY_HEADER_MAX;
		if ((e = tfs_source_read(src, hb, want, m->data, d)))
			goto out;
		struct tfs_npy h;
		struct tfs_diag hd;
		if ((e = tfs_npy_parse(hb, want, &h, &hd))) {
			e = tfs_fail(d, e, "member %s: %s", q, hd.msg);
			goto out;
		}
		uint64_t elems = 1;
		int overflow = 0;
		for (uint32_t k = 0; k < h.ndim; k++) {
			if (h.shape[k] && elems > UINT64_MAX / h.shape[k])
				overflow = 1;
			elems *= h.shape[k];
		}
		uint64_t bytes = overflow ? UINT64_MAX : tfs_dtype_bytes(h.dtype, elems);
		if (bytes == UINT64_MAX || bytes != m->csize - h.data) {
			e = tfs_fail(
				d, TFS_ERR_FORMAT,
				"member %s: its shape and dtype need %s%llu bytes but it holds %llu after its header%s",
				q, bytes == UINT64_MAX ? "more than " : "",
				(unsigned long long)(bytes == UINT64_MAX ? UINT64_MAX : bytes),
				(unsigned long long)(m->csize - h.data),
				bytes != UINT64_MAX && bytes > m->csize - h.data ? " (truncated?)" : "");
			goto out;
		}
		struct tfs_tensor t = {0};
		t.begin = m->data + h.data;
		t.end = t.begin + bytes;
		t.dtype = (uint16_t)h.dtype;
		t.ndim = h.ndim;
		t.dims_off = (uint32_t)out->ndims;
		/* Fortran order: the bytes are those of the transpose in C order,
		 * so the file shows that, with the shape reversed. */
		int nontrivial = 0;
		for (uint32_t k = 0; k < h.ndim; k++)
			nontrivial += h.shape[k] > 1;
		int rev = h.fortran && nontrivial > 1;
		t.flags = rev ? TFS_TENSOR_TRANSPOSED : 0;
		for (uint32_t k = 0; k < h.ndim; k++)
			if (tfs_table_dim(&b, rev ? h.shape[h.ndim - 1 - k] : h.shape[k])) {
				e = tfs_fail(d, TFS_ERR_NOMEM, "out of memory");
				goto out;
			}
		t.name_len = m->nlen - 4;
		int dup;
		if (tfs_table_text(&b, m->name, t.name_len, &t.name_off) || tfs_table_put(&b, &t, 0, &dup)) {
			e = tfs_fail(d, TFS_ERR_NOMEM, "out of memory");
			goto out;
		}
		if (dup) {
			e = tfs_fail(d, TFS_ERR_FORMAT, "member %s appears twice", q);
			goto out;
		}
		if (rev) {
			fortran++;
			snprintf(
				msg, sizeof msg,
				"member %s is stored in Fortran order: shown as its transpose (shape reversed), the bytes as stored",
				q);
			warn(o, msg);
		}
	}
	if (fortran) {
		int n = snprintf(msg, sizeof msg, "%u arrays in Fortran order, shown transposed", fortran);
		if ((e = tfs_table_fact(out, "fortran_order", msg, (size_t)n)))
			goto out;
	}
	if (skipped) {
		int n = snprintf(msg, sizeof msg, "%u members that are not .npy arrays", skipped);
		if ((e = tfs_table_fact(out, "skipped", msg, (size_t)n)))
			goto out;
	}
out:
	free(hb);
	tfs_table_builder_done(&b);
	tfs_zip_free(&z);
	if (e)
		tfs_table_free(out);
	return e;
}

static int detect(const struct tfs_probe *p)
{
	const char *name;
	uint32_t nl;
	if (!tfs_zip_sniff(p->head, p->nhead, &name, &nl))
		return 0;
	/* Any other zip may be one too (its first member not an array): the
	 * name decides between this reader and PyTorch's. */
	return nl > 4 && memcmp(name + nl - 4, ".npy", 4) == 0 ? 2 : 1;
}

const struct tfs_format tfs_format_npz = {
	.name = "npz",
	.ext = ".npz",
	.detect = detect,
	.read = tfs_npz_read,
};
