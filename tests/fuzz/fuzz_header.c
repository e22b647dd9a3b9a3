/* libFuzzer target for the header parser. The input is a whole file.
 * Besides crashes, leaks and UB, it checks what the parser promises:
 * an accepted file has every tensor inside the data buffer, a header that
 * json-c also parses with the same top-level keys, and a file table whose
 * names are valid and each found again by lookup. With -o export (a bit
 * of the input), every generated file, read whole and in odd pieces, is
 * one our strict parser accepts: the tensors of its directory that the
 * export holds, each with its dtype, shape and bytes, at the alignment
 * the README promises, and the source's metadata. With -o max_shard_size
 * (another bit), every re-sharded file is one our strict parser accepts,
 * holding tensors of the source with their bytes, and the index names
 * each tensor the shards hold once. */
#include <json.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/dtype.h"
#include "fuzz_check.h"
#include "views/export.h"
#include "model/index.h"
#include "core/jscan.h"
#include "formats/safetensors.h"
#include "core/names.h"
#include "views/tree.h"
#include "views/view.h"

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
	/* (through its view, as a mount reads it: the table is no API) */
	char *a = (char *)fuzz_read_node(tr, nd, size, 0), *b = (char *)fuzz_read_node(tr, nd, size, 97);
	if (memcmp(a, b, size) != 0)
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

struct gather {
	const struct tfs_tree *tr;
	const uint8_t *data;
	unsigned char *out;
	uint64_t at, size;
};

static tfs_err gather_piece(void *ctx, const struct tfs_export_piece *p)
{
	struct gather *g = ctx;
	if (p->len == 0 || g->at + p->len > g->size)
		abort();
	if (p->mem) {
		memcpy(g->out + g->at, p->mem, p->len);
	} else {
		const struct tfs_node *n = &g->tr->nodes[p->node];
		const struct tfs_tensor *t = tfs_node_tensor(g->tr, n);
		if (n->kind != TFS_NODE_TENSOR)
			abort();
		if (tfs_node_converted(g->tr, n)) {
			/* The float32 view's bytes are the decoder's, checked
			 * by the format target; here only where they go. */
			if (p->off + p->len >
			    tfs_dtype_bytes(TFS_DT_F32,
					    tfs_tensor_elements(&g->tr->m->shards[n->shard].h, t)))
				abort();
			memset(g->out + g->at, 0, p->len);
		} else {
			if (p->off + p->len > t->end - t->begin)
				abort();
			memcpy(g->out + g->at, g->data + t->begin + p->off, p->len);
		}
	}
	g->at += p->len;
	return TFS_OK;
}

/* The tensor nodes under a directory that the export holds. */
static uint32_t count_members(const struct tfs_tree *tr, uint32_t dir)
{
	uint32_t c = 0;
	const struct tfs_node *d = &tr->nodes[dir];
	for (uint32_t k = 0; k < d->count; k++) {
		uint32_t ci = tr->children[d->first + k];
		const struct tfs_node *n = &tr->nodes[ci];
		if (n->kind == TFS_NODE_DIR)
			c += count_members(tr, ci);
		else if (n->kind == TFS_NODE_TENSOR && tfs_export_includes(tr, n))
			c++;
	}
	return c;
}

/* The node under `dir` of the tensor with this full name, or 0. */
static uint32_t find_member(const struct tfs_tree *tr, uint32_t dir, const char *name, uint32_t len)
{
	const struct tfs_node *d = &tr->nodes[dir];
	for (uint32_t k = 0; k < d->count; k++) {
		uint32_t ci = tr->children[d->first + k], f;
		const struct tfs_node *n = &tr->nodes[ci];
		if (n->kind == TFS_NODE_DIR && (f = find_member(tr, ci, name, len)))
			return f;
		if (n->kind == TFS_NODE_TENSOR) {
			const struct tfs_table *h = &tr->m->shards[n->shard].h;
			const struct tfs_tensor *t = tfs_node_tensor(tr, n);
			if (t->name_len == len && memcmp(tfs_tensor_name(h, t), name, len) == 0)
				return ci;
		}
	}
	return 0;
}

