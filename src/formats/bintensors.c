/* bintensors (GnosisFoundation/bintensors, from version 0.1.0 on): safetensors'
 * layout with a bincode header. An 8-byte little-endian length N (at most
 * 100,000,000), N header bytes (padded with spaces, which the decoder
 * ignores), then the data. The header is bincode's standard configuration
 * (little-endian, variable-length integers) of
 *   (Option<BTreeMap<String, String>> metadata,
 *    Vec<(String name, Dtype, Vec<usize> shape, (usize start, usize end))>)
 * and the reader's checks are those of its tensor.rs: offsets contiguous
 * from 0 in header order, each the size of its shape and dtype, the data
 * ending exactly at the end of the file, no name twice. See
 * shared/docs/tensor-formats.md section 2. */
#include "formats/bintensors.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/jscan.h"

#define HEADER_MAX TFS_HEADER_CAP

/* bintensors' Dtype enum, in its declaration order. */
static const uint16_t dtypes[] = {
	TFS_DT_BOOL, TFS_DT_U8,  TFS_DT_I8,  TFS_DT_F8_E5M2, TFS_DT_F8_E4M3,
	TFS_DT_I16,  TFS_DT_U16, TFS_DT_F16, TFS_DT_BF16,    TFS_DT_I32,
	TFS_DT_U32,  TFS_DT_F32, TFS_DT_F64, TFS_DT_I64,     TFS_DT_U64,
};

struct bc {
	const unsigned char *p, *base, *end;
	struct tfs_diag *d;
};

static tfs_err bad(struct bc *c, const char *what)
{
	return tfs_fail(c->d, TFS_ERR_FORMAT, "bad header: %s (at byte %zu of the header)", what,
			(size_t)(c->p - c->base));
}

/* bincode's varint: under 251 one byte; 251, 252, 253 then a u16, u32,
 * u64 (little-endian); 254 (u128) cannot be a usize here. */
static tfs_err varint(struct bc *c, uint64_t *v, const char *what)
{
	if (c->p >= c->end)
		return bad(c, what);
	unsigned t = *c->p;
	int n = t < 251 ? 0 : t == 251 ? 2 : t == 252 ? 4 : t == 253 ? 8 : -1;
	if (n < 0)
		return bad(c, what);
	if ((size_t)(c->end - c->p) < 1 + (size_t)n)
		return bad(c, what);
	c->p++;
	if (n == 0) {
		*v = t;
		return TFS_OK;
	}
	uint64_t x = 0;
	for (int i = n - 1; i >= 0; i--)
		x = x << 8 | c->p[i];
	c->p += n;
	*v = x;
	return TFS_OK;
}

static tfs_err string(struct bc *c, const unsigned char **s, size_t *len, const char *what)
{
	uint64_t n;
	tfs_err e = varint(c, &n, what);
	if (e)
		return e;
	if (n > (uint64_t)(c->end - c->p))
		return bad(c, what);
	if (tfs_utf8_check(c->p, (size_t)n) != n)
		return bad(c, "a string that is not UTF-8");
	*s = c->p;
	*len = (size_t)n;
	c->p += n;
	return TFS_OK;
}

/* The Option<HashMap<String, String>> of metadata, after its tag 1. */
static tfs_err metadata(struct bc *c, struct tfs_table_builder *b)
{
	uint64_t count;
	tfs_err e = varint(c, &count, "the metadata's length");
	if (e)
		return e;
	if (count > (uint64_t)(c->end - c->p) / 2)
		return bad(c, "more metadata entries than the header holds");
	for (uint64_t i = 0; i < count; i++) {
		const unsigned char *k, *v;
		size_t kl, vl;
		struct tfs_meta_pair mp;
		if ((e = string(c, &k, &kl, "a metadata key")) ||
		    (e = string(c, &v, &vl, "a metadata value")))
			return e;
		mp.key_len = (uint32_t)kl;
		mp.val_len = (uint32_t)vl;
		if (tfs_table_text(b, (const char *)k, kl, &mp.key_off) ||
		    tfs_table_text(b, (const char *)v, vl, &mp.val_off) || tfs_table_meta(b, &mp))
			return tfs_fail(c->d, TFS_ERR_NOMEM, "out of memory");
	}
	if (tfs_table_meta_dedupe(b))
		return tfs_fail(c->d, TFS_ERR_NOMEM, "out of memory");
	return TFS_OK;
}

