/* GGUF (versions 2 and 3, little-endian), the container of llama.cpp and
 * ggml: magic, version, counts, key/value pairs, tensor infos, then the
 * data section at the next multiple of the alignment. The layout is
 * ggml-org/ggml docs/gguf.md; the verdict is that of ggml's own reader
 * (src/gguf.cpp, gguf_init_from_file_impl), check for check, plus the one
 * a mount needs: every tensor inside the file. See
 * shared/docs/tensor-formats.md section 1. */
#include "formats/gguf.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/hash.h"
#include "core/json.h"
#include "core/jscan.h"

/* The value types are core/kv.h's (the table keeps the pairs as read). */

#define GGML_MAX_NAME 64 /* ggml.h: a name and its NUL */
#define MAX_DIMS 4

/* The header (everything before the data) is read into memory; a bound
 * keeps a hostile count from asking for all of it. Real files: a few MB
 * (a 150,000-entry vocabulary is about 3 MB). */
#define HEADER_MAX (1024u << 20)

struct rd {
	struct tfs_source *src;
	uint64_t size;
	unsigned char *buf;
	size_t len; /* bytes of the file held, from offset 0 */
	size_t pos;
	struct tfs_diag *d;
};

static tfs_err need(struct rd *r, uint64_t n, const char *what)
{
	if (n <= r->len - r->pos)
		return TFS_OK;
	if (n > r->size - r->pos)
		return tfs_fail(r->d, TFS_ERR_FORMAT,
				"truncated file: it ends inside the header, in %s (at byte %zu of %llu)",
				what, r->pos, (unsigned long long)r->size);
	if (r->pos + n > HEADER_MAX)
		return tfs_fail(r->d, TFS_ERR_FORMAT, "the header is over %u MiB (at %s); not a real model's",
				HEADER_MAX >> 20, what);
	/* Double what is held, so that a header costs few reads (few
	 * requests over HTTP). */
	uint64_t want = r->pos + n;
	uint64_t grow = r->len < (256u << 10) ? (256u << 10) : r->len;
	if (want < r->len + grow)
		want = r->len + grow;
	if (want > r->size)
		want = r->size;
	if (want > HEADER_MAX)
		want = HEADER_MAX;
	unsigned char *p = realloc(r->buf, (size_t)want);
	if (!p)
		return tfs_fail(r->d, TFS_ERR_NOMEM, "out of memory for a %llu-byte header",
				(unsigned long long)want);
	r->buf = p;
	tfs_err e = tfs_source_read(r->src, p + r->len, (size_t)want - r->len, r->len, r->d);
	if (e)
		return e;
	r->len = (size_t)want;
	return TFS_OK;
}

static uint64_t le(const unsigned char *p, int n)
{
	uint64_t v = 0;
	for (int i = n - 1; i >= 0; i--)
		v = v << 8 | p[i];
	return v;
}

static tfs_err get(struct rd *r, int n, uint64_t *v, const char *what)
{
	tfs_err e = need(r, (uint64_t)n, what);
	if (e)
		return e;
	*v = le(r->buf + r->pos, n);
	r->pos += (size_t)n;
	return TFS_OK;
}

/* A string: u64 length, then the bytes. Leaves its place in *off. */
static tfs_err get_str(struct rd *r, size_t *off, size_t *len, const char *what)
{
	uint64_t n;
	tfs_err e = get(r, 8, &n, what);
	if (!e)
		e = need(r, n, what);
	if (e)
		return e;
	*off = r->pos;
	*len = (size_t)n;
	r->pos += (size_t)n;
	return TFS_OK;
}

/* ---- key/value pairs ---- */

struct kv {
	size_t key, klen; /* into the header buffer */
	size_t val;       /* the value's first byte (after the type) */
	uint32_t type;    /* TFS_KV_ARR: elem_type and count */
	uint32_t elem;
	uint64_t count;
};

static void quote_at(struct rd *r, size_t off, size_t len, char *q, size_t qs)
{
	tfs_quote(q, qs, (const char *)r->buf + off, len);
}

/* Steps over one value of type `t` (not an array). */
static tfs_err skip_value(struct rd *r, uint32_t t, const char *key)
{
	if (t == TFS_KV_STR) {
		size_t o, l;
		return get_str(r, &o, &l, key);
	}
	tfs_err e = need(r, tfs_kv_type_size(t), key);
	if (!e)
		r->pos += tfs_kv_type_size(t);
	return e;
}

