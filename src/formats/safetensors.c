/* safetensors: an 8-byte little-endian length N, N bytes of JSON header,
 * then the data. The header's verdict is the reference reader's
 * (huggingface/safetensors, see shared/docs/safetensors-format.md), with
 * one deliberate difference: a dtype outside the 22 known ones is accepted
 * with a warning unless strict. */
#include "formats/safetensors.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/jscan.h"
#include "core/mem.h"
#include "core/utf8.h"

struct sc {
	struct tfs_jscan js;
	unsigned flags;
	struct tfs_table *h;
	struct tfs_table_builder b;
};

static tfs_err text(struct sc *s, const char *p, size_t len, uint32_t *off)
{
	return tfs_table_text(&s->b, p, len, off) ? tfs_js_nomem(&s->js) : TFS_OK;
}

/* Adds the tensor or, when the name was seen, replaces it: the reference
 * keeps the last definition of a name. */
static tfs_err put(struct sc *s, const struct tfs_tensor *t)
{
	return tfs_table_put(&s->b, t, 1, NULL) ? tfs_js_nomem(&s->js) : TFS_OK;
}

static tfs_err tensor_fail(struct sc *s, const struct tfs_tensor *t, const char *what)
{
	char q[160];
	if (s->js.p >= s->js.end)
		return tfs_js_err(&s->js, what);
	tfs_quote(q, sizeof q, s->h->arena + t->name_off, t->name_len);
	return tfs_fail(s->js.d, TFS_ERR_FORMAT, "tensor %s: %s (at byte %zu of the header)", q, what,
			(size_t)(s->js.p - s->js.base));
}

static tfs_err parse_dtype(struct sc *s, struct tfs_tensor *t)
{
	tfs_err e;
	struct tfs_jstr str;
	tfs_js_ws(&s->js);
	int map = tfs_js_peek(&s->js) == '{';
	if (map) {
		/* serde also accepts an enum variant written as {"F32": null}. */
		if ((e = tfs_js_enter(&s->js)))
			return e;
		tfs_js_ws(&s->js);
	}
	if (tfs_js_peek(&s->js) != '"')
		return tensor_fail(s, t,
				   map ? "dtype {...} must hold one dtype name" : "dtype must be a string");
	if ((e = tfs_js_string(&s->js, &str)))
		return e;
	t->dtype = (uint16_t)tfs_dtype_lookup_safetensors(str.p, str.len);
	if (t->dtype == TFS_DT_UNKNOWN) {
		if (s->flags & TFS_PARSE_STRICT) {
			char q[96], msg[160];
			tfs_quote(q, sizeof q, str.p, str.len);
			snprintf(msg, sizeof msg, "unknown dtype %s", q);
			return tensor_fail(s, t, msg);
		}
		if ((e = text(s, str.p, str.len, &t->dtype_off)))
			return e;
		t->dtype_len = (uint32_t)str.len;
	}
	if (map) {
		if ((e = tfs_js_expect(&s->js, ':', "expected ':'")))
			return e;
		tfs_js_ws(&s->js);
		if (tfs_js_peek(&s->js) != 'n' || tfs_js_literal(&s->js, "null"))
			return tensor_fail(s, t, "dtype {\"NAME\": ...} must have the value null");
		tfs_js_ws(&s->js);
		if (tfs_js_peek(&s->js) != '}')
			return tensor_fail(s, t, "dtype {...} must hold exactly one dtype name");
		s->js.p++;
		s->js.depth--;
	}
	return TFS_OK;
}

static tfs_err parse_u64(struct sc *s, const struct tfs_tensor *t, uint64_t *v, const char *field)
{
	enum tfs_jnum k;
	char msg[96];
	tfs_js_ws(&s->js);
	if (tfs_js_peek(&s->js) == '-' || tfs_js_isdigit(tfs_js_peek(&s->js))) {
		const unsigned char *at = s->js.p;
		tfs_err e = tfs_js_number(&s->js, &k, v);
		if (e)
			return e;
		if (k == TFS_JNUM_UINT)
			return TFS_OK;
		s->js.p = at;
	}
	snprintf(msg, sizeof msg, "%s must hold integers from 0 to 2^64-1", field);
	return tensor_fail(s, t, msg);
}

