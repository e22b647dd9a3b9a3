/* libFuzzer target for the GGUF, bintensors and tensorsafe readers. The
 * input is a whole file, read by each driver in turn. Besides crashes,
 * leaks and UB, it checks what a driver promises of an accepted file:
 * every tensor inside the file and exactly the size its shape and dtype
 * give; metadata JSON that json-c parses; and, for types convert=f32
 * decodes, decoding of the stored blocks (GGUF's dequantization runs on
 * whatever bytes the input holds). An accepted GGUF also gives -o export's
 * model.gguf, read whole and in odd pieces: a file our strict reader
 * accepts, with the same tensors (names, types, shapes, bytes) and the
 * same metadata but split.*. */
#include <json.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz_check.h"
#include "views/view.h"
#include "formats/bintensors.h"
#include "formats/gguf.h"
#include "formats/tensorsafe.h"
#include "model/model.h"

static void check_generated_gguf(const uint8_t *data, size_t size)
{
	struct tfs_source *src, *gsrc;
	struct tfs_table h, g;
	struct tfs_diag d;
	struct tfs_model m;
	struct tfs_tree tr;
	struct tfs_parse_opts strict = {.flags = TFS_PARSE_STRICT};
	if (tfs_source_open_mem(data, size, "fuzz", &src))
		return;
	if (tfs_gguf_read(src, NULL, &h, &d) != TFS_OK || tfs_model_single(&m, src, &h))
		abort();
	char *ek[] = {"export"}, *ev[] = {""};
	struct tfs_opts eo = {ek, ev, 1};
	struct tfs_tree_opts to = {.layout = TFS_LAYOUT_FLAT, .opts = &eo};
	if (tfs_tree_build(&m, &to, &tr, &d) != TFS_OK) {
		tfs_model_free(&m);
		return; /* a name the mapping cannot give (not the view's) */
	}
	const struct tfs_node *gn = NULL;
	for (uint32_t i = 2; i < tr.nnodes; i++)
		if (tr.nodes[i].kind == tfs_view_kind("gguf"))
			gn = &tr.nodes[i];
	const struct tfs_table *sh = &m.shards[0].h;
	if (!gn)
		abort(); /* every GGUF tensor has a ggml type */
	uint64_t gsize = tfs_node_size(&tr, gn);
	unsigned char *whole = fuzz_read_node(&tr, gn, gsize, 0);
	unsigned char *bits = fuzz_read_node(&tr, gn, gsize, 37);
	if (memcmp(whole, bits, gsize))
		abort();
	if (tfs_source_open_mem(whole, gsize, "model.gguf", &gsrc) ||
	    tfs_gguf_read(gsrc, &strict, &g, &d) != TFS_OK)
		abort();
	if (g.n != sh->n || g.part_count)
		abort();
	for (uint32_t i = 0; i < g.n; i++) {
		const struct tfs_tensor *a = &sh->t[i], *b = &g.t[i];
		if (a->name_len != b->name_len ||
		    memcmp(tfs_tensor_name(sh, a), tfs_tensor_name(&g, b), a->name_len) ||
		    a->dtype != b->dtype || a->ndim != b->ndim ||
		    (a->ndim &&
		     memcmp(&sh->dims[a->dims_off], &g.dims[b->dims_off], a->ndim * sizeof *g.dims)) ||
		    a->end - a->begin != b->end - b->begin ||
		    memcmp(data + a->begin, whole + b->begin, a->end - a->begin))
			abort();
	}
	uint64_t split = 0;
	struct tfs_kv kv;
	size_t pos = 0;
	while (tfs_kvs_next(&sh->kv, &pos, &kv))
		split += kv.klen >= 6 && memcmp(kv.key, "split.", 6) == 0;
	if (g.kv.n != sh->kv.n - split)
		abort();
	if (!split) {
		char *x, *y;
		size_t xl, yl;
		if (tfs_table_meta_json(sh, &x, &xl) || tfs_table_meta_json(&g, &y, &yl) || xl != yl ||
		    memcmp(x, y, xl))
			abort();
		free(x);
		free(y);
	}
	tfs_table_free(&g);
	tfs_source_close(gsrc);
	free(whole);
	free(bits);
	tfs_tree_free(&tr);
	tfs_model_free(&m);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static const struct tfs_format *const drivers[] = {
		&tfs_format_gguf,
		&tfs_format_bintensors,
		&tfs_format_tensorsafe,
	};
	for (size_t k = 0; k < sizeof drivers / sizeof drivers[0]; k++) {
		struct tfs_source *src;
		struct tfs_table h;
		struct tfs_diag d;
		if (tfs_source_open_mem(data, size, "fuzz", &src))
			return 0;
		if (drivers[k]->read(src, NULL, &h, &d) == TFS_OK) {
			fuzz_check_table(&h, data, size);
			tfs_table_free(&h);
			if (k == 0)
				check_generated_gguf(data, size);
		} else if (!memchr(d.msg, 0, sizeof d.msg) || strchr(d.msg, '\n')) {
			abort(); /* a diagnostic is one line */
		}
		tfs_source_close(src);
	}
	return 0;
}