static tfs_err read_kv(struct rd *r, uint64_t i, struct kv *kv, char *q, size_t qs)
{
	char what[64];
	uint64_t v;
	tfs_err e;
	snprintf(what, sizeof what, "key/value pair %llu", (unsigned long long)i);
	if ((e = get_str(r, &kv->key, &kv->klen, what)))
		return e;
	quote_at(r, kv->key, kv->klen, q, qs);
	if (kv->klen == 0)
		return tfs_fail(r->d, TFS_ERR_FORMAT, "key/value pair %llu has an empty key",
				(unsigned long long)i);
	snprintf(what, sizeof what, "the value of key %.40s", q);
	if ((e = get(r, 4, &v, what)))
		return e;
	kv->type = (uint32_t)v;
	kv->count = 1;
	if (kv->type == TFS_KV_ARR) {
		if ((e = get(r, 4, &v, what)))
			return e;
		kv->elem = (uint32_t)v;
		if ((e = get(r, 8, &kv->count, what)))
			return e;
		if (kv->elem >= TFS_KV_COUNT || kv->elem == TFS_KV_ARR)
			return tfs_fail(r->d, TFS_ERR_FORMAT,
					"key %s: an array of %s%u, which ggml's reader refuses", q,
					kv->elem == TFS_KV_ARR ? "arrays, type " : "invalid value type ",
					kv->elem);
	} else if (kv->type >= TFS_KV_COUNT) {
		return tfs_fail(r->d, TFS_ERR_FORMAT, "key %s has invalid value type %u", q, kv->type);
	}
	kv->val = r->pos;
	if (kv->type != TFS_KV_ARR)
		return skip_value(r, kv->type, what);
	if (kv->elem != TFS_KV_STR) {
		/* Fixed-size elements: check the whole array at once. */
		if (kv->count > (r->size - r->pos) / tfs_kv_type_size(kv->elem))
			return need(r, r->size - r->pos + 1, what);
		if ((e = need(r, kv->count * tfs_kv_type_size(kv->elem), what)))
			return e;
		r->pos += (size_t)(kv->count * tfs_kv_type_size(kv->elem));
		return TFS_OK;
	}
	/* Each string takes at least its 8-byte length. */
	if (kv->count > (r->size - r->pos) / 8)
		return need(r, r->size - r->pos + 1, what);
	for (uint64_t k = 0; k < kv->count; k++)
		if ((e = skip_value(r, TFS_KV_STR, what)))
			return e;
	return TFS_OK;
}

/* ---- the whole header ---- */

/* Duplicate keys: an open-addressed set over the key bytes. */
static int key_seen(struct rd *r, struct kv *kvs, uint32_t *set, size_t nset, uint32_t i)
{
	const unsigned char *k = r->buf + kvs[i].key;
	size_t j = tfs_hash(k, kvs[i].klen, tfs_hash_seed) & (nset - 1);
	while (set[j]) {
		const struct kv *o = &kvs[set[j] - 1];
		if (o->klen == kvs[i].klen && memcmp(r->buf + o->key, k, o->klen) == 0)
			return 1;
		j = (j + 1) & (nset - 1);
	}
	set[j] = i + 1;
	return 0;
}

static const struct kv *find_key(struct rd *r, const struct kv *kvs, uint64_t n, const char *key)
{
	size_t kl = strlen(key);
	for (uint64_t i = 0; i < n; i++)
		if (kvs[i].klen == kl && memcmp(r->buf + kvs[i].key, key, kl) == 0)
			return &kvs[i];
	return NULL;
}

/* An unsigned integer scalar of any width, for the keys tensorfs reads. */
static int kv_uint(struct rd *r, const struct kv *kv, uint64_t *v)
{
	if (!kv || kv->type == TFS_KV_ARR || tfs_kv_type_size(kv->type) == 0 || kv->type == TFS_KV_F32 ||
	    kv->type == TFS_KV_F64 || kv->type == TFS_KV_BOOL)
		return 0;
	*v = le(r->buf + kv->val, tfs_kv_type_size(kv->type));
	return 1;
}

