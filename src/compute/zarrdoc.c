/* What -o zarr computes (compute/zarrdoc.h), apart from the view that shows it
 * (views/zarr.c): how a tensor is cut into chunks and what each chunk's
 * name is, the metadata documents, and the tensor's name as they write
 * it, in slices. Nothing here knows the tree. */
#include "compute/zarrdoc.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/json.h"
#include "core/names.h"
#include "core/utf8.h"
#include "compute/convert.h"

/* ---- the arrays ---- */

struct ztype {
	unsigned dtype;
	const char *typestr, *data_type;
};

/* The dtypes NumPy has, shown as they are. */
static const struct ztype native[] = {
	{TFS_DT_BOOL, "|b1", "bool"},     {TFS_DT_U8, "|u1", "uint8"},         {TFS_DT_I8, "|i1", "int8"},
	{TFS_DT_I16, "<i2", "int16"},     {TFS_DT_U16, "<u2", "uint16"},       {TFS_DT_F16, "<f2", "float16"},
	{TFS_DT_I32, "<i4", "int32"},     {TFS_DT_U32, "<u4", "uint32"},       {TFS_DT_F32, "<f4", "float32"},
	{TFS_DT_C64, "<c8", "complex64"}, {TFS_DT_F64, "<f8", "float64"},      {TFS_DT_I64, "<i8", "int64"},
	{TFS_DT_U64, "<u8", "uint64"},    {TFS_DT_C128, "<c16", "complex128"},
};

static uint64_t mul(uint64_t a, uint64_t b, int *over)
{
	if (a && b > UINT64_MAX / a)
		*over = 1;
	return a * b;
}

tfs_err tfs_zarr_geom(const struct tfs_table *h, const struct tfs_tensor *t, uint64_t target,
		      struct tfs_zarr_geom *g)
{
	memset(g, 0, sizeof *g);
	g->dtype = t->dtype;
	for (size_t k = 0; k < sizeof native / sizeof native[0]; k++)
		if (native[k].dtype == t->dtype) {
			g->typestr = native[k].typestr;
			g->data_type = native[k].data_type;
			g->itemsize = tfs_dtype_info(t->dtype)->bits / 8;
		}
	if (!g->typestr && tfs_converts(t->dtype)) {
		g->converted = 1;
		g->typestr = "<f4";
		g->data_type = "float32";
		g->itemsize = 4;
	}
	if (!g->typestr) {
		g->raw = 1;
		g->typestr = "|u1";
		g->data_type = "uint8";
		g->itemsize = 1;
	}
	int over = 0;
	g->ndim = g->raw ? 1 : t->ndim;
	if (g->raw) {
		g->rows = tfs_tensor_size(t);
		g->row_bytes = 1;
	} else {
		g->rows = t->ndim ? h->dims[t->dims_off] : 1;
		g->row_bytes = g->itemsize;
		for (uint32_t k = 1; k < t->ndim; k++)
			g->row_bytes = mul(g->row_bytes, h->dims[t->dims_off + k], &over);
	}
	g->bytes = mul(g->rows, g->row_bytes, &over);
	if (over)
		return TFS_ERR_UNHANDLED;
	if (!g->bytes) {
		g->slab_rows = 1;
		return TFS_OK;
	}
	if (!target)
		target = 1;
	/* The row count nearest the target: never over it by more than half
	 * a row, at least one. No divisor of the row count is sought: a prime
	 * count would give one-row chunks. */
	uint64_t k = target / g->row_bytes + (target % g->row_bytes >= (g->row_bytes + 1) / 2);
	if (k < 1)
		k = 1;
	if (k > g->rows)
		k = g->rows;
	g->slab_rows = k;
	g->chunk_bytes = k * g->row_bytes;
	g->nchunks = g->rows / k + (g->rows % k != 0);
	return TFS_OK;
}

uint64_t tfs_zarr_dim(const struct tfs_zarr_geom *g, const struct tfs_table *h, const struct tfs_tensor *t,
		      uint32_t k)
{
	return g->raw ? g->rows : h->dims[t->dims_off + k];
}