static tfs_err parse_shape(struct sc *s, struct tfs_tensor *t)
{
	tfs_err e;
	struct tfs_table *h = s->h;
	tfs_js_ws(&s->js);
	if (tfs_js_peek(&s->js) != '[')
		return tensor_fail(s, t, "shape must be an array of integers");
	if ((e = tfs_js_enter(&s->js)))
		return e;
	t->dims_off = (uint32_t)h->ndims;
	t->ndim = 0;
	if (tfs_js_close_if_empty(&s->js, ']'))
		return TFS_OK;
	int r;
	do {
		uint64_t v;
		if ((e = parse_u64(s, t, &v, "shape")))
			return e;
		if (tfs_table_dim(&s->b, v))
			return tfs_js_nomem(&s->js);
		t->ndim++;
	} while ((r = tfs_js_next(&s->js, ']', &e)) > 0);
	return r < 0 ? e : TFS_OK;
}

static tfs_err parse_offsets(struct sc *s, struct tfs_tensor *t)
{
	tfs_err e;
	tfs_js_ws(&s->js);
	if (tfs_js_peek(&s->js) != '[')
		return tensor_fail(s, t, "data_offsets must be an array of two integers");
	if ((e = tfs_js_enter(&s->js)))
		return e;
	tfs_js_ws(&s->js);
	if (tfs_js_peek(&s->js) == ']')
		return tensor_fail(s, t, "data_offsets must hold exactly two integers");
	if ((e = parse_u64(s, t, &t->begin, "data_offsets")))
		return e;
	tfs_js_ws(&s->js);
	if (tfs_js_peek(&s->js) != ',')
		return tensor_fail(s, t, "data_offsets must hold exactly two integers");
	s->js.p++;
	if ((e = parse_u64(s, t, &t->end, "data_offsets")))
		return e;
	tfs_js_ws(&s->js);
	if (tfs_js_peek(&s->js) != ']')
		return tensor_fail(s, t, "data_offsets must hold exactly two integers");
	s->js.p++;
	s->js.depth--;
	return TFS_OK;
}

static tfs_err parse_tensor(struct sc *s, struct tfs_tensor *t)
{
	tfs_err e;
	tfs_js_ws(&s->js);
	if (tfs_js_peek(&s->js) == '[') {
		/* serde reads a struct from a sequence of its fields in order. */
		if ((e = tfs_js_enter(&s->js)) || (e = parse_dtype(s, t)) ||
		    (e = tfs_js_expect(&s->js, ',', "expected ',' after dtype")) || (e = parse_shape(s, t)) ||
		    (e = tfs_js_expect(&s->js, ',', "expected ',' after shape")) || (e = parse_offsets(s, t)))
			return e;
		tfs_js_ws(&s->js);
		if (tfs_js_peek(&s->js) != ']')
			return tensor_fail(s, t,
					   "the array form must hold exactly [dtype, shape, data_offsets]");
		s->js.p++;
		s->js.depth--;
		return TFS_OK;
	}
	if (tfs_js_peek(&s->js) != '{')
		return tensor_fail(s, t, "expected an object with dtype, shape and data_offsets");
	if ((e = tfs_js_enter(&s->js)))
		return e;
	unsigned seen = 0;
	int r = 0;
	if (!tfs_js_close_if_empty(&s->js, '}')) {
		do {
			struct tfs_jstr key;
			unsigned bit = 0;
			tfs_js_ws(&s->js);
			if (tfs_js_peek(&s->js) != '"')
				return tfs_js_err(&s->js, "expected a string key");
			if ((e = tfs_js_string(&s->js, &key)))
				return e;
			if (TFS_JS_IS(&key, "dtype"))
				bit = 1;
			else if (TFS_JS_IS(&key, "shape"))
				bit = 2;
			else if (TFS_JS_IS(&key, "data_offsets"))
				bit = 4;
			if (seen & bit) {
				char msg[64];
				snprintf(msg, sizeof msg, "field '%s' appears twice",
					 bit == 1   ? "dtype"
					 : bit == 2 ? "shape"
						    : "data_offsets");
				return tensor_fail(s, t, msg);
			}
			seen |= bit;
			if ((e = tfs_js_expect(&s->js, ':', "expected ':'")))
				return e;
			if (bit == 1)
				e = parse_dtype(s, t);
			else if (bit == 2)
				e = parse_shape(s, t);
			else if (bit == 4)
				e = parse_offsets(s, t);
			else
				e = tfs_js_skip(&s->js);
			if (e)
				return e;
		} while ((r = tfs_js_next(&s->js, '}', &e)) > 0);
		if (r < 0)
			return e;
	}
	if (!(seen & 1))
		return tensor_fail(s, t, "missing field 'dtype'");
	if (!(seen & 2))
		return tensor_fail(s, t, "missing field 'shape'");
	if (!(seen & 4))
		return tensor_fail(s, t, "missing field 'data_offsets'");
	return TFS_OK;
}

