/* tensorsafe: a 16-byte header (magic, version, flags), the data, then a
 * JSON metadata block with absolute offsets and a 32-byte footer (its
 * length, the previous footer, a checksum, an end magic). The layout is
 * ours, written down in docs/tensorsafe.md; the design is the one of
 * mmapped.blog's "Transposing tensor files". */
#include "formats/tensorsafe.h"

#include <json.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/jscan.h"

#define HEAD 16
#define FOOT 32
#define META_MAX TFS_HEADER_CAP
#define CHAIN_MAX 4096

static uint64_t le64(const unsigned char *p)
{
	uint64_t v = 0;
	for (int i = 7; i >= 0; i--)
		v = v << 8 | p[i];
	return v;
}

uint64_t tfs_fnv1a64(const unsigned char *p, size_t n)
{
	uint64_t h = 0xcbf29ce484222325ull;
	for (size_t i = 0; i < n; i++) {
		h ^= p[i];
		h *= 0x100000001b3ull;
	}
	return h;
}

struct span {
	uint64_t b, e;
	uint32_t t;
};

static int span_cmp(const void *a, const void *b)
{
	const struct span *x = a, *y = b;
	return x->b < y->b ? -1 : x->b > y->b ? 1 : (x->e > y->e) - (x->e < y->e);
}

static tfs_err tensor(struct tfs_table_builder *b, const char *name, size_t nl, json_object *v,
		      uint64_t meta_start, struct tfs_diag *d)
{
	char q[160];
	json_object *dt, *shape, *offs;
	struct tfs_tensor t = {0};
	tfs_quote(q, sizeof q, name, nl);
	if (!json_object_is_type(v, json_type_object) || !json_object_object_get_ex(v, "dtype", &dt) ||
	    !json_object_object_get_ex(v, "shape", &shape) ||
	    !json_object_object_get_ex(v, "data_offsets", &offs))
		return tfs_fail(d, TFS_ERR_FORMAT,
				"tensor %s: not an object with dtype, shape and data_offsets", q);
	if (!json_object_is_type(dt, json_type_string))
		return tfs_fail(d, TFS_ERR_FORMAT, "tensor %s: dtype is not a string", q);
	t.dtype = (uint16_t)tfs_dtype_lookup_safetensors(json_object_get_string(dt),
							 (size_t)json_object_get_string_len(dt));
	if (t.dtype == TFS_DT_UNKNOWN) {
		char dq[80];
		tfs_quote(dq, sizeof dq, json_object_get_string(dt), (size_t)json_object_get_string_len(dt));
		return tfs_fail(d, TFS_ERR_FORMAT, "tensor %s: unknown dtype %s", q, dq);
	}
	if (!json_object_is_type(shape, json_type_array))
		return tfs_fail(d, TFS_ERR_FORMAT, "tensor %s: shape is not an array", q);
	size_t nd = json_object_array_length(shape);
	uint64_t elems = 1;
	int overflow = 0;
	t.dims_off = (uint32_t)b->t->ndims;
	t.ndim = (uint32_t)nd;
	for (size_t i = 0; i < nd; i++) {
		json_object *x = json_object_array_get_idx(shape, i);
		if (!json_object_is_type(x, json_type_int) || json_object_get_int64(x) < 0)
			return tfs_fail(d, TFS_ERR_FORMAT,
					"tensor %s: shape holds something other than a non-negative integer",
					q);
		uint64_t v64 = (uint64_t)json_object_get_int64(x);
		if (json_object_get_int64(x) == INT64_MAX)
			v64 = json_object_get_uint64(x);
		if (v64 && elems > UINT64_MAX / v64)
			overflow = 1;
		elems *= v64;
		if (tfs_table_dim(b, v64))
			return tfs_fail(d, TFS_ERR_NOMEM, "out of memory");
	}
	if (!json_object_is_type(offs, json_type_array) || json_object_array_length(offs) != 2)
		return tfs_fail(d, TFS_ERR_FORMAT, "tensor %s: data_offsets is not [begin, end]", q);
	uint64_t o[2];
	for (int i = 0; i < 2; i++) {
		json_object *x = json_object_array_get_idx(offs, (size_t)i);
		if (!json_object_is_type(x, json_type_int) || json_object_get_int64(x) < 0)
			return tfs_fail(
				d, TFS_ERR_FORMAT,
				"tensor %s: data_offsets holds something other than a non-negative integer",
				q);
		o[i] = json_object_get_int64(x) == INT64_MAX ? json_object_get_uint64(x)
							     : (uint64_t)json_object_get_int64(x);
	}
	if (o[0] < HEAD || o[1] < o[0] || o[1] > meta_start)
		return tfs_fail(
			d, TFS_ERR_FORMAT,
			"tensor %s: data_offsets [%llu, %llu] are not within the data (bytes %u to %llu)", q,
			(unsigned long long)o[0], (unsigned long long)o[1], HEAD,
			(unsigned long long)meta_start);
	uint64_t bytes = overflow ? UINT64_MAX : tfs_dtype_bytes(t.dtype, elems);
	if (bytes != o[1] - o[0])
		return tfs_fail(d, TFS_ERR_FORMAT,
				"tensor %s: %llu bytes between its offsets, but its shape and dtype need %s",
				q, (unsigned long long)(o[1] - o[0]),
				bytes == UINT64_MAX ? "more than 2^64" : "another size");
	t.begin = o[0];
	t.end = o[1];
	t.name_len = (uint32_t)nl;
	if (tfs_table_text(b, name, nl, &t.name_off) || tfs_table_put(b, &t, 1, NULL))
		return tfs_fail(d, TFS_ERR_NOMEM, "out of memory");
	return TFS_OK;
}