size_t tfs_zarr_chunk_key(const struct tfs_zarr_geom *g, uint64_t c, char *out, size_t cap)
{
	int n = snprintf(out, cap, "%llu", (unsigned long long)c);
	size_t o = n > 0 ? (size_t)n : 0;
	/* (a key that does not fit is cut short: the caller sizes out by
	 * TFS_ZARR_KEY_MAX) */
	for (uint32_t k = 1; k < g->ndim && o + 3 <= cap; k++) {
		memcpy(out + o, ".0", 3);
		o += 2;
	}
	return o;
}

int tfs_zarr_chunk_find(const struct tfs_zarr_geom *g, const char *name, size_t len, uint64_t *c)
{
	size_t k = 0;
	uint64_t v = 0;
	/* Decimal digits, no sign and no leading zero, as the key is written. */
	while (k < len && name[k] >= '0' && name[k] <= '9') {
		if (v > (UINT64_MAX - 9) / 10 || (k == 1 && name[0] == '0'))
			return 0;
		v = v * 10 + (uint64_t)(name[k++] - '0');
	}
	if (k == 0 || v >= g->nchunks)
		return 0;
	for (uint32_t d = 1; d < g->ndim; d++, k += 2)
		if (len - k < 2 || name[k] != '.' || name[k + 1] != '0')
			return 0;
	*c = v;
	return k == len;
}

void tfs_zarr_chunk_span(const struct tfs_zarr_geom *g, uint64_t c, uint64_t off, uint64_t len,
			 uint64_t *from, uint64_t *data, uint64_t *zeros)
{
	uint64_t at = c * g->chunk_bytes + off;
	uint64_t have = at < g->bytes ? g->bytes - at : 0;
	*from = at;
	*data = len < have ? len : have;
	*zeros = len - *data;
}

/* ---- ASCII ---- */

/* zarr-python 2 reads its metadata as ASCII (json.dumps' ensure_ascii
 * form): the tail of *buf from `from` on, valid UTF-8 as the one JSON
 * writer leaves it, is rewritten with every other character as \uXXXX (a
 * surrogate pair past U+FFFF). Only strings hold such bytes. Character by
 * character: a piece of the text cut between characters comes out as the
 * same piece of the whole's. */
tfs_err tfs_zarr_ascii(char **buf, size_t *len, size_t *cap, size_t from)
{
	size_t k = from;
	while (k < *len && !((unsigned char)(*buf)[k] & 0x80))
		k++;
	if (k == *len)
		return TFS_OK;
	char *nb = NULL;
	size_t nl = 0, nc = 0;
	const unsigned char *s = (const unsigned char *)*buf;
	tfs_err e = tfs_json_put(&nb, &nl, &nc, *buf, k);
	while (!e && k < *len) {
		if (s[k] < 0x80) {
			e = tfs_json_put(&nb, &nl, &nc, *buf + k, 1);
			k++;
			continue;
		}
		unsigned n = s[k] >= 0xf0 ? 4 : s[k] >= 0xe0 ? 3 : 2;
		uint32_t cp = s[k] & (0x7f >> n);
		for (unsigned j = 1; j < n && k + j < *len; j++)
			cp = cp << 6 | (s[k + j] & 0x3f);
		k += n;
		char esc[16];
		int el = cp > 0xffff ? snprintf(esc, sizeof esc, "\\u%04x\\u%04x",
						0xd800 + ((cp - 0x10000) >> 10),
						0xdc00 + ((cp - 0x10000) & 0x3ff))
				     : snprintf(esc, sizeof esc, "\\u%04x", cp);
		e = tfs_json_put(&nb, &nl, &nc, esc, (size_t)el);
	}
	if (e) {
		free(nb);
		return e;
	}
	free(*buf);
	*buf = nb;
	*len = nl;
	*cap = nc;
	return TFS_OK;
}

/* ---- the tensor's name, in slices ---- */

