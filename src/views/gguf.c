/* -o export on a model whose metadata is typed (GGUF): model.gguf, every
 * tensor of the model in one GGUF file (all parts of a split model, in
 * part order, each part's tensors in its order), the first part's
 * key/value pairs in their order with the edits applied and split.* left
 * out, each tensor's data read from its own range of the source. The
 * layout is ggml's writer's (gguf.cpp, as llama-gguf-split --merge uses
 * it): version 3, the tensor infos, zeros up to the alignment, then each
 * tensor's data followed by zeros up to the alignment. README, "A merged,
 * edited GGUF", says where it differs.
 *
 * The header is made the first time the file's size is asked for (a
 * vocabulary is megabytes, and most mounts never look) and then kept. */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "core/dtype.h"
#include "core/json.h"
#include "core/kv.h"
#include "views/export.h"
#include "views/tree.h"
#include "views/view.h"

#define DEFAULT_ALIGNMENT 32

struct part {
	uint32_t shard, idx; /* the tensor */
	uint64_t start;      /* of its data in the file */
};

/* A run of the header: bytes of `own`, or of the table's key/value
 * section (pairs no edit touched are not copied: a vocabulary is
 * megabytes, and the table keeps it for the life of the mount), or zeros
 * (the padding up to the alignment, which a GGUF may set to 2^31: never
 * made in memory). */
struct seg {
	const char *p; /* NULL: own + off, or zeros */
	size_t off;
	uint64_t len;
	uint64_t at; /* where it starts in the file */
	int zeros;
};

struct tfs_gguf_out {
	pthread_mutex_t lock;
	int done;
	tfs_err err;
	char *own; /* the header's own bytes */
	struct seg *segs;
	uint32_t nsegs;
	size_t hdr_len; /* up to the first tensor's data, padding included */
	struct part *parts;
	uint32_t n;
	uint64_t align, size;
};

/* Every part's metadata is typed and every tensor has a ggml type. */
static int offered(const struct tfs_model *m)
{
	if (!m->nshards)
		return 0;
	for (uint32_t s = 0; s < m->nshards; s++) {
		const struct tfs_table *h = &m->shards[s].h;
		if (!h->kv.p)
			return 0;
		for (uint32_t i = 0; i < h->n; i++)
			if (tfs_dtype_to_ggml(h->t[i].dtype) < 0)
				return 0;
	}
	return 1;
}

static tfs_err put_u(char **b, size_t *n, size_t *cap, uint64_t v, unsigned bytes)
{
	char tmp[8];
	for (unsigned i = 0; i < bytes; i++)
		tmp[i] = (char)(v >> (8 * i));
	return tfs_json_put(b, n, cap, tmp, bytes);
}

static int is_split_key(const struct tfs_kv *kv)
{
	return tfs_kv_is_split_key(kv->key, kv->klen);
}

static uint64_t pad(uint64_t v, uint64_t a)
{
	return v + (a - v % a) % a;
}

struct hb {
	struct tfs_gguf_out *g;
	char *b;
	size_t n, cap;
	size_t segcap;
	uint64_t at;
};

/* Appends len bytes at p (a run of the table's section), or with p NULL
 * the own bytes written since the last run. */
static tfs_err seg_add(struct hb *h, const char *p, size_t off, size_t len)
{
	struct tfs_gguf_out *g = h->g;
	if (!len)
		return TFS_OK;
	struct seg *last = g->nsegs ? &g->segs[g->nsegs - 1] : NULL;
	if (last && p && last->p && last->p + last->len == p) {
		last->len += len;
	} else {
		if (tfs_grow((void **)&g->segs, &h->segcap, (size_t)g->nsegs + 1, sizeof *g->segs))
			return TFS_ERR_NOMEM;
		g->segs[g->nsegs++] = (struct seg){p, off, len, h->at, 0};
	}
	h->at += len;
	return TFS_OK;
}

/* Own bytes: written to the buffer, then made a run by own_done(). */
static size_t own_mark(const struct hb *h)
{
	return h->n;
}

static tfs_err own_done(struct hb *h, size_t mark)
{
	return seg_add(h, NULL, mark, h->n - mark);
}

static tfs_err put_tensor_infos(struct hb *h, const struct tfs_model *m, uint64_t *data_bytes)
{
	struct tfs_gguf_out *g = h->g;
	uint64_t at = 0;
	tfs_err e = TFS_OK;
	for (uint32_t s = 0; !e && s < m->nshards; s++) {
		const struct tfs_table *t = &m->shards[s].h;
		for (uint32_t i = 0; !e && i < t->n; i++) {
			const struct tfs_tensor *ts = &t->t[i];
			e = put_u(&h->b, &h->n, &h->cap, ts->name_len, 8);
			if (!e)
				e = tfs_json_put(&h->b, &h->n, &h->cap, tfs_tensor_name(t, ts), ts->name_len);
			if (!e)
				e = put_u(&h->b, &h->n, &h->cap, ts->ndim, 4);
			/* ggml's ne[0] is the fastest-varying dimension: the
			 * table's shape (numpy order) reversed. */
			for (uint32_t d = ts->ndim; !e && d-- > 0;)
				e = put_u(&h->b, &h->n, &h->cap, t->dims[ts->dims_off + d], 8);
			if (!e)
				e = put_u(&h->b, &h->n, &h->cap, (uint64_t)tfs_dtype_to_ggml(ts->dtype), 4);
			if (!e)
				e = put_u(&h->b, &h->n, &h->cap, at, 8);
			g->parts[g->n++] = (struct part){s, i, at};
			at = pad(at + tfs_tensor_size(ts), g->align);
		}
	}
	*data_bytes = at;
	return e;
}