static void check_export(const struct tfs_tree *tr, const struct tfs_node *en, const uint8_t *data)
{
	uint64_t size = tfs_export_size(tr, en);
	if (tfs_export_check(tr, en) != TFS_OK)
		return; /* over the header limit: not with inputs this small */
	if (size < 16)
		abort();
	struct gather g = {tr, data, malloc(size), 0, size};
	unsigned char *whole = malloc(size);
	if (!g.out || !whole || tfs_export_walk(tr, en, 0, size + 7, gather_piece, &g) || g.at != size)
		abort();
	memcpy(whole, g.out, size);
	memset(g.out, 0xa5, size);
	for (uint64_t at = 0; at < size;) {
		size_t step = 1 + at % 61;
		g.at = at;
		if (tfs_export_walk(tr, en, at, step, gather_piece, &g) || g.at == at)
			abort();
		at = g.at;
	}
	if (memcmp(whole, g.out, size) != 0)
		abort(); /* stable, and the same in pieces */

	struct tfs_source *src;
	struct tfs_table x;
	struct tfs_diag d;
	struct tfs_parse_opts o = {.flags = TFS_PARSE_STRICT, .warn = noop_warn};
	if (tfs_source_open_mem(whole, size, "export", &src) || tfs_st_read(src, &o, &x, &d) != TFS_OK)
		abort();
	if (x.n != count_members(tr, en->first) || (x.data_start - 8) % 8 != 0)
		abort();
	for (uint32_t i = 0; i < x.n; i++) {
		const struct tfs_tensor *t = &x.t[i];
		uint32_t ni = find_member(tr, en->first, tfs_tensor_name(&x, t), t->name_len);
		if (!ni)
			abort();
		const struct tfs_node *n = &tr->nodes[ni];
		const struct tfs_table *sh = &tr->m->shards[n->shard].h;
		const struct tfs_tensor *s = tfs_node_tensor(tr, n);
		int conv = tfs_node_converted(tr, n);
		if (t->dtype != (conv ? TFS_DT_F32 : s->dtype) || t->ndim != s->ndim ||
		    (s->ndim &&
		     memcmp(&x.dims[t->dims_off], &sh->dims[s->dims_off], s->ndim * sizeof *x.dims)))
			abort();
		if (!conv && (t->end - t->begin != s->end - s->begin ||
			      memcmp(whole + t->begin, data + s->begin, s->end - s->begin)))
			abort();
		unsigned bits = tfs_dtype_info(t->dtype)->bits;
		uint64_t len = t->end - t->begin;
		if ((len % 8 == 0 && t->begin % 8) || (bits >= 8 && t->begin % (bits / 8)))
			abort(); /* the alignment the README promises */
	}
	char *a, *b;
	size_t al, bl;
	if (tfs_table_meta_json(&tr->m->shards[0].h, &a, &al) || tfs_table_meta_json(&x, &b, &bl) ||
	    al != bl || memcmp(a, b, al))
		abort();
	free(a);
	free(b);
	tfs_table_free(&x);
	tfs_source_close(src);
	free(whole);
	free(g.out);
}

/* A re-sharded file: a shard (strictly valid, every tensor the source's)
 * or the index (JSON whose weight_map counts the tensors of all shards). */
