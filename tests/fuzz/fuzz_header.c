/* libFuzzer target for the header parser. The input is a whole file.
 * Besides crashes, leaks and UB, it checks what the parser promises:
 * an accepted file has every tensor inside the data buffer, a header that
 * json-c also parses with the same top-level keys, and a file table whose
 * names are valid and each found again by lookup. */
#include <json.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "tfs_index.h"
#include "tfs_jscan.h"
#include "tfs_safetensors.h"
#include "tfs_names.h"
#include "tfs_tree.h"
#include "tfs_listing.h"

static void noop_warn(void *ctx, const char *msg)
{
	(void)ctx;
	(void)msg;
}

static void check_json_c(const uint8_t *data, size_t size, const struct tfs_table *h)
{
	uint64_t n = h->data_start - 8;
	struct json_tokener *tok = json_tokener_new_ex(TFS_NESTING_MAX + 1);
	json_tokener_set_flags(tok, JSON_TOKENER_STRICT);
	json_object *o = json_tokener_parse_ex(tok, (const char *)data + 8, (int)n);
	if (!o)
		abort(); /* we accepted what json-c refuses */
	int names_have_nul = 0;
	for (uint32_t i = 0; i < h->n; i++)
		if (memchr(tfs_tensor_name(h, &h->t[i]), 0, h->t[i].name_len))
			names_have_nul = 1;
	if (!names_have_nul) {
		/* json-c also keeps the last of duplicate keys. */
		size_t keys = (size_t)json_object_object_length(o);
		size_t want = h->n + (json_object_object_get_ex(o, "__metadata__", NULL) ? 1 : 0);
		if (keys != want)
			abort();
		for (uint32_t i = 0; i < h->n; i++)
			if (!json_object_object_get_ex(o, tfs_tensor_name(h, &h->t[i]), NULL))
				abort();
	}
	json_object_put(o);
	json_tokener_free(tok);
	(void)size;
}

/* A table reads back whole at its size, in one piece or in odd pieces,
 * with a header line and one line of five fields per tensor or directory. */
static void check_table(const struct tfs_tree *tr, const struct tfs_node *nd)
{
	uint64_t size = tfs_node_size(tr, nd);
	char *a = malloc(size + 1), *b = malloc(size + 1);
	size_t got, at = 0;
	if (!a || !b || tfs_listing_read(tr, nd, 0, size + 1, a, &got) || got != size)
		abort();
	while (at < size) {
		size_t step = 1 + at % 97;
		if (tfs_listing_read(tr, nd, at, step, b + at, &got) || got == 0)
			abort();
		at += got;
	}
	if (at != size || memcmp(a, b, size) != 0)
		abort();
	const struct tfs_node *dir = &tr->nodes[nd->parent];
	uint32_t want = 1;
	for (uint32_t k = 0; k < dir->count; k++) {
		uint8_t kind = tr->nodes[tr->children[dir->first + k]].kind;
		want += kind == TFS_NODE_TENSOR || kind == TFS_NODE_DIR;
	}
	uint32_t lines = 0, tabs = 0;
	for (size_t i = 0; i < size; i++) {
		if (a[i] == '\t')
			tabs++;
		if (a[i] == '\n') {
			if (tabs != 4)
				abort();
			lines++;
			tabs = 0;
		}
	}
	if (lines != want || (size && a[size - 1] != '\n'))
		abort();
	free(a);
	free(b);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct tfs_source *src;
	struct tfs_table h;
	struct tfs_tree tr;
	struct tfs_diag d;
	struct tfs_parse_opts o = {.flags = 0, .warn = noop_warn};

	if (tfs_source_open_mem(data, size, "fuzz", &src))
		return 0;
	if (size > 0 && (data[0] & 1))
		o.flags = TFS_PARSE_STRICT;
	if (tfs_st_read(src, &o, &h, &d) == TFS_OK) {
		/* The tree is built over a second view of the same bytes: the
		 * model owns its source. */
		for (uint32_t i = 0; i < h.n; i++) {
			const struct tfs_tensor *t = &h.t[i];
			if (t->end < t->begin || t->begin < h.data_start || t->end > size)
				abort();
		}
		check_json_c(data, size, &h);
		struct tfs_model m;
		struct tfs_source *keep;
		if (tfs_source_open_mem(data, size, "fuzz", &keep) || tfs_model_single(&m, keep, &h))
			abort();
		for (int layout = 0; layout < 2; layout++) {
			struct tfs_tree_opts to = {
				.layout = (enum tfs_layout)layout,
				.view = size > 1 ? (data[1] & 3) : 0,
				.tables = size > 1 && (data[1] & 4),
			};
			if (tfs_tree_build(&m, &to, &tr, &d) != TFS_OK)
				continue;
			for (uint32_t i = 2; i < tr.nnodes; i++) {
				const struct tfs_node *nd = &tr.nodes[i];
				if (nd->fname_len == 0 || nd->fname_len > TFS_NAME_MAX ||
				    memchr(nd->fname, '/', nd->fname_len) ||
				    strlen(nd->fname) != nd->fname_len ||
				    (nd->fname_len <= 2 && strspn(nd->fname, ".") == nd->fname_len) ||
				    tfs_tree_lookup(&tr, nd->parent, nd->fname, nd->fname_len) != i)
					abort();
				if (nd->kind == TFS_NODE_TABLE)
					check_table(&tr, nd);
			}
			tfs_tree_free(&tr);
		}
		tfs_model_free(&m);
	}
	tfs_source_close(src);
	return 0;
}