static tfs_err build(const struct tfs_model *m, struct tfs_gguf_out *g)
{
	const struct tfs_kvs *kvs = &m->shards[0].h.kv;
	struct tfs_kv kv;
	size_t pos = 0;
	uint64_t nkv = 0, ntensors = 0, data_bytes = 0;
	struct hb h = {.g = g};
	g->align = DEFAULT_ALIGNMENT;
	while (tfs_kvs_next(kvs, &pos, &kv)) {
		uint64_t a;
		if (is_split_key(&kv))
			continue;
		nkv++;
		if (kv.klen == 17 && memcmp(kv.key, "general.alignment", 17) == 0 && kv.type == TFS_KV_U32 &&
		    tfs_kv_uint(&kv, &a) && a && !(a & (a - 1)))
			g->align = a;
	}
	for (uint32_t s = 0; s < m->nshards; s++)
		ntensors += m->shards[s].h.n;
	if (ntensors > UINT32_MAX || !(g->parts = calloc(ntensors ? ntensors : 1, sizeof *g->parts)))
		return TFS_ERR_NOMEM;
	size_t mark = own_mark(&h);
	tfs_err e = tfs_json_put(&h.b, &h.n, &h.cap, "GGUF", 4);
	if (!e)
		e = put_u(&h.b, &h.n, &h.cap, 3, 4);
	if (!e)
		e = put_u(&h.b, &h.n, &h.cap, ntensors, 8);
	if (!e)
		e = put_u(&h.b, &h.n, &h.cap, nkv, 8);
	if (!e)
		e = own_done(&h, mark);
	pos = 0;
	while (!e && tfs_kvs_next(kvs, &pos, &kv))
		if (!is_split_key(&kv))
			e = seg_add(&h, (const char *)kv.pair, 0, kv.plen);
	mark = own_mark(&h);
	if (!e)
		e = put_tensor_infos(&h, m, &data_bytes);
	if (!e)
		e = own_done(&h, mark);
	uint64_t padding = (g->align - h.at % g->align) % g->align;
	if (!e && padding) {
		if (tfs_grow((void **)&g->segs, &h.segcap, (size_t)g->nsegs + 1, sizeof *g->segs))
			e = TFS_ERR_NOMEM;
		else
			g->segs[g->nsegs++] = (struct seg){NULL, 0, padding, h.at, 1};
		h.at += padding;
	}
	if (e) {
		free(h.b);
		return TFS_ERR_NOMEM;
	}
	g->own = h.b;
	g->hdr_len = h.at;
	for (uint32_t k = 0; k < g->n; k++)
		g->parts[k].start += h.at;
	g->size = h.at + data_bytes;
	return TFS_OK;
}

static struct tfs_gguf_out *ready(const struct tfs_tree *t, const struct tfs_node *nd)
{
	struct tfs_gguf_out *g = t->vstate[nd->kind];
	pthread_mutex_lock(&g->lock);
	if (!g->done) {
		g->err = build(t->m, g);
		g->done = 1;
		if (g->err)
			tfs_log("%s: cannot be made: out of memory", nd->fname);
	}
	pthread_mutex_unlock(&g->lock);
	return g->err ? NULL : g;
}

static uint64_t size(const struct tfs_tree *t, const struct tfs_node *n)
{
	struct tfs_gguf_out *g = ready(t, n);
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
	struct tfs_gguf_out *g = ready(t, nd);
	if (!g)
		return TFS_ERR_NOMEM;
	uint64_t end = off + len;
	tfs_err e = TFS_OK;
	/* The header's runs, kept for the life of the mount: no copy. */
	for (uint32_t k = 0; !e && k < g->nsegs && off < end && off < g->hdr_len; k++) {
		const struct seg *sg = &g->segs[k];
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
		const struct part *p = &g->parts[k];
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
	free(g->own);
	free(g->segs);
	free(g->parts);
	pthread_mutex_destroy(&g->lock);
	free(g);
}

/* It comes with -o export (the export view's option). */
static int wanted(const struct tfs_tree_opts *o)
{
	return tfs_opts_get(o->opts, "export") != NULL;
}

/* Whether or not the model is one it is made for: a root tensor's name
 * never depends on the model's metadata. */
static const char *const *reserves(const struct tfs_tree_opts *o)
{
	static const char *const names[] = {TFS_GGUF_ROOT, NULL};
	return o->layout == TFS_LAYOUT_FLAT ? names : NULL;
}

static tfs_err at_root(struct tfs_tree_add *a, void *state, struct tfs_diag *d)
{
	(void)state;
	(void)d;
	if (!offered(tfs_tree_add_tree(a)->m))
		return TFS_OK;
	return tfs_tree_add_node(a, TFS_TREE_ROOT, TFS_GGUF_ROOT, 0, 0, NULL);
}

const struct tfs_view_ops tfs_view_gguf = {
	.name = "gguf",
	.flags = TFS_VIEWF_GENERATED,
	.wanted = wanted,
	.reserves = reserves,
	.state_new = state_new,
	.state_free = state_free,
	.at_root = at_root,
	.size = size,
	.pieces = pieces,
	.open = check,
};