static void check_reshard(const struct tfs_tree *tr, const struct tfs_node *nd, const uint8_t *data,
			  uint64_t *shard_tensors, int64_t *index_tensors)
{
	uint64_t size = tfs_node_size(tr, nd);
	unsigned char *whole = fuzz_read_node(tr, nd, size, 0);
	unsigned char *bits = fuzz_read_node(tr, nd, size, 53);
	if (memcmp(whole, bits, size))
		abort();
	const struct tfs_table *sh = &tr->m->shards[0].h;
	if (strcmp(nd->fname, "model.safetensors.index.json") == 0) {
		json_object *o = json_tokener_parse((const char *)whole), *wm;
		if (!o || !json_object_object_get_ex(o, "weight_map", &wm))
			abort();
		*index_tensors = json_object_object_length(wm);
		json_object_put(o);
	} else {
		struct tfs_source *src;
		struct tfs_table x;
		struct tfs_diag d;
		struct tfs_parse_opts o = {.flags = TFS_PARSE_STRICT, .warn = noop_warn};
		if (tfs_source_open_mem(whole, size, "shard", &src) ||
		    tfs_st_read(src, &o, &x, &d) != TFS_OK || x.n == 0)
			abort();
		for (uint32_t i = 0; i < x.n; i++) {
			const struct tfs_tensor *t = &x.t[i], *s = NULL;
			for (uint32_t k = 0; k < sh->n && !s; k++)
				if (sh->t[k].name_len == t->name_len &&
				    !memcmp(tfs_tensor_name(sh, &sh->t[k]), tfs_tensor_name(&x, t),
					    t->name_len))
					s = &sh->t[k];
			if (!s || s->dtype != t->dtype || s->end - s->begin != t->end - t->begin ||
			    memcmp(whole + t->begin, data + s->begin, s->end - s->begin))
				abort();
		}
		*shard_tensors += x.n;
		tfs_table_free(&x);
		tfs_source_close(src);
	}
	free(whole);
	free(bits);
}

/* A tensor's picture, whatever its values: a PNG of the size announced,
 * the same bytes read whole or in pieces. */
static void check_picture(const struct tfs_tree *tr, const struct tfs_node *nd)
{
	static const unsigned char sig[8] = {0x89, 'P', 'N', 'G', '\r', '\n', 0x1a, '\n'};
	uint64_t size = tfs_node_size(tr, nd);
	if (size < 8 + 25 + 12)
		abort();
	unsigned char *whole = fuzz_read_node(tr, nd, size, 0);
	unsigned char *bits = fuzz_read_node(tr, nd, size, 4093);
	if (memcmp(whole, sig, 8) || memcmp(whole, bits, size) || memcmp(whole + size - 8, "IEND", 4))
		abort();
	free(whole);
	free(bits);
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
		const unsigned k_table = tfs_view_kind("tsv"), k_export = tfs_view_kind("export"),
			       k_reshard = tfs_view_kind("reshard"), k_picture = tfs_view_kind("pictures");
		for (int layout = 0; layout < 2; layout++) {
			/* The last byte picks the views' options: it is tensor
			 * data (or the header's end), free to change; -o pictures
			 * in the tree layout's run. */
			uint8_t f = data[size - 1];
			char shard[24];
			snprintf(shard, sizeof shard, "%llu", 1 + (unsigned long long)(f >> 5) * 24);
			char *ok[6], *ov[6];
			size_t no = 0;
			if (f & 1)
				ok[no] = "format", ov[no++] = "npy";
			if (f & 2)
				ok[no] = "convert", ov[no++] = "f32";
			if (!(f & 4))
				ok[no] = "notsv", ov[no++] = "";
			if (f & 8)
				ok[no] = "export", ov[no++] = "";
			if (f & 16)
				ok[no] = "max_shard_size", ov[no++] = shard;
			if (layout == 1)
				ok[no] = "pictures", ov[no++] = "";
			struct tfs_opts opts = {ok, ov, no};
			struct tfs_tree_opts to = {.layout = (enum tfs_layout)layout, .opts = &opts};
			uint64_t shard_tensors = 0;
			int64_t index_tensors = -1;
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
				if (nd->kind == k_table)
					check_table(&tr, nd);
				if (nd->kind == k_export)
					check_export(&tr, nd, data);
				if (nd->kind == k_reshard)
					check_reshard(&tr, nd, data, &shard_tensors, &index_tensors);
				if (nd->kind == k_picture)
					check_picture(&tr, nd);
			}
			if (index_tensors >= 0 && (uint64_t)index_tensors != shard_tensors)
				abort();
			tfs_tree_free(&tr);
		}
		tfs_model_free(&m);
	}
	tfs_source_close(src);
	return 0;
}
