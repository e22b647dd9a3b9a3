/* -o export on a model whose metadata is typed (GGUF): model.gguf, every
 * tensor of the model in one GGUF file (all parts of a split model, in
 * part order, each part's tensors in its order), the first part's
 * key/value pairs in their order with the edits applied and split.* left
 * out, each tensor's data read from its own range of the source. The
 * layout is ggml's writer's (gguf.cpp, as llama-gguf-split --merge uses
 * it): version 3, the tensor infos, zeros up to the alignment, then each
 * tensor's data followed by zeros up to the alignment. docs/views.md, "A merged,
 * edited GGUF", says where it differs.
 *
 * The header is made the first time the file's size is asked for (a
 * vocabulary is megabytes, and most mounts never look) and then kept. */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "compute/ggufwrite.h"
#include "views/tree.h"
#include "views/view.h"

/* Its name, at the root. */
#define GGUF_ROOT "model.gguf"

/* The file's layout, made when first asked for. */
struct tfs_gguf_out {
	pthread_mutex_t lock;
	int done;
	tfs_err err;
	struct tfs_gguf_layout l;
};

static const struct tfs_gguf_layout *ready(const struct tfs_tree *t, const struct tfs_node *nd)
{
	struct tfs_gguf_out *g = t->vstate[nd->kind];
	pthread_mutex_lock(&g->lock);
	if (!g->done) {
		g->err = tfs_gguf_layout_make(t->m, &g->l);
		g->done = 1;
		if (g->err)
			tfs_log("%s: cannot be made: out of memory", nd->fname);
	}
	pthread_mutex_unlock(&g->lock);
	return g->err ? NULL : &g->l;
}

static uint64_t size(const struct tfs_tree *t, const struct tfs_node *n)
{
	const struct tfs_gguf_layout *g = ready(t, n);
	return g ? g->size : 0;
}

static tfs_err check(const struct tfs_tree *t, const struct tfs_node *n)
{
	return ready(t, n) ? TFS_OK : TFS_ERR_NOMEM;
}

static const char zeros[64 << 10];

static tfs_err put_zeros(struct tfs_pieces *out, uint64_t len)
{
	tfs_err e = TFS_OK;
	while (!e && len) {
		size_t k = len < sizeof zeros ? (size_t)len : sizeof zeros;
		e = tfs_pieces_mem(out, zeros, k);
		len -= k;
	}
	return e;
}

static tfs_err pieces(const struct tfs_tree *t, const struct tfs_node *nd, uint64_t off, size_t len,
		      struct tfs_pieces *out)
{
	const struct tfs_gguf_layout *g = ready(t, nd);
	if (!g)
		return TFS_ERR_NOMEM;
	uint64_t end = off + len;
	tfs_err e = TFS_OK;
	/* The header's runs, kept for the life of the mount: no copy. */
	for (uint32_t k = 0; !e && k < g->nsegs && off < end && off < g->hdr_len; k++) {
		const struct tfs_gguf_seg *sg = &g->segs[k];
		if (sg->at + sg->len <= off)
			continue;
		uint64_t stop = end < sg->at + sg->len ? end : sg->at + sg->len;
		const char *base = sg->p ? sg->p : g->own + sg->off;
		e = sg->zeros ? put_zeros(out, stop - off)
			      : tfs_pieces_mem(out, base + (off - sg->at), (size_t)(stop - off));
		off = stop;
	}
	if (e || off >= end || !g->n)
		return e ? e : put_zeros(out, end - off);
	/* The last tensor that starts at or before off. */
	uint32_t lo = 0, hi = g->n;
	while (hi - lo > 1) {
		uint32_t mid = lo + (hi - lo) / 2;
		if (g->parts[mid].start <= off)
			lo = mid;
		else
			hi = mid;
	}
	for (uint32_t k = lo; !e && k < g->n && off < end; k++) {
		const struct tfs_gguf_part *p = &g->parts[k];
		const struct tfs_shard *sh = &t->m->shards[p->shard];
		const struct tfs_tensor *ts = &sh->h.t[p->idx];
		uint64_t data_end = p->start + tfs_tensor_size(ts);
		uint64_t next = k + 1 < g->n ? g->parts[k + 1].start : g->size;
		if (off < data_end) {
			uint64_t stop = end < data_end ? end : data_end;
			e = tfs_pieces_src(out, sh->src, ts->begin + (off - p->start), (size_t)(stop - off),
					   ts->end);
			off = stop;
		}
		if (!e && off < end && off < next) {
			uint64_t stop = end < next ? end : next;
			e = put_zeros(out, stop - off);
			off = stop;
		}
	}
	return e;
}

static void *state_new(const struct tfs_model *m, const struct tfs_tree_opts *o)
{
	(void)m;
	(void)o;
	struct tfs_gguf_out *g = calloc(1, sizeof *g);
	if (g)
		pthread_mutex_init(&g->lock, NULL);
	return g;
}

static void state_free(void *state)
{
	struct tfs_gguf_out *g = state;
	if (!g)
		return;
	tfs_gguf_layout_free(&g->l);
	pthread_mutex_destroy(&g->lock);
	free(g);
}

/* It comes with -o export, which the exports declare (--help has their
 * line): this view follows it. */
static const struct tfs_opt_spec opts[] = {
	{"export", 0, NULL, NULL, 0},
	{NULL, 0, NULL, NULL, 0},
};

static int wanted(const struct tfs_tree_opts *o)
{
	return tfs_opts_get(o->opts, "export") != NULL;
}

/* Whether or not the model is one it is made for: a root tensor's name
 * never depends on the model's metadata. */
static const char *const *reserves(const struct tfs_tree_opts *o)
{
	static const char *const names[] = {GGUF_ROOT, NULL};
	return o->layout == TFS_LAYOUT_FLAT ? names : NULL;
}

static tfs_err at_root(struct tfs_tree_add *a, void *state, struct tfs_diag *d)
{
	(void)state;
	(void)d;
	if (!tfs_gguf_offered(tfs_tree_add_tree(a)->m))
		return TFS_OK;
	return tfs_tree_add_node(a, TFS_TREE_ROOT, GGUF_ROOT, 0, 0, NULL);
}

const struct tfs_view_ops tfs_view_gguf = {
	.name = "gguf",
	.flags = TFS_VIEWF_GENERATED,
	.opts = opts,
	.wanted = wanted,
	.reserves = reserves,
	.state_new = state_new,
	.state_free = state_free,
	.at_root = at_root,
	.size = size,
	.pieces = pieces,
	.open = check,
};
