/* libFuzzer target for the GGUF, bintensors and tensorsafe readers. The
 * input is a whole file, read by each driver in turn. Besides crashes,
 * leaks and UB, it checks what a driver promises of an accepted file:
 * every tensor inside the file and exactly the size its shape and dtype
 * give; metadata JSON that json-c parses; and, for types convert=f32
 * decodes, decoding of the stored blocks (GGUF's dequantization runs on
 * whatever bytes the input holds). */
#include <json.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "tfs_bintensors.h"
#include "tfs_convert.h"
#include "tfs_gguf.h"
#include "tfs_tensorsafe.h"

static void check(const struct tfs_table *h, const uint8_t *data, size_t size)
{
	for (uint32_t i = 0; i < h->n; i++) {
		const struct tfs_tensor *t = &h->t[i];
		if (t->end < t->begin || t->end > size || t->dtype == TFS_DT_UNKNOWN)
			abort();
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

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static const struct tfs_format *const drivers[] = {
		&tfs_format_gguf, &tfs_format_bintensors, &tfs_format_tensorsafe,
	};
	for (size_t k = 0; k < sizeof drivers / sizeof drivers[0]; k++) {
		struct tfs_source *src;
		struct tfs_table h;
		struct tfs_diag d;
		if (tfs_source_open_mem(data, size, "fuzz", &src))
			return 0;
		if (drivers[k]->read(src, NULL, &h, &d) == TFS_OK) {
			check(&h, data, size);
			tfs_table_free(&h);
		} else if (!memchr(d.msg, 0, sizeof d.msg) || strchr(d.msg, '\n')) {
			abort(); /* a diagnostic is one line */
		}
		tfs_source_close(src);
	}
	return 0;
}