tfs_err tfs_tsafe_parse_meta(const unsigned char *text, size_t n, uint64_t meta_start, uint64_t file_size,
			     struct tfs_table *out, struct tfs_diag *d)
{
	struct tfs_table_builder b = {.t = out};
	tfs_err e = TFS_OK;
	json_object *root = NULL;
	memset(out, 0, sizeof *out);
	out->format = tfs_format_tensorsafe.name;
	out->file_size = file_size;
	out->data_start = HEAD;
	size_t bad = tfs_utf8_check(text, n);
	if (bad != n)
		return tfs_fail(d, TFS_ERR_FORMAT, "the metadata block is not valid UTF-8 (byte %zu)", bad);
	if (memchr(text, 0, n))
		return tfs_fail(d, TFS_ERR_FORMAT, "the metadata block holds a NUL byte");
	json_tokener *tok = json_tokener_new_ex(64);
	if (!tok)
		return tfs_fail(d, TFS_ERR_NOMEM, "out of memory");
	root = json_tokener_parse_ex(tok, (const char *)text, (int)n);
	enum json_tokener_error je = json_tokener_get_error(tok);
	size_t used = json_tokener_get_parse_end(tok);
	json_tokener_free(tok);
	if (!root || je != json_tokener_success) {
		e = tfs_fail(d, TFS_ERR_FORMAT, "the metadata block is not JSON: %s",
			     root ? "it ends early" : json_tokener_error_desc(je));
		goto out;
	}
	while (used < n &&
	       (text[used] == ' ' || text[used] == '\n' || text[used] == '\t' || text[used] == '\r'))
		used++;
	if (used != n) {
		e = tfs_fail(d, TFS_ERR_FORMAT, "the metadata block has text after its JSON object");
		goto out;
	}
	if (!json_object_is_type(root, json_type_object)) {
		e = tfs_fail(d, TFS_ERR_FORMAT, "the metadata block is not a JSON object");
		goto out;
	}
	json_object_object_foreach(root, key, val)
	{
		size_t kl = strlen(key);
		if (strcmp(key, "__metadata__") == 0) {
			if (json_object_is_type(val, json_type_null))
				continue;
			if (!json_object_is_type(val, json_type_object)) {
				e = tfs_fail(d, TFS_ERR_FORMAT, "__metadata__ is not an object of strings");
				goto out;
			}
			out->has_metadata = true;
			json_object_object_foreach(val, mk, mv)
			{
				struct tfs_meta_pair mp;
				if (!json_object_is_type(mv, json_type_string)) {
					char q[160];
					tfs_quote(q, sizeof q, mk, strlen(mk));
					e = tfs_fail(d, TFS_ERR_FORMAT,
						     "__metadata__ value of %s is not a string", q);
					goto out;
				}
				mp.key_len = (uint32_t)strlen(mk);
				mp.val_len = (uint32_t)json_object_get_string_len(mv);
				if (tfs_table_text(&b, mk, mp.key_len, &mp.key_off) ||
				    tfs_table_text(&b, json_object_get_string(mv), mp.val_len, &mp.val_off) ||
				    tfs_table_meta(&b, &mp)) {
					e = tfs_fail(d, TFS_ERR_NOMEM, "out of memory");
					goto out;
				}
			}
			continue;
		}
		if ((e = tensor(&b, key, kl, val, meta_start, d)))
			goto out;
	}
	/* No two tensors share a byte. */
	if (out->n > 1) {
		struct span *sp = malloc(out->n * sizeof *sp);
		if (!sp) {
			e = tfs_fail(d, TFS_ERR_NOMEM, "out of memory");
			goto out;
		}
		for (uint32_t i = 0; i < out->n; i++)
			sp[i] = (struct span){out->t[i].begin, out->t[i].end, i};
		qsort(sp, out->n, sizeof *sp, span_cmp);
		for (uint32_t i = 1; i < out->n && !e; i++) {
			if (sp[i].b < sp[i - 1].e) {
				char q1[120], q2[120];
				const struct tfs_tensor *x = &out->t[sp[i - 1].t], *y = &out->t[sp[i].t];
				tfs_quote(q1, sizeof q1, tfs_tensor_name(out, x), x->name_len);
				tfs_quote(q2, sizeof q2, tfs_tensor_name(out, y), y->name_len);
				e = tfs_fail(d, TFS_ERR_FORMAT, "tensors %s and %s overlap", q1, q2);
			}
		}
		free(sp);
	}
out:
	json_object_put(root);
	tfs_table_builder_done(&b);
	if (e)
		tfs_table_free(out);
	return e;
}

