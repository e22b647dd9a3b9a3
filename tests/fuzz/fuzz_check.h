/* What a format driver promises of a file it accepts, checked by the
 * fuzz targets of the readers: every tensor inside the file and exactly
 * the size its shape and dtype give; metadata JSON that json-c parses;
 * and, for types convert=f32 decodes, decoding of the stored bytes. */
#ifndef FUZZ_CHECK_H
#define FUZZ_CHECK_H

#include <json.h>
#include <stdint.h>
#include <stdlib.h>

#include "core/convert.h"
#include "core/table.h"

/* unknown: a dtype name the format passes through as text (safetensors
 * does, for types newer than tensorfs) is allowed, its size unchecked. */
static inline void fuzz_check_table_ex(const struct tfs_table *h, const uint8_t *data, size_t size, int unknown)
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

#endif