static tfs_err parse_metadata(struct sc *s)
{
	tfs_err e;
	struct tfs_table *h = s->h;
	tfs_js_ws(&s->js);
	if (tfs_js_peek(&s->js) == 'n')
		return tfs_js_literal(&s->js, "null");
	if (tfs_js_peek(&s->js) != '{')
		return tfs_js_err(&s->js, "__metadata__ must be an object of strings, or null");
	if ((e = tfs_js_enter(&s->js)))
		return e;
	h->has_metadata = true;
	if (tfs_js_close_if_empty(&s->js, '}'))
		return TFS_OK;
	int r;
	do {
		struct tfs_jstr str;
		struct tfs_meta_pair mp;
		tfs_js_ws(&s->js);
		if (tfs_js_peek(&s->js) != '"')
			return tfs_js_err(&s->js, "expected a string key");
		if ((e = tfs_js_string(&s->js, &str)) || (e = text(s, str.p, str.len, &mp.key_off)))
			return e;
		mp.key_len = (uint32_t)str.len;
		if ((e = tfs_js_expect(&s->js, ':', "expected ':'")))
			return e;
		tfs_js_ws(&s->js);
		if (tfs_js_peek(&s->js) != '"')
			return tfs_js_err(&s->js, "__metadata__ values must be strings");
		if ((e = tfs_js_string(&s->js, &str)) || (e = text(s, str.p, str.len, &mp.val_off)))
			return e;
		mp.val_len = (uint32_t)str.len;
		if (tfs_table_meta(&s->b, &mp))
			return tfs_js_nomem(&s->js);
	} while ((r = tfs_js_next(&s->js, '}', &e)) > 0);
	return r < 0 ? e : TFS_OK;
}

static tfs_err parse_top(struct sc *s)
{
	tfs_err e;
	int seen_meta = 0;
	tfs_js_ws(&s->js);
	if (tfs_js_peek(&s->js) != '{')
		return tfs_js_err(&s->js, "the header must be a JSON object");
	if ((e = tfs_js_enter(&s->js)))
		return e;
	int r = 0;
	if (!tfs_js_close_if_empty(&s->js, '}')) {
		do {
			struct tfs_jstr key;
			tfs_js_ws(&s->js);
			if (tfs_js_peek(&s->js) != '"')
				return tfs_js_err(&s->js, "expected a string key");
			if ((e = tfs_js_string(&s->js, &key)))
				return e;
			if (TFS_JS_IS(&key, "__metadata__")) {
				if (seen_meta)
					return tfs_js_err(&s->js, "__metadata__ appears twice");
				seen_meta = 1;
				if ((e = tfs_js_expect(&s->js, ':', "expected ':'")) ||
				    (e = parse_metadata(s)))
					return e;
			} else {
				struct tfs_tensor t;
				memset(&t, 0, sizeof t);
				if (key.len > UINT32_MAX)
					return tfs_js_nomem(&s->js);
				if ((e = text(s, key.p, key.len, &t.name_off)))
					return e;
				t.name_len = (uint32_t)key.len;
				if ((e = tfs_js_expect(&s->js, ':', "expected ':'")) ||
				    (e = parse_tensor(s, &t)) || (e = put(s, &t)))
					return e;
			}
		} while ((r = tfs_js_next(&s->js, '}', &e)) > 0);
		if (r < 0)
			return e;
	}
	tfs_js_ws(&s->js);
	if (s->js.p != s->js.end)
		return tfs_js_err(
			&s->js,
			"unexpected bytes after the JSON object (only spaces, tabs and newlines may pad the header)");
	return TFS_OK;
}

