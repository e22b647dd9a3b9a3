/* The GGUF writer (compute/ggufwrite.h). */
#include "compute/ggufwrite.h"

#include <stdlib.h>
#include <string.h>

#include "core/dtype.h"
#include "core/json.h"
#include "core/kv.h"
#include "core/mem.h"

#define DEFAULT_ALIGNMENT 32

int tfs_gguf_offered(const struct tfs_model *m)
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
	struct tfs_gguf_layout *g;
	char *b;
	size_t n, cap;
	size_t segcap;
	uint64_t at;
};

/* Appends len bytes at p (a run of the table's section), or with p NULL
 * the own bytes written since the last run. */
static tfs_err seg_add(struct hb *h, const char *p, size_t off, size_t len)
{
	struct tfs_gguf_layout *g = h->g;
	if (!len)
		return TFS_OK;
	struct tfs_gguf_seg *last = g->nsegs ? &g->segs[g->nsegs - 1] : NULL;
	if (last && p && last->p && last->p + last->len == p) {
		last->len += len;
	} else {
		if (tfs_grow((void **)&g->segs, &h->segcap, (size_t)g->nsegs + 1, sizeof *g->segs))
			return TFS_ERR_NOMEM;
		g->segs[g->nsegs++] = (struct tfs_gguf_seg){p, off, len, h->at, 0};
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
	struct tfs_gguf_layout *g = h->g;
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
			g->parts[g->n++] = (struct tfs_gguf_part){s, i, at};
			at = pad(at + tfs_tensor_size(ts), g->align);
		}
	}
	*data_bytes = at;
	return e;
}

tfs_err tfs_gguf_layout_make(const struct tfs_model *m, struct tfs_gguf_layout *g)
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
			g->segs[g->nsegs++] = (struct tfs_gguf_seg){NULL, 0, padding, h.at, 1};
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

void tfs_gguf_layout_free(struct tfs_gguf_layout *g)
{
	free(g->own);
	free(g->segs);
	free(g->parts);
	memset(g, 0, sizeof *g);
}