size_t tfs_zarr_name_cut(const char *name, size_t n, size_t at)
{
	const unsigned char *s = (const unsigned char *)name;
	if (at >= n)
		return n;
	/* The JSON writer reads a well-formed UTF-8 sequence whole and any
	 * other byte alone, so every byte that is not a continuation byte
	 * starts a character. `at` is inside one only if the nearest such
	 * byte before it (at most 3 back) starts a sequence reaching past it. */
	for (size_t q = at; q > 0 && at - q < 3;) {
		q--;
		if ((s[q] & 0xc0) == 0x80)
			continue;
		size_t len = s[q] >= 0xf0 ? 4 : s[q] >= 0xe0 ? 3 : 2;
		if (s[q] >= 0xc2 && s[q] <= 0xf4 && q + len > at && q + len <= n &&
		    tfs_utf8_check(s + q, len) == len)
			return q + len;
		break;
	}
	return at;
}

tfs_err tfs_zarr_name_part(const char *name, size_t from, size_t to, char **buf, size_t *len, size_t *cap)
{
	size_t at = *len;
	tfs_err e = tfs_json_str(buf, len, cap, name + from, to - from);
	if (!e)
		e = tfs_zarr_ascii(buf, len, cap, at);
	if (e)
		return e;
	/* Without its quotes: the document writes them once. */
	memmove(*buf + at, *buf + at + 1, *len - at - 2);
	*len -= 2;
	(*buf)[*len] = 0;
	return TFS_OK;
}

/* ---- the documents ---- */

/* Where a document goes: its text into *buf, or, once put_name is
 * called, the rest into the tail; the name itself is not written. */
struct out {
	char **buf;
	size_t *len, *cap;
	struct tfs_zarr_doc *x;
	tfs_err e;
};

static void put(struct out *o, const char *s)
{
	if (!o->e)
		o->e = tfs_json_puts(o->buf, o->len, o->cap, s);
}

static void put_u64(struct out *o, uint64_t v)
{
	if (!o->e)
		o->e = tfs_json_u64(o->buf, o->len, o->cap, v);
}

static void put_str(struct out *o, const char *s, size_t n)
{
	if (!o->e)
		o->e = tfs_json_str(o->buf, o->len, o->cap, s, n);
}

static void put_name(struct out *o)
{
	o->x->named = 1;
	o->buf = &o->x->tail;
	o->len = &o->x->tail_len;
	o->cap = &o->x->tail_cap;
}

/* The array's shape, or (chunks) a chunk's: every axis whole but the
 * first, in slabs; a chunk is never 0 along an axis (an empty array's
 * chunks are still shapes of at least 1). */
static void put_dims(struct out *o, const struct tfs_zarr_geom *g, const struct tfs_table *h,
		     const struct tfs_tensor *t, int chunks)
{
	put(o, "[");
	for (uint32_t k = 0; k < g->ndim; k++) {
		uint64_t d = chunks && !k ? g->slab_rows : tfs_zarr_dim(g, h, t, k);
		put(o, k ? ", " : "");
		put_u64(o, chunks && !d ? 1 : d);
	}
	put(o, "]");
}

static void put_fill(struct out *o, const struct tfs_zarr_geom *g)
{
	char k = g->typestr[1];
	if (k == 'b')
		put(o, "false");
	else if (k == 'f')
		put(o, "0.0");
	else if (k == 'c')
		put(o, "[0.0, 0.0]"); /* (real, imaginary) in both formats */
	else
		put(o, "0");
}

static void put_dim_names(struct out *o, const struct tfs_zarr_geom *g, const char *leaf, size_t leaf_len)
{
	char buf[TFS_NAME_MAX + 32];
	put(o, "[");
	for (uint32_t k = 0; k < g->ndim; k++) {
		int n = snprintf(buf, sizeof buf, "%.*s.%u", (int)leaf_len, leaf, (unsigned)k);
		put(o, k ? ", " : "");
		put_str(o, buf, n > 0 ? (size_t)n : 0);
	}
	put(o, "]");
}