static tfs_err facts(struct rd *r, struct tfs_table *out, const struct kv *kvs, uint64_t n, uint32_t version,
		     uint64_t align)
{
	char tmp[64];
	tfs_err e;
	snprintf(tmp, sizeof tmp, "%u", version);
	if ((e = tfs_table_fact(out, "gguf.version", tmp, strlen(tmp))))
		return e;
	snprintf(tmp, sizeof tmp, "%llu", (unsigned long long)align);
	if ((e = tfs_table_fact(out, "general.alignment", tmp, strlen(tmp))))
		return e;
	const struct kv *arch = find_key(r, kvs, n, "general.architecture");
	static const char *const strs[] = {"general.architecture", "general.name"};
	for (size_t i = 0; i < 2; i++) {
		const struct kv *kv = find_key(r, kvs, n, strs[i]);
		if (kv && kv->type == TFS_KV_STR) {
			size_t l = (size_t)le(r->buf + kv->val, 8);
			char q[200];
			tfs_quote(q, sizeof q, (const char *)r->buf + kv->val + 8, l);
			/* Shown without the quotes tfs_quote adds. */
			size_t ql = strlen(q);
			if ((e = tfs_table_fact(out, strs[i], q + 1, ql >= 2 ? ql - 2 : 0)))
				return e;
		}
	}
	if (arch && arch->type == TFS_KV_STR) {
		size_t al = (size_t)le(r->buf + arch->val, 8);
		char key[128];
		uint64_t v;
		if (al < 64) {
			snprintf(key, sizeof key, "%.*s.context_length", (int)al,
				 (const char *)r->buf + arch->val + 8);
			if (kv_uint(r, find_key(r, kvs, n, key), &v)) {
				snprintf(tmp, sizeof tmp, "%llu", (unsigned long long)v);
				for (char *c = key; *c; c++)
					if ((unsigned char)*c < 0x20 || *c == 0x7f)
						*c = '?';
				if ((e = tfs_table_fact(out, key, tmp, strlen(tmp))))
					return e;
			}
		}
	}
	return TFS_OK;
}

static tfs_err fail_tensor(struct rd *r, size_t off, size_t len, const char *fmt, ...)
	__attribute__((format(printf, 4, 5)));
static tfs_err fail_tensor(struct rd *r, size_t off, size_t len, const char *fmt, ...)
{
	char q[160], msg[TFS_DIAG_MAX];
	va_list ap;
	quote_at(r, off, len, q, sizeof q);
	va_start(ap, fmt);
	vsnprintf(msg, sizeof msg, fmt, ap);
	va_end(ap);
	return tfs_fail(r->d, TFS_ERR_FORMAT, "tensor %s: %s", q, msg);
}