tfs_err tfs_tsafe_read(struct tfs_source *src, const struct tfs_parse_opts *opts, struct tfs_table *out,
		       struct tfs_diag *d)
{
	unsigned char head[HEAD], foot[FOOT];
	uint64_t size = src->id.size;
	tfs_err e;
	(void)opts;
	memset(out, 0, sizeof *out);
	if (size < HEAD + 2 + FOOT)
		return tfs_fail(d, TFS_ERR_FORMAT, "the file is too short (%llu bytes) to be tensorsafe",
				(unsigned long long)size);
	if ((e = tfs_source_read(src, head, HEAD, 0, d)) ||
	    (e = tfs_source_read(src, foot, FOOT, size - FOOT, d)))
		return e;
	if (memcmp(head, "TNSRSAFE", 8) != 0)
		return tfs_fail(d, TFS_ERR_FORMAT,
				"damaged: the file ends like tensorsafe but does not start with its magic");
	uint32_t version = (uint32_t)(le64(head + 8) & 0xffffffffu), flags = (uint32_t)(le64(head + 8) >> 32);
	if (version != 1)
		return tfs_fail(d, TFS_ERR_FORMAT, "tensorsafe version %u is not supported (version 1 is)",
				version);
	if (flags)
		return tfs_fail(d, TFS_ERR_FORMAT,
				"tensorsafe flags 0x%x are not supported (none are defined)", flags);
	if (memcmp(foot + 24, "TSAFEEND", 8) != 0)
		return tfs_fail(
			d, TFS_ERR_FORMAT,
			"damaged or incomplete: the file does not end with a tensorsafe footer (a write or append that stopped early?)");
	uint64_t len = le64(foot), prev = le64(foot + 8), sum = le64(foot + 16);
	if (len > META_MAX)
		return tfs_fail(d, TFS_ERR_FORMAT,
				"the metadata block's length %llu is over the %u-byte limit",
				(unsigned long long)len, META_MAX);
	if (len > size - FOOT - HEAD)
		return tfs_fail(
			d, TFS_ERR_FORMAT,
			"damaged: the footer gives a metadata block of %llu bytes, more than the file holds",
			(unsigned long long)len);
	uint64_t meta_start = size - FOOT - len;
	unsigned char *text = malloc((size_t)len + 1);
	if (!text)
		return tfs_fail(d, TFS_ERR_NOMEM, "out of memory for a %llu-byte metadata block",
				(unsigned long long)len);
	if ((e = tfs_source_read(src, text, (size_t)len, meta_start, d))) {
		free(text);
		return e;
	}
	if (tfs_fnv1a64(text, (size_t)len) != sum) {
		free(text);
		return tfs_fail(
			d, TFS_ERR_FORMAT,
			"damaged: the metadata block's checksum does not match the footer's (overwritten or cut?)");
	}
	/* Earlier footers: each must be one, before the block that follows. */
	uint64_t appends = 0, limit = meta_start, p = prev;
	while (p) {
		unsigned char f2[FOOT];
		if (appends >= CHAIN_MAX || p > limit || p < HEAD + 2 + FOOT) {
			free(text);
			return tfs_fail(
				d, TFS_ERR_FORMAT,
				"damaged: a footer's link to the previous one (byte %llu) points outside the file's earlier part",
				(unsigned long long)p);
		}
		if ((e = tfs_source_read(src, f2, FOOT, p - FOOT, d))) {
			free(text);
			return e;
		}
		if (memcmp(f2 + 24, "TSAFEEND", 8) != 0 || le64(f2) > p - FOOT - HEAD) {
			free(text);
			return tfs_fail(
				d, TFS_ERR_FORMAT,
				"damaged: a footer's link to the previous one (byte %llu) does not point at a footer",
				(unsigned long long)p);
		}
		appends++;
		limit = p - FOOT - le64(f2);
		p = le64(f2 + 8);
	}
	e = tfs_tsafe_parse_meta(text, (size_t)len, meta_start, size, out, d);
	free(text);
	if (!e) {
		char tmp[32];
		snprintf(tmp, sizeof tmp, "%llu", (unsigned long long)appends);
		if (tfs_table_fact(out, "appends", tmp, strlen(tmp))) {
			tfs_table_free(out);
			return tfs_fail(d, TFS_ERR_NOMEM, "out of memory");
		}
	}
	return e;
}

static int detect(const struct tfs_probe *p)
{
	if (p->nhead >= 8 && memcmp(p->head, "TNSRSAFE", 8) == 0)
		return 2;
	/* A damaged start still has the trailer: let this driver say so. */
	if (p->ntail >= 8 && memcmp(p->tail + p->ntail - 8, "TSAFEEND", 8) == 0)
		return 1;
	return 0;
}

const struct tfs_format tfs_format_tensorsafe = {
	.name = "tensorsafe",
	.ext = ".tensorsafe",
	.detect = detect,
	.read = tfs_tsafe_read,
};