/* The tensor's own name (left to the caller), stored dtype and shape. */
static void put_tensor_attrs(struct out *o, const struct tfs_table *h, const struct tfs_tensor *t,
			     const char *indent)
{
	size_t dl;
	const char *dt = tfs_tensor_dtype(h, t, &dl);
	put(o, indent);
	put(o, "\"tensor_dtype\": ");
	put_str(o, dt, dl);
	put(o, ",\n");
	put(o, indent);
	put(o, "\"tensor_name\": ");
	put_name(o);
	put(o, ",\n");
	put(o, indent);
	put(o, "\"tensor_shape\": [");
	for (uint32_t k = 0; k < t->ndim; k++) {
		put(o, k ? ", " : "");
		put_u64(o, h->dims[t->dims_off + k]);
	}
	put(o, "]");
}

static void zarray(struct out *o, const struct tfs_zarr_geom *g, const struct tfs_table *h,
		   const struct tfs_tensor *t)
{
	put(o, "{\n    \"chunks\": ");
	put_dims(o, g, h, t, 1);
	put(o, ",\n    \"compressor\": null,\n    \"dimension_separator\": \".\",\n    \"dtype\": \"");
	put(o, g->typestr);
	put(o, "\",\n    \"fill_value\": ");
	put_fill(o, g);
	put(o, ",\n    \"filters\": null,\n    \"order\": \"C\",\n    \"shape\": ");
	put_dims(o, g, h, t, 0);
	put(o, ",\n    \"zarr_format\": 2\n}\n");
}

static void zattrs(struct out *o, const struct tfs_zarr_geom *g, const struct tfs_table *h,
		   const struct tfs_tensor *t, const char *leaf, size_t leaf_len)
{
	/* xarray's name for the dimensions. */
	put(o, "{\n    \"_ARRAY_DIMENSIONS\": ");
	put_dim_names(o, g, leaf, leaf_len);
	put(o, ",\n");
	put_tensor_attrs(o, h, t, "    ");
	put(o, "\n}\n");
}

static void array_json(struct out *o, const struct tfs_zarr_geom *g, const struct tfs_table *h,
		       const struct tfs_tensor *t, const char *leaf, size_t leaf_len)
{
	put(o, "{\n    \"zarr_format\": 3,\n    \"node_type\": \"array\",\n    \"shape\": ");
	put_dims(o, g, h, t, 0);
	put(o, ",\n    \"data_type\": \"");
	put(o, g->data_type);
	put(o, "\",\n    \"chunk_grid\": {\"name\": \"regular\", \"configuration\": {\"chunk_shape\": ");
	put_dims(o, g, h, t, 1);
	put(o, "}},\n    \"chunk_key_encoding\": {\"name\": \"v2\", \"configuration\": {\"separator\": "
	       "\".\"}},\n    \"fill_value\": ");
	put_fill(o, g);
	/* One-byte types have no byte order to name. */
	put(o, g->itemsize > 1 ? ",\n    \"codecs\": [{\"name\": \"bytes\", \"configuration\": {\"endian\": "
				 "\"little\"}}],\n"
			       : ",\n    \"codecs\": [{\"name\": \"bytes\"}],\n");
	put(o, "    \"attributes\": {\n");
	put_tensor_attrs(o, h, t, "        ");
	put(o, "\n    },\n    \"dimension_names\": ");
	put_dim_names(o, g, leaf, leaf_len);
	put(o, "\n}\n");
}

void tfs_zarr_doc_free(struct tfs_zarr_doc *x)
{
	free(x->head);
	free(x->tail);
	memset(x, 0, sizeof *x);
}