/* The shape; *bytes is what it needs, UINT64_MAX when that overflows. */
static tfs_err shape(struct bc *c, struct tfs_table_builder *b, unsigned dt, struct tfs_tensor *t,
		     uint64_t *bytes)
{
	uint64_t nd;
	tfs_err e = varint(c, &nd, "a shape's length");
	if (e)
		return e;
	if (nd > (uint64_t)(c->end - c->p))
		return bad(c, "a shape longer than the header");
	t->dims_off = (uint32_t)b->t->ndims;
	t->ndim = (uint32_t)nd;
	uint64_t elems = 1;
	int overflow = 0;
	for (uint64_t k = 0; k < nd; k++) {
		uint64_t v;
		if ((e = varint(c, &v, "a dimension")))
			return e;
		if (v && elems > UINT64_MAX / v)
			overflow = 1;
		elems *= v;
		if (tfs_table_dim(b, v))
			return tfs_fail(c->d, TFS_ERR_NOMEM, "out of memory");
	}
	*bytes = overflow ? UINT64_MAX : tfs_dtype_bytes(dt, elems);
	return TFS_OK;
}

/* One tensor entry; *pos is where the previous tensor's data ended. */
static tfs_err tensor(struct bc *c, struct tfs_table_builder *b, uint64_t *pos)
{
	const unsigned char *name;
	size_t nl;
	uint64_t dt, start, end, bytes = 0;
	struct tfs_tensor t = {0};
	char q[160];
	struct tfs_diag *d = c->d;
	tfs_err e = string(c, &name, &nl, "a tensor name");
	if (e)
		return e;
	tfs_quote(q, sizeof q, (const char *)name, nl);
	if ((e = varint(c, &dt, "a dtype")))
		return e;
	if (dt >= sizeof dtypes / sizeof dtypes[0])
		return tfs_fail(d, TFS_ERR_FORMAT, "tensor %s: unknown dtype id %llu", q,
				(unsigned long long)dt);
	t.dtype = dtypes[dt];
	if ((e = shape(c, b, t.dtype, &t, &bytes)))
		return e;
	if ((e = varint(c, &start, "a tensor's start")) || (e = varint(c, &end, "a tensor's end")))
		return e;
	if (start != *pos || end < start)
		return tfs_fail(
			d, TFS_ERR_FORMAT,
			"tensor %s: offsets [%llu, %llu] are not contiguous (the tensor before it ends at %llu)",
			q, (unsigned long long)start, (unsigned long long)end, (unsigned long long)*pos);
	if (bytes == UINT64_MAX || end - start != bytes)
		return tfs_fail(
			d, TFS_ERR_FORMAT,
			"tensor %s: %llu bytes between its offsets, but its shape and dtype need %s%llu", q,
			(unsigned long long)(end - start), bytes == UINT64_MAX ? "more than " : "",
			(unsigned long long)(bytes == UINT64_MAX ? UINT64_MAX : bytes));
	*pos = end;
	t.begin = start;
	t.end = end;
	t.name_len = (uint32_t)nl;
	int dup;
	if (tfs_table_text(b, (const char *)name, nl, &t.name_off) || tfs_table_put(b, &t, 0, &dup))
		return tfs_fail(d, TFS_ERR_NOMEM, "out of memory");
	if (dup)
		return tfs_fail(d, TFS_ERR_FORMAT, "tensor %s appears twice", q);
	return TFS_OK;
}

