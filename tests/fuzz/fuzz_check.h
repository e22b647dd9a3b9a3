/* What a format driver promises of a file it accepts, checked by the
 * fuzz targets of the readers: every tensor inside the file and exactly
 * the size its shape and dtype give; metadata JSON that json-c parses;
 * and, for types convert=f32 decodes, decoding of the stored bytes. */
#ifndef FUZZ_CHECK_H
#define FUZZ_CHECK_H

#include <json.h>
#include <stdint.h>
#include <stdlib.h>

#include "compute/convert.h"
#include "core/table.h"

/* unknown: a dtype name the format passes through as text (safetensors
 * does, for types newer than tensorfs) is allowed, its size unchecked. */
static inline void fuzz_check_table_ex(const struct tfs_table *h, const uint8_t *data, size_t size,
				       int unknown)
{
	for (uint32_t i = 0; i < h->n; i++) {
		const struct tfs_tensor *t = &h->t[i];
		if (t->end < t->begin || t->end > size || (t->dtype == TFS_DT_UNKNOWN && !unknown))
			abort();
		if (t->dtype == TFS_DT_UNKNOWN)
			continue;
		if (tfs_dtype_bytes(t->dtype, tfs_tensor_elements(h, t)) != t->end - t->begin)
			abort();
		if (tfs_converts(t->dtype) && t->end > t->begin) {
			uint64_t n = tfs_tensor_elements(h, t), b, e;
			if (n > 1024)
				n = 1024;
			tfs_stored_range(t->dtype, 0, n, &b, &e);
			if (e > t->end - t->begin)
				abort();
			uint32_t *out = malloc(n * 4);
			if (!out)
				abort();
			tfs_decode_f32(t->dtype, data + t->begin + b, 0, (size_t)n, out);
			free(out);
		}
	}
	char *json;
	size_t jl;
	if (tfs_table_meta_json(h, &json, &jl) != TFS_OK)
		abort();
	json_object *o = json_tokener_parse(json);
	if (!o || !json_object_is_type(o, json_type_object))
		abort();
	json_object_put(o);
	free(json);
}

static inline void fuzz_check_table(const struct tfs_table *h, const uint8_t *data, size_t size)
{
	fuzz_check_table_ex(h, data, size, 0);
}

/* A file of the tree read whole through its view, in reads of `step`
 * bytes (0: one read), the pieces resolved as the FUSE side would. */
#include "views/tree.h"
#include "views/view.h"

static inline unsigned char *fuzz_read_node(const struct tfs_tree *tr, const struct tfs_node *nd,
					    uint64_t size, size_t step)
{
	unsigned char *buf = malloc(size + 1);
	if (!buf)
		abort();
	for (uint64_t at = 0; at < size;) {
		size_t len = step && size - at > step ? step : (size_t)(size - at);
		struct tfs_piece v[8];
		char *out = malloc(len);
		struct tfs_pieces p = {.v = v, .max = 8, .out = out, .cap = len};
		if (!out || tfs_node_pieces(tr, nd, at, len, &p) != TFS_OK)
			abort();
		size_t got = 0;
		for (unsigned k = 0; k < p.n; k++) {
			if (got + v[k].len > len)
				abort();
			if (v[k].mem)
				memcpy(buf + at + got, v[k].mem, v[k].len);
			else if (tfs_source_serve(v[k].src, buf + at + got, v[k].len, v[k].off, v[k].limit))
				abort();
			got += v[k].len;
		}
		if (got != len)
			abort(); /* a view gives the whole range it is asked for */
		free(out);
		at += len;
	}
	buf[size] = 0; /* for a reader of text */
	return buf;
}

#endif