static tfs_err read_tensors(struct rd *r, struct tfs_table_builder *b, uint64_t nt)
{
	tfs_err e;
	for (uint64_t i = 0; i < nt; i++) {
		char what[64];
		size_t no, nl;
		uint64_t v, ne[MAX_DIMS] = {1, 1, 1, 1};
		snprintf(what, sizeof what, "tensor info %llu", (unsigned long long)i);
		if ((e = get_str(r, &no, &nl, what)))
			return e;
		if (nl >= GGML_MAX_NAME)
			return fail_tensor(r, no, nl, "the name is %zu bytes; ggml allows at most %d", nl,
					   GGML_MAX_NAME - 1);
		if (memchr(r->buf + no, 0, nl))
			return fail_tensor(r, no, nl, "the name holds a NUL byte");
		if ((e = get(r, 4, &v, what)))
			return e;
		uint32_t nd = (uint32_t)v;
		if (nd > MAX_DIMS)
			return fail_tensor(r, no, nl, "%u dimensions; ggml allows at most %d", nd, MAX_DIMS);
		for (uint32_t k = 0; k < nd; k++) {
			if ((e = get(r, 8, &ne[k], what)))
				return e;
			if ((int64_t)ne[k] < 0)
				return fail_tensor(r, no, nl, "dimension %u is negative (%lld)", k,
						   (long long)(int64_t)ne[k]);
		}
		/* The element count must fit in int64, as ggml requires. */
		uint64_t elems = 1;
		for (uint32_t k = 0; k < MAX_DIMS; k++) {
			if (ne[k] && elems > (uint64_t)INT64_MAX / ne[k])
				return fail_tensor(r, no, nl, "%llu x %llu x %llu x %llu elements overflow",
						   (unsigned long long)ne[0], (unsigned long long)ne[1],
						   (unsigned long long)ne[2], (unsigned long long)ne[3]);
			elems *= ne[k];
		}
		if ((e = get(r, 4, &v, what)))
			return e;
		unsigned dt;
		const char *removed;
		tfs_dtype_from_ggml((uint32_t)v, &dt, &removed);
		if (removed)
			return fail_tensor(r, no, nl,
					   "ggml type %u (%s) was removed from ggml; convert the file",
					   (unsigned)v, removed);
		if (dt == TFS_DT_UNKNOWN)
			return fail_tensor(
				r, no, nl,
				"ggml type %u is unknown to tensorfs, so the tensor's size cannot be known",
				(unsigned)v);
		const struct tfs_dtype_info *di = tfs_dtype_info(dt);
		uint64_t blk = di->block ? di->block : 1;
		if (ne[0] % blk)
			return fail_tensor(r, no, nl,
					   "%llu elements per row, not a multiple of %s's block of %llu",
					   (unsigned long long)ne[0], di->name, (unsigned long long)blk);
		uint64_t bytes = tfs_dtype_bytes(dt, elems);
		if (bytes == UINT64_MAX)
			return fail_tensor(r, no, nl, "its size overflows");
		if ((e = get(r, 8, &v, what)))
			return e;
		struct tfs_tensor t = {.begin = v,
				       .end = v + bytes,
				       .name_len = (uint32_t)nl,
				       .ndim = nd,
				       .dtype = (uint16_t)dt};
		if (v > UINT64_MAX - bytes)
			return fail_tensor(r, no, nl, "offset %llu overflows", (unsigned long long)v);
		t.dims_off = (uint32_t)b->t->ndims;
		if (b->t->ndims + MAX_DIMS >= UINT32_MAX)
			return tfs_fail(r->d, TFS_ERR_FORMAT, "too many dimensions");
		/* numpy order: slowest first, ne reversed (as gguf-py does). */
		for (uint32_t k = nd; k-- > 0;)
			if (tfs_table_dim(b, ne[k]))
				return tfs_fail(r->d, TFS_ERR_NOMEM, "out of memory");
		int dup;
		if (tfs_table_text(b, (const char *)r->buf + no, nl, &t.name_off) ||
		    tfs_table_put(b, &t, 0, &dup))
			return tfs_fail(r->d, TFS_ERR_NOMEM, "out of memory");
		if (dup)
			return fail_tensor(r, no, nl, "the name is used twice");
	}
	return TFS_OK;
}

static tfs_err check_layout(struct rd *r, struct tfs_table *out, uint64_t align)
{
	/* ggml's reader wants the tensors in file order, each at the padded
	 * end of the one before; a mount wants them in the file. */
	uint64_t expect = 0;
	for (uint32_t i = 0; i < out->n; i++) {
		struct tfs_tensor *t = &out->t[i];
		char q[160];
		tfs_quote(q, sizeof q, tfs_tensor_name(out, t), t->name_len);
		if (t->begin % align)
			return tfs_fail(r->d, TFS_ERR_FORMAT,
					"tensor %s: offset %llu is not a multiple of the alignment %llu", q,
					(unsigned long long)t->begin, (unsigned long long)align);
		if (t->begin != expect)
			return tfs_fail(
				r->d, TFS_ERR_FORMAT,
				"tensor %s: offset %llu, but ggml's reader expects %llu (the end of the tensor before it, aligned)",
				q, (unsigned long long)t->begin, (unsigned long long)expect);
		uint64_t sz = t->end - t->begin, padded = sz + (align - sz % align) % align;
		if (padded < sz || expect > UINT64_MAX - padded)
			return tfs_fail(r->d, TFS_ERR_FORMAT, "tensor %s: the data section overflows", q);
		expect += padded;
		if (out->data_start > r->size || t->end > r->size - out->data_start)
			return tfs_fail(
				r->d, TFS_ERR_FORMAT,
				"truncated file: tensor %s ends at byte %llu but the file has %llu bytes (an incomplete download?)",
				q, (unsigned long long)(out->data_start + t->end),
				(unsigned long long)r->size);
		t->begin += out->data_start;
		t->end += out->data_start;
	}
	return TFS_OK;
}