/* ---- validation ---- */

struct span {
	uint64_t begin, end;
	uint32_t i;
};

static int span_cmp(const void *a, const void *b)
{
	const struct span *x = a, *y = b;
	if (x->begin != y->begin)
		return x->begin < y->begin ? -1 : 1;
	if (x->end != y->end)
		return x->end < y->end ? -1 : 1;
	return x->i < y->i ? -1 : x->i > y->i;
}

static void fmt_shape(char *out, size_t sz, const uint64_t *dims, uint32_t ndim)
{
	size_t o = 0;
	o += (size_t)snprintf(out + o, sz - o, "[");
	for (uint32_t i = 0; i < ndim && o < sz; i++) {
		if (o + 30 > sz) {
			snprintf(out + o, sz - o, "...");
			o = strlen(out);
			break;
		}
		o += (size_t)snprintf(out + o, sz - o, "%s%llu", i ? "," : "", (unsigned long long)dims[i]);
	}
	if (o < sz)
		snprintf(out + o, sz - o, "]");
}

static tfs_err vfail_tensor(struct sc *s, const struct tfs_tensor *t, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

static tfs_err vfail_tensor(struct sc *s, const struct tfs_tensor *t, const char *fmt, ...)
{
	char q[160], rest[400];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(rest, sizeof rest, fmt, ap);
	va_end(ap);
	tfs_quote(q, sizeof q, s->h->arena + t->name_off, t->name_len);
	return tfs_fail(s->js.d, TFS_ERR_FORMAT, "tensor %s: %s", q, rest);
}

static tfs_err validate(struct sc *s, const struct tfs_parse_opts *opts)
{
	struct tfs_table *h = s->h;
	struct span *sp = NULL;
	tfs_err e = TFS_OK;
	uint64_t start = 0;
	const struct tfs_tensor *prev = NULL;

	if (h->n) {
		sp = malloc((size_t)h->n * sizeof *sp);
		if (!sp)
			return tfs_js_nomem(&s->js);
	}
	for (uint32_t i = 0; i < h->n; i++) {
		sp[i].begin = h->t[i].begin;
		sp[i].end = h->t[i].end;
		sp[i].i = i;
	}
	if (h->n)
		qsort(sp, h->n, sizeof *sp, span_cmp);

	for (uint32_t k = 0; k < h->n; k++) {
		const struct tfs_tensor *t = &h->t[sp[k].i];
		unsigned long long b = t->begin, en = t->end;
		if (t->end < t->begin) {
			e = vfail_tensor(s, t, "data_offsets [%llu,%llu] end before they begin", b, en);
			goto out;
		}
		if (t->begin > start) {
			e = vfail_tensor(
				s, t,
				"data_offsets [%llu,%llu] leave a gap: bytes %llu to %llu of the data belong to no tensor",
				b, en, (unsigned long long)start, b);
			goto out;
		}
		if (t->begin < start) {
			char q[160];
			tfs_quote(q, sizeof q, h->arena + prev->name_off, prev->name_len);
			e = vfail_tensor(s, t, "data_offsets [%llu,%llu] overlap tensor %s at [%llu,%llu]", b,
					 en, q, (unsigned long long)prev->begin,
					 (unsigned long long)prev->end);
			goto out;
		}
		start = t->end;
		prev = t;

		char shp[200];
		const uint64_t *dims = t->ndim ? h->dims + t->dims_off : NULL;
		if (t->dtype == TFS_DT_UNKNOWN) {
			if (opts && opts->warn) {
				char q[160], dq[80], msg[TFS_DIAG_MAX];
				tfs_quote(q, sizeof q, h->arena + t->name_off, t->name_len);
				tfs_quote(dq, sizeof dq, h->arena + t->dtype_off, t->dtype_len);
				snprintf(
					msg, sizeof msg,
					"tensor %s: unknown dtype %s, passed through without a size check (-o strict refuses it)",
					q, dq);
				opts->warn(opts->warn_ctx, msg);
			}
			continue;
		}
		uint64_t elems = 1;
		for (uint32_t d = 0; d < t->ndim; d++) {
			if (dims[d] && elems > UINT64_MAX / dims[d]) {
				fmt_shape(shp, sizeof shp, dims, t->ndim);
				e = vfail_tensor(s, t, "shape %s has more elements than fit in 64 bits", shp);
				goto out;
			}
			elems *= dims[d];
		}
		unsigned bits = tfs_dtype_info(t->dtype)->bits;
		if (elems > UINT64_MAX / bits) {
			fmt_shape(shp, sizeof shp, dims, t->ndim);
			e = vfail_tensor(s, t, "%s %s has more bits than fit in 64 bits",
					 tfs_dtype_name(t->dtype), shp);
			goto out;
		}
		uint64_t nbits = elems * bits;
		if (nbits % 8) {
			fmt_shape(shp, sizeof shp, dims, t->ndim);
			e = vfail_tensor(s, t, "%s %s is %llu bits, not a whole number of bytes",
					 tfs_dtype_name(t->dtype), shp, (unsigned long long)nbits);
			goto out;
		}
		if (t->end - t->begin != nbits / 8) {
			fmt_shape(shp, sizeof shp, dims, t->ndim);
			e = vfail_tensor(s, t,
					 "data_offsets [%llu,%llu] hold %llu bytes but %s %s needs %llu", b,
					 en, (unsigned long long)(t->end - t->begin),
					 tfs_dtype_name(t->dtype), shp, (unsigned long long)(nbits / 8));
			goto out;
		}
	}

	uint64_t data_len = h->file_size - h->data_start;
	if (start > data_len) {
		e = tfs_fail(
			s->js.d, TFS_ERR_FORMAT,
			"truncated file: the tensors need %llu bytes of data after the header but the file has %llu (%llu bytes missing; an incomplete download?)",
			(unsigned long long)start, (unsigned long long)data_len,
			(unsigned long long)(start - data_len));
	} else if (start < data_len) {
		e = tfs_fail(
			s->js.d, TFS_ERR_FORMAT,
			"%llu unexpected bytes after the last tensor: the data should end at byte %llu of the file, which has %llu",
			(unsigned long long)(data_len - start), (unsigned long long)(h->data_start + start),
			(unsigned long long)h->file_size);
	}
out:
	free(sp);
	return e;
}

tfs_err tfs_st_parse(const unsigned char *hdr, size_t n, uint64_t file_size,
		     const struct tfs_parse_opts *opts, struct tfs_table *out, struct tfs_diag *d)
{
	struct sc s;
	tfs_err e;
	size_t bad;

	memset(out, 0, sizeof *out);
	memset(&s, 0, sizeof s);
	out->format = tfs_format_safetensors.name;
	out->data_start = 8 + (uint64_t)n;
	out->file_size = file_size;
	if (n > TFS_HEADER_MAX || file_size < out->data_start)
		return tfs_fail(d, TFS_ERR_INVAL, "header length out of range");

	bad = tfs_utf8_check(hdr, n);
	if (bad != n)
		return tfs_fail(d, TFS_ERR_FORMAT,
				"the header is not valid UTF-8 (bad byte 0x%02x at byte %zu of the header)",
				hdr[bad], bad);

	tfs_js_init(&s.js, "header", hdr, n, TFS_NESTING_MAX, d);
	s.h = out;
	s.b.t = out;
	/* Upper bounds from the header's length, so the tables never move:
	 * decoded text is never longer than the header, a tensor takes at
	 * least 19 bytes of JSON ("":["F4",[],[0,0]],), a dimension at least
	 * 2. Pages never touched cost nothing; tfs_grow() still copes if a
	 * bound were ever wrong. */
	if (n >= (1u << 20)) {
		s.b.acap = n + 1;
		s.b.tcap = n / 19 + 1;
		s.b.dcap = n / 2 + 1;
		out->arena = malloc(s.b.acap);
		out->t = malloc(s.b.tcap * sizeof *out->t);
		out->dims = malloc(s.b.dcap * sizeof *out->dims);
		if (!out->arena || !out->t || !out->dims) {
			tfs_table_free(out);
			return tfs_fail(d, TFS_ERR_NOMEM, "out of memory for a %zu-byte header", n);
		}
		tfs_advise_huge(out->arena, s.b.acap);
		tfs_advise_huge(out->t, s.b.tcap * sizeof *out->t);
		tfs_advise_huge(out->dims, s.b.dcap * sizeof *out->dims);
	}
	s.flags = opts ? opts->flags : 0;
	e = parse_top(&s);
	if (!e)
		e = tfs_table_meta_dedupe(&s.b) ? tfs_js_nomem(&s.js) : TFS_OK;
	if (!e)
		e = validate(&s, opts);
	if (!e) {
		/* From here on offsets are absolute, as the table wants them. */
		for (uint32_t i = 0; i < out->n; i++) {
			out->t[i].begin += out->data_start;
			out->t[i].end += out->data_start;
			out->unknown_dtypes += out->t[i].dtype == TFS_DT_UNKNOWN;
		}
	}
	tfs_js_done(&s.js);
	tfs_table_builder_done(&s.b);
	if (e)
		tfs_table_free(out);
	return e;
}

/* ---- reading from a source ---- */

static int starts_with_ci(const unsigned char *p, size_t n, const char *lit)
{
	size_t k = strlen(lit);
	if (n < k)
		return 0;
	for (size_t i = 0; i < k; i++) {
		unsigned char c = p[i];
		if (c >= 'A' && c <= 'Z')
			c = (unsigned char)(c + 32);
		if (c != (unsigned char)lit[i])
			return 0;
	}
	return 1;
}

/* Whether the bytes read are text: printable ASCII, tabs and line ends,
 * and valid UTF-8 (a sequence cut by the end of what was read counts). A
 * real length prefix has zero high bytes; a byte of 0x80 or more is text
 * only inside a valid sequence, so random bytes and number dumps, which
 * hold control bytes or stray high bytes within a few dozen bytes, are
 * not taken for text. */
static int looks_text(const unsigned char *p, size_t n)
{
	if (n < 8)
		return 0;
	for (size_t i = 0; i < n; i++)
		if ((p[i] < 0x20 && p[i] != '\n' && p[i] != '\t' && p[i] != '\r' && p[i] != '\f') ||
		    p[i] == 0x7f)
			return 0;
	size_t ok = tfs_utf8_check(p, n);
	return ok == n || (n - ok < 4 && p[ok] >= 0xc2 && p[ok] <= 0xf4);
}

/* Says what a file that is not safetensors most likely is. */
static const char *sniff(const unsigned char *p, size_t n)
{
	size_t i = 0;
	if (tfs_is_lfs_pointer(p, n))
		return "this is a Git LFS pointer, not the file itself: fetch the real file (git lfs pull)";
	if (n >= 4 && memcmp(p, "GGUF", 4) == 0)
		return "this is a GGUF file, not safetensors";
	/* Archives and compressed files, by their magic bytes: a downloaded
	 * model is often one of these, and its first 8 bytes read as a
	 * 19-digit header length. */
	if (n >= 263 && memcmp(p + 257, "ustar", 5) == 0)
		return "this is a tar archive, not safetensors: unpack it (tar -xf) and mount what it holds";
	if (n >= 2 && p[0] == 0x1f && p[1] == 0x8b)
		return "this is a gzip-compressed file, not safetensors: decompress it first (gunzip)";
	if (n >= 4 && memcmp(p, "\x28\xb5\x2f\xfd", 4) == 0)
		return "this is a zstd-compressed file, not safetensors: decompress it first (zstd -d)";
	if (n >= 6 && memcmp(p,
			     "\xfd"
			     "7zXZ\0",
			     6) == 0)
		return "this is an xz-compressed file, not safetensors: decompress it first (xz -d)";
	if (n >= 3 && memcmp(p, "BZh", 3) == 0 && n >= 4 && p[3] >= '1' && p[3] <= '9')
		return "this is a bzip2-compressed file, not safetensors: decompress it first (bunzip2)";
	if (n >= 6 && memcmp(p, "7z\xbc\xaf\x27\x1c", 6) == 0)
		return "this is a 7-Zip archive, not safetensors: unpack it (7z x) and mount what it holds";
	if (n >= 4 && memcmp(p, "PK\x03\x04", 4) == 0)
		return "this is a zip archive (a PyTorch .bin/.pt checkpoint?), not safetensors";
	if (n >= 2 && p[0] == 0x80 && p[1] >= 2 && p[1] <= 5)
		return "this is a Python pickle (a PyTorch checkpoint?), not safetensors";
	while (i < n && (p[i] == ' ' || p[i] == '\t' || p[i] == '\n' || p[i] == '\r'))
		i++;
	if (starts_with_ci(p + i, n - i, "<!doctype html") || starts_with_ci(p + i, n - i, "<html") ||
	    starts_with_ci(p + i, n - i, "<head") || starts_with_ci(p + i, n - i, "<?xml"))
		return "this is an HTML or XML page (a failed download or an error page?), not safetensors";
	if (i < n && (p[i] == '{' || p[i] == '['))
		return "this is a JSON text file, not safetensors (pass the .safetensors file, not an index or config)";
	if (looks_text(p, n))
		return "this is a text file, not safetensors";
	return NULL;
}

tfs_err tfs_st_read(struct tfs_source *src, const struct tfs_parse_opts *opts, struct tfs_table *out,
		    struct tfs_diag *d)
{
	unsigned char head[512];
	uint64_t size = src->id.size, n;
	size_t got = size < sizeof head ? (size_t)size : sizeof head;
	tfs_err e;

	memset(out, 0, sizeof *out);
	if (size == 0)
		return tfs_fail(d, TFS_ERR_FORMAT, "the file is empty");
	if ((e = tfs_source_read(src, head, got, 0, d)))
		return e;
	const char *what = sniff(head, got);
	if (size < 8)
		return tfs_fail(d, TFS_ERR_FORMAT, "%s",
				what ? what : "the file is too short (under 8 bytes) to be safetensors");
	n = 0;
	for (int i = 7; i >= 0; i--)
		n = n << 8 | head[i];
	if (n > TFS_HEADER_MAX) {
		if (what)
			return tfs_fail(d, TFS_ERR_FORMAT, "%s", what);
		return tfs_fail(d, TFS_ERR_FORMAT,
				"the header length %llu is over the %u-byte limit (not a safetensors file?)",
				(unsigned long long)n, TFS_HEADER_MAX);
	}
	if (n > size - 8)
		return tfs_fail(
			d, TFS_ERR_FORMAT,
			"truncated file: the header length says %llu bytes but only %llu follow the 8-byte prefix (an incomplete download?)",
			(unsigned long long)n, (unsigned long long)(size - 8));
	unsigned char *buf = malloc((size_t)n + 1);
	if (!buf)
		return tfs_fail(d, TFS_ERR_NOMEM, "out of memory for a %llu-byte header",
				(unsigned long long)n);
	tfs_advise_huge(buf, (size_t)n + 1);
	if ((e = tfs_source_read(src, buf, (size_t)n, 8, d))) {
		free(buf);
		return e;
	}
	buf[n] = 0;
	e = tfs_st_parse(buf, (size_t)n, size, opts, out, d);
	free(buf);
	return e;
}

static int detect(const struct tfs_probe *p)
{
	if (p->nhead < 9 || p->size < 9)
		return 0;
	uint64_t n = 0;
	for (int i = 7; i >= 0; i--)
		n = n << 8 | p->head[i];
	if (n > TFS_HEADER_MAX || n > p->size - 8)
		return 0;
	unsigned char c = p->head[8];
	return c == '{' || c == ' ' || c == '\t' || c == '\n' || c == '\r';
}

const struct tfs_format tfs_format_safetensors = {
	.name = "safetensors",
	.ext = ".safetensors",
	.detect = detect,
	.read = tfs_st_read,
};