tfs_err tfs_zarr_doc(int which, const struct tfs_zarr_geom *g, const struct tfs_table *h,
		     const struct tfs_tensor *t, const char *leaf, size_t leaf_len, struct tfs_zarr_doc *x)
{
	memset(x, 0, sizeof *x);
	struct out o = {&x->head, &x->head_len, &x->head_cap, x, TFS_OK};
	if (which == TFS_ZARR_ZARRAY)
		zarray(&o, g, h, t);
	else if (which == TFS_ZARR_ZATTRS)
		zattrs(&o, g, h, t, leaf, leaf_len);
	else
		array_json(&o, g, h, t, leaf, leaf_len);
	/* (both made whole first: neither ends inside a character) */
	if (!o.e)
		o.e = tfs_zarr_ascii(&x->head, &x->head_len, &x->head_cap, 0);
	if (!o.e && x->named)
		o.e = tfs_zarr_ascii(&x->tail, &x->tail_len, &x->tail_cap, 0);
	/* Never NULL, even empty: the view copies from them. */
	if (!o.e && !x->tail)
		o.e = tfs_json_put(&x->tail, &x->tail_len, &x->tail_cap, "", 0);
	if (o.e)
		tfs_zarr_doc_free(x);
	return o.e;
}

/* The whole document at the end of *buf: the head, the name, the tail. */
static tfs_err whole(int which, const struct tfs_zarr_geom *g, const struct tfs_table *h,
		     const struct tfs_tensor *t, const char *leaf, size_t leaf_len, char **buf, size_t *len,
		     size_t *cap)
{
	struct tfs_zarr_doc x;
	tfs_err e = tfs_zarr_doc(which, g, h, t, leaf, leaf_len, &x);
	if (!e)
		e = tfs_json_put(buf, len, cap, x.head, x.head_len);
	if (!e && x.named)
		e = tfs_json_put(buf, len, cap, "\"", 1);
	if (!e && x.named)
		e = tfs_zarr_name_part(tfs_tensor_name(h, t), 0, t->name_len, buf, len, cap);
	if (!e && x.named)
		e = tfs_json_put(buf, len, cap, "\"", 1);
	if (!e)
		e = tfs_json_put(buf, len, cap, x.tail, x.tail_len);
	tfs_zarr_doc_free(&x);
	return e;
}

tfs_err tfs_zarr_zarray(const struct tfs_zarr_geom *g, const struct tfs_table *h, const struct tfs_tensor *t,
			char **buf, size_t *len, size_t *cap)
{
	return whole(TFS_ZARR_ZARRAY, g, h, t, "", 0, buf, len, cap);
}

tfs_err tfs_zarr_zattrs(const struct tfs_zarr_geom *g, const struct tfs_table *h, const struct tfs_tensor *t,
			const char *leaf, size_t leaf_len, char **buf, size_t *len, size_t *cap)
{
	return whole(TFS_ZARR_ZATTRS, g, h, t, leaf, leaf_len, buf, len, cap);
}

tfs_err tfs_zarr_array_json(const struct tfs_zarr_geom *g, const struct tfs_table *h,
			    const struct tfs_tensor *t, const char *leaf, size_t leaf_len, char **buf,
			    size_t *len, size_t *cap)
{
	return whole(TFS_ZARR_ARRAY_JSON, g, h, t, leaf, leaf_len, buf, len, cap);
}

tfs_err tfs_zarr_zgroup(char **buf, size_t *len, size_t *cap)
{
	return tfs_json_puts(buf, len, cap, "{\n    \"zarr_format\": 2\n}\n");
}

tfs_err tfs_zarr_group_json(const char *attrs, size_t attrs_len, char **buf, size_t *len, size_t *cap)
{
	size_t from = *len;
	tfs_err e = tfs_json_puts(
		buf, len, cap, "{\n  \"zarr_format\": 3,\n  \"node_type\": \"group\",\n  \"attributes\": ");
	while (attrs_len && (attrs[attrs_len - 1] == '\n' || attrs[attrs_len - 1] == ' '))
		attrs_len--;
	if (!e)
		e = tfs_json_nested(buf, len, cap, attrs, attrs_len);
	if (!e)
		e = tfs_json_puts(buf, len, cap, "\n}\n");
	return e ? e : tfs_zarr_ascii(buf, len, cap, from);
}