/* Magic, version and the two counts; counts the file cannot hold are
 * refused before anything is allocated. */
static tfs_err preamble(struct rd *r, uint32_t *version, uint64_t *nt, uint64_t *nkv)
{
	struct tfs_diag *d = r->d;
	uint64_t v;
	tfs_err e = need(r, 4, "the magic number");
	if (e)
		return e;
	if (memcmp(r->buf, "GGUF", 4) != 0)
		return tfs_fail(
			d, TFS_ERR_FORMAT, "%s",
			memcmp(r->buf, "FUGG", 4) == 0
				? "this GGUF file is big-endian; tensorfs reads little-endian GGUF only"
				: "not a GGUF file (no GGUF magic number)");
	r->pos = 4;
	if ((e = get(r, 4, &v, "the version")))
		return e;
	*version = (uint32_t)v;
	if (*version && (*version & 0xffff) == 0)
		return tfs_fail(
			d, TFS_ERR_FORMAT,
			"this GGUF file is big-endian (version field 0x%08x); tensorfs reads little-endian GGUF only",
			*version);
	if (*version == 1 || *version == 0 || *version > 3)
		return tfs_fail(d, TFS_ERR_FORMAT,
				"GGUF version %u is not supported (versions 2 and 3 are)%s", *version,
				*version == 1 ? "; convert the file with a current llama.cpp" : "");
	if ((e = get(r, 8, nt, "the tensor count")) || (e = get(r, 8, nkv, "the key/value count")))
		return e;
	/* A key/value pair takes at least 13 bytes, a tensor info 24. */
	if (*nkv > r->size / 13 || *nt > r->size / 24 || *nkv > HEADER_MAX / 13 || *nt > HEADER_MAX / 24)
		return tfs_fail(
			d, TFS_ERR_FORMAT,
			"the header claims %llu tensors and %llu key/value pairs, more than a %llu-byte file can hold",
			(unsigned long long)*nt, (unsigned long long)*nkv, (unsigned long long)r->size);
	return TFS_OK;
}

static tfs_err alignment(struct rd *r, const struct kv *kvs, uint64_t nkv, uint64_t *align)
{
	const struct kv *a = find_key(r, kvs, nkv, "general.alignment");
	if (!a)
		return TFS_OK;
	if (a->type != TFS_KV_U32)
		return tfs_fail(r->d, TFS_ERR_FORMAT, "general.alignment is of type %s; ggml requires UINT32",
				tfs_kv_type_name(a->type));
	*align = le(r->buf + a->val, 4);
	if (*align == 0 || (*align & (*align - 1)))
		return tfs_fail(r->d, TFS_ERR_FORMAT, "general.alignment %llu is not a power of 2",
				(unsigned long long)*align);
	return TFS_OK;
}

/* Which part of a split model this is (a count of 1 or less: a whole model). */
static tfs_err split_keys(struct rd *r, const struct kv *kvs, uint64_t nkv, uint64_t *no, uint64_t *count)
{
	const struct kv *sn = find_key(r, kvs, nkv, "split.no"), *sc = find_key(r, kvs, nkv, "split.count");
	if (!sc || !kv_uint(r, sc, count) || *count <= 1)
		return TFS_OK;
	if (!kv_uint(r, sn, no) || *no >= *count)
		return tfs_fail(r->d, TFS_ERR_FORMAT,
				"split.count is %llu but split.no is missing or out of range",
				(unsigned long long)*count);
	return TFS_OK;
}

/* Keeps the key/value bytes for __metadata__.json; the JSON itself waits
 * until someone reads it. The header buffer itself, not a copy of it, is
 * kept: a vocabulary can be megabytes. */
static tfs_err keep_meta(struct rd *r, struct tfs_table *out, size_t kv_begin, size_t kv_end, uint64_t nkv)
{
	out->kv.own = r->buf;
	r->buf = NULL;
	out->kv.p = out->kv.own + kv_begin;
	out->kv.len = kv_end - kv_begin;
	out->kv.n = nkv;
	out->has_metadata = nkv > 0;
	return TFS_OK;
}