static tfs_err body(struct bc *c, struct tfs_table_builder *b, uint64_t file_size)
{
	struct tfs_table *out = b->t;
	uint64_t count, pos = 0;
	tfs_err e;
	if (c->p >= c->end || *c->p > 1)
		return bad(c, "the metadata's Option tag is not 0 or 1");
	if (*c->p++ == 1) {
		out->has_metadata = true;
		if ((e = metadata(c, b)))
			return e;
	}
	if ((e = varint(c, &count, "the tensor count")))
		return e;
	/* A tensor takes at least 6 bytes of header. */
	if (count > (uint64_t)(c->end - c->p) / 6)
		return bad(c, "more tensors than the header holds");
	for (uint64_t i = 0; i < count; i++)
		if ((e = tensor(c, b, &pos)))
			return e;
	/* What follows in the header is padding the decoder never reads. */
	if (pos != file_size - out->data_start)
		return tfs_fail(
			c->d, TFS_ERR_FORMAT,
			pos > file_size - out->data_start
				? "truncated file: the tensors need %llu data bytes but %llu follow the header (an incomplete download?)"
				: "the tensors need %llu data bytes but %llu follow the header; bintensors requires the file to end with the last tensor",
			(unsigned long long)pos, (unsigned long long)(file_size - out->data_start));
	for (uint32_t i = 0; i < out->n; i++) {
		out->t[i].begin += out->data_start;
		out->t[i].end += out->data_start;
	}
	return TFS_OK;
}

tfs_err tfs_bt_parse(const unsigned char *hdr, size_t n, uint64_t file_size, struct tfs_table *out,
		     struct tfs_diag *d)
{
	struct bc c = {.p = hdr, .base = hdr, .end = hdr + n, .d = d};
	struct tfs_table_builder b = {.t = out};
	memset(out, 0, sizeof *out);
	out->format = tfs_format_bintensors.name;
	out->data_start = 8 + (uint64_t)n;
	out->file_size = file_size;
	tfs_err e = body(&c, &b, file_size);
	tfs_table_builder_done(&b);
	if (e)
		tfs_table_free(out);
	return e;
}

tfs_err tfs_bt_read(struct tfs_source *src, const struct tfs_parse_opts *opts, struct tfs_table *out,
		    struct tfs_diag *d)
{
	unsigned char pre[8];
	uint64_t size = src->id.size, n = 0;
	tfs_err e;
	(void)opts;
	memset(out, 0, sizeof *out);
	if (size < 8)
		return tfs_fail(d, TFS_ERR_FORMAT, "the file is too short (under 8 bytes) to be bintensors");
	if ((e = tfs_source_read(src, pre, 8, 0, d)))
		return e;
	for (int i = 7; i >= 0; i--)
		n = n << 8 | pre[i];
	if (n > HEADER_MAX)
		return tfs_fail(d, TFS_ERR_FORMAT, "the header length %llu is over the %u-byte limit",
				(unsigned long long)n, HEADER_MAX);
	if (n > size - 8)
		return tfs_fail(
			d, TFS_ERR_FORMAT,
			"truncated file: the header length says %llu bytes but only %llu follow the 8-byte prefix",
			(unsigned long long)n, (unsigned long long)(size - 8));
	unsigned char *buf = malloc((size_t)n + 1);
	if (!buf)
		return tfs_fail(d, TFS_ERR_NOMEM, "out of memory for a %llu-byte header",
				(unsigned long long)n);
	e = tfs_source_read(src, buf, (size_t)n, 8, d);
	if (e) {
		free(buf);
		return e;
	}
	e = tfs_bt_parse(buf, (size_t)n, size, out, d);
	free(buf);
	return e;
}

/* No magic number: a plausible length, then the Option tag. */
static int detect(const struct tfs_probe *p)
{
	if (p->nhead < 10 || p->size < 10)
		return 0;
	uint64_t n = 0;
	for (int i = 7; i >= 0; i--)
		n = n << 8 | p->head[i];
	if (n < 2 || n > HEADER_MAX || n > p->size - 8)
		return 0;
	return p->head[8] <= 1 ? 1 : 0;
}

const struct tfs_format tfs_format_bintensors = {
	.name = "bintensors",
	.ext = ".bt",
	.detect = detect,
	.read = tfs_bt_read,
};