tfs_err tfs_gguf_read(struct tfs_source *src, const struct tfs_parse_opts *opts, struct tfs_table *out,
		      struct tfs_diag *d)
{
	struct rd r = {.src = src, .size = src->id.size, .d = d};
	struct tfs_table_builder b = {.t = out};
	struct kv *kvs = NULL;
	uint32_t *set = NULL;
	uint64_t nt = 0, nkv = 0, align = 32;
	uint32_t version = 0;
	tfs_err e;
	(void)opts;

	memset(out, 0, sizeof *out);
	out->format = tfs_format_gguf.name;
	out->file_size = r.size;
	if ((e = preamble(&r, &version, &nt, &nkv)))
		goto out;
	size_t kv_begin = r.pos;
	kvs = calloc(nkv ? (size_t)nkv : 1, sizeof *kvs);
	size_t nset = 16;
	while (nset < nkv * 2)
		nset *= 2;
	set = calloc(nset, sizeof *set);
	if (!kvs || !set) {
		e = tfs_fail(d, TFS_ERR_NOMEM, "out of memory for %llu key/value pairs",
			     (unsigned long long)nkv);
		goto out;
	}
	for (uint64_t i = 0; i < nkv; i++) {
		char q[160];
		if ((e = read_kv(&r, i, &kvs[i], q, sizeof q)))
			goto out;
		if (key_seen(&r, kvs, set, nset, (uint32_t)i)) {
			e = tfs_fail(d, TFS_ERR_FORMAT, "key %s appears twice", q);
			goto out;
		}
	}
	size_t kv_end = r.pos;
	uint64_t no = 0, count = 0;
	if ((e = alignment(&r, kvs, nkv, &align)) || (e = split_keys(&r, kvs, nkv, &no, &count)))
		goto out;
	if (count > 1) {
		out->part_no = (uint32_t)no;
		out->part_count = (uint32_t)count;
	}
	if ((e = read_tensors(&r, &b, nt)))
		goto out;
	out->data_start = r.pos + (align - r.pos % align) % align;
	if ((e = check_layout(&r, out, align)))
		goto out;
	if ((e = facts(&r, out, kvs, nkv, version, align))) {
		e = tfs_fail(d, TFS_ERR_NOMEM, "out of memory");
		goto out;
	}
	if (no || count) {
		char tmp[48];
		snprintf(tmp, sizeof tmp, "%llu of %llu", (unsigned long long)no + 1,
			 (unsigned long long)count);
		if ((e = tfs_table_fact(out, "split", tmp, strlen(tmp))))
			goto out;
	}
	e = keep_meta(&r, out, kv_begin, kv_end, nkv);
out:
	tfs_table_builder_done(&b);
	free(kvs);
	free(set);
	free(r.buf);
	if (e)
		tfs_table_free(out);
	return e;
}

static int detect(const struct tfs_probe *p)
{
	return p->nhead >= 4 && (memcmp(p->head, "GGUF", 4) == 0 || memcmp(p->head, "FUGG", 4) == 0) ? 2 : 0;
}

/* llama.cpp's split naming (llama_split_path): PREFIX-00001-of-00003.gguf,
 * parts numbered from 1. */
static tfs_err part_name(const char *name, uint32_t k, uint32_t count, char *out, size_t cap)
{
	size_t n = strlen(name);
	const char *tail = "-00001-of-00000.gguf";
	size_t tl = strlen(tail);
	if (n < tl || strcmp(name + n - 5, ".gguf") != 0)
		return TFS_ERR_UNHANDLED;
	const char *s = name + n - tl;
	unsigned a, c;
	char dash;
	if (sscanf(s, "-%5u-of-%5u.gguf%c", &a, &c, &dash) != 2 || c != count || s[0] != '-' || s[6] != '-' ||
	    s[9] != '-')
		return TFS_ERR_UNHANDLED;
	int w = snprintf(out, cap, "%.*s-%05u-of-%05u.gguf", (int)(n - tl), name, k + 1, count);
	return w < 0 || (size_t)w >= cap ? TFS_ERR_UNHANDLED : TFS_OK;
}

const struct tfs_format tfs_format_gguf = {
	.name = "gguf",
	.ext = ".gguf",
	.detect = detect,
	.read = tfs_gguf_read,
	.part_name = part_name,
};
