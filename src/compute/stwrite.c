/* The safetensors writer (compute/stwrite.h). */
#include "compute/stwrite.h"

#include <json-c/json.h>
#include <stdlib.h>
#include <string.h>

#include "core/dtype.h"
#include "core/format.h"
#include "core/hash.h"
#include "core/jscan.h"
#include "core/json.h"
#include "core/mem.h"
#include "model/model.h"

/* safetensors' reader refuses a header over this (N, padding included). */
#define HEADER_LIMIT ((uint64_t)TFS_HEADER_CAP)

/* ---- __metadata__: every shard's, merged ---- */

struct kv {
	const char *k, *v;
	size_t kl, vl;
	uint32_t shard;
};

struct merge {
	struct kv *kv;
	size_t n, cap;
	uint32_t *slots; /* kv index + 1 keyed by key */
	size_t nslots;
	const struct tfs_model *m;
	uint32_t disagree; /* keys whose shards disagree */
	char **texts;      /* the JSON texts of values that are not strings */
	size_t ntexts, tcap;
};

static tfs_err merge_put(struct merge *g, const char *k, size_t kl, const char *v, size_t vl, uint32_t shard)
{
	if (tfs_utf8_check((const unsigned char *)k, kl) != kl ||
	    tfs_utf8_check((const unsigned char *)v, vl) != vl) {
		char q[80], qp[TFS_QPATH_MAX];
		tfs_quote(q, sizeof q, k, kl);
		tfs_log("%s: export: metadata key %s is not UTF-8 text and is left out",
			tfs_quote_path(qp, sizeof qp, g->m->shards[shard].path), q);
		return TFS_OK;
	}
	if ((g->n + 1) * 2 > g->nslots) {
		size_t ns = g->nslots ? g->nslots * 2 : 64;
		uint32_t *s = calloc(ns, sizeof *s);
		if (!s)
			return TFS_ERR_NOMEM;
		for (size_t i = 0; i < g->n; i++) {
			size_t j = tfs_hash(g->kv[i].k, g->kv[i].kl, 0) & (ns - 1);
			while (s[j])
				j = (j + 1) & (ns - 1);
			s[j] = (uint32_t)i + 1;
		}
		free(g->slots);
		g->slots = s;
		g->nslots = ns;
	}
	size_t j = tfs_hash(k, kl, 0) & (g->nslots - 1);
	while (g->slots[j]) {
		struct kv *o = &g->kv[g->slots[j] - 1];
		if (o->kl == kl && memcmp(o->k, k, kl) == 0) {
			/* Within a shard the last value wins (the reader's rule);
			 * between shards the first shard's does, and is said. */
			if (o->shard == shard) {
				o->v = v;
				o->vl = vl;
			} else if (o->vl != vl || memcmp(o->v, v, vl) != 0) {
				char q[80], qp[TFS_QPATH_MAX], qn[TFS_QPATH_MAX];
				tfs_quote(q, sizeof q, k, kl);
				tfs_quote_path(qn, sizeof qn, g->m->shards[o->shard].name);
				if (g->disagree++ < 8)
					tfs_log("%s: export: shards disagree on metadata key %s; the exported files carry the value of %s",
						tfs_quote_path(qp, sizeof qp, g->m->shards[shard].path), q,
						qn);
			}
			return TFS_OK;
		}
		j = (j + 1) & (g->nslots - 1);
	}
	if (tfs_grow((void **)&g->kv, &g->cap, g->n + 1, sizeof *g->kv))
		return TFS_ERR_NOMEM;
	g->kv[g->n] = (struct kv){k, v, kl, vl, shard};
	g->slots[j] = (uint32_t)++g->n;
	return TFS_OK;
}

/* A format whose metadata is JSON (GGUF's typed values): each member, as a
 * string when it is one, else as its JSON text, since safetensors'
 * metadata holds strings only. The strings live in `keep` (json-c
 * objects), the texts in g->texts. The keys of a split (split.no...) stay
 * out, as model.gguf leaves them: the exported file is the whole model,
 * and the parts' differing split.no is no disagreement. */
static tfs_err merge_json(struct merge *g, uint32_t shard, json_object *root)
{
	if (!json_object_is_type(root, json_type_object))
		return TFS_OK;
	json_object_object_foreach(root, key, val)
	{
		const char *v;
		size_t vl;
		if (tfs_kv_is_split_key(key, strlen(key)))
			continue;
		if (json_object_is_type(val, json_type_string)) {
			v = json_object_get_string(val);
			vl = (size_t)json_object_get_string_len(val);
		} else {
			char *text = NULL;
			size_t cap = 0;
			vl = 0;
			if (tfs_grow((void **)&g->texts, &g->tcap, g->ntexts + 1, sizeof *g->texts) ||
			    tfs_json_value(&text, &vl, &cap, val, JSON_C_TO_STRING_PLAIN)) {
				free(text);
				return TFS_ERR_NOMEM;
			}
			v = g->texts[g->ntexts++] = text;
		}
		tfs_err e = merge_put(g, key, strlen(key), v, vl, shard);
		if (e)
			return e;
	}
	return TFS_OK;
}

struct skip_ctx {
	const struct tfs_model *m;
	uint32_t shard;
};

static void skipped(void *ctx, const char *key, size_t kl)
{
	const struct skip_ctx *c = ctx;
	char q[80], qp[TFS_QPATH_MAX];
	tfs_quote(q, sizeof q, key, kl);
	tfs_log("%s: export: metadata key %s is not UTF-8 text and is left out",
		tfs_quote_path(qp, sizeof qp, c->m->shards[c->shard].path), q);
}

tfs_err tfs_st_meta(const struct tfs_model *m, char **out, size_t *outlen)
{
	struct merge g;
	memset(&g, 0, sizeof g);
	g.m = m;
	json_object **keep = calloc(m->nshards ? m->nshards : 1, sizeof *keep);
	tfs_err e = keep ? TFS_OK : TFS_ERR_NOMEM;
	int any = 0;
	for (uint32_t s = 0; !e && s < m->nshards; s++) {
		const struct tfs_table *h = &m->shards[s].h;
		if (h->kv.p) {
			char *js;
			size_t jl;
			struct skip_ctx sc = {m, s};
			any = 1;
			if ((e = tfs_kvs_json(&h->kv, &js, &jl, skipped, &sc)))
				break;
			keep[s] = json_tokener_parse(js);
			free(js);
			e = merge_json(&g, s, keep[s]);
			continue;
		}
		if (!h->has_metadata)
			continue;
		any = 1;
		for (uint32_t i = 0; !e && i < h->nmeta; i++) {
			const struct tfs_meta_pair *p = &h->meta[i];
			e = merge_put(&g, h->arena + p->key_off, p->key_len, h->arena + p->val_off,
				      p->val_len, s);
		}
	}
	char *b = NULL;
	size_t len = 0, cap = 0;
	if (!e && any) {
		e = tfs_json_puts(&b, &len, &cap, "\"__metadata__\":{");
		for (size_t i = 0; !e && i < g.n; i++) {
			if ((e = tfs_json_put(&b, &len, &cap, ",", i ? 1 : 0)) ||
			    (e = tfs_json_str_std(&b, &len, &cap, g.kv[i].k, g.kv[i].kl)) ||
			    (e = tfs_json_put(&b, &len, &cap, ":", 1)))
				break;
			e = tfs_json_str_std(&b, &len, &cap, g.kv[i].v, g.kv[i].vl);
		}
		if (!e)
			e = tfs_json_puts(&b, &len, &cap, "}");
	}
	for (uint32_t s = 0; keep && s < m->nshards; s++)
		json_object_put(keep[s]);
	free(keep);
	for (size_t i = 0; i < g.ntexts; i++)
		free(g.texts[i]);
	free(g.texts);
	free(g.kv);
	free(g.slots);
	if (e) {
		free(b);
		return e;
	}
	*out = b;
	*outlen = len;
	return TFS_OK;
}

/* The documented order: tensors whose size is a multiple of 8 first, then
 * the rest; within each, safetensors' writer order (dtype from the widest
 * down, in its declaration order), then the name, bytewise. */
static int by_order(const void *pa, const void *pb)
{
	const struct tfs_st_entry *a = pa, *b = pb;
	uint32_t ra = (a->size % 8 ? 1u << 16 : 0) + (0xffffu - a->dtype);
	uint32_t rb = (b->size % 8 ? 1u << 16 : 0) + (0xffffu - b->dtype);
	if (ra != rb)
		return ra < rb ? -1 : 1;
	size_t n = a->len < b->len ? a->len : b->len;
	int c = memcmp(a->name, b->name, n);
	if (c)
		return c;
	return a->len < b->len ? -1 : a->len > b->len;
}

tfs_err tfs_st_header(struct tfs_st_entry *ent, uint32_t n, const char *meta, size_t meta_len, char **out,
		      size_t *out_len, uint64_t *start)
{
	char *h = NULL;
	size_t len = 0, cap = 0;
	qsort(ent, n, sizeof *ent, by_order);
	/* The length is written over the first 8 bytes at the end. */
	tfs_err e = tfs_json_put(&h, &len, &cap, "\0\0\0\0\0\0\0\0{", 9);
	if (!e)
		e = tfs_json_put(&h, &len, &cap, meta, meta_len);
	uint64_t at = 0;
	for (uint32_t i = 0; !e && i < n; i++) {
		const struct tfs_st_entry *x = &ent[i];
		start[i] = at;
		if ((i || meta_len) && (e = tfs_json_put(&h, &len, &cap, ",", 1)))
			break;
		if ((e = tfs_json_str_std(&h, &len, &cap, x->name, x->len)) ||
		    (e = tfs_json_puts(&h, &len, &cap, ":{\"dtype\":\"")) ||
		    (e = tfs_json_puts(&h, &len, &cap, tfs_dtype_name(x->dtype))) ||
		    (e = tfs_json_puts(&h, &len, &cap, "\",\"shape\":[")))
			break;
		for (uint32_t d = 0; !e && d < x->ndim; d++) {
			if (!(e = tfs_json_put(&h, &len, &cap, ",", d ? 1 : 0)))
				e = tfs_json_u64(&h, &len, &cap, x->dims[d]);
		}
		if (e || (e = tfs_json_puts(&h, &len, &cap, "],\"data_offsets\":[")) ||
		    (e = tfs_json_u64(&h, &len, &cap, at)) || (e = tfs_json_put(&h, &len, &cap, ",", 1)) ||
		    (e = tfs_json_u64(&h, &len, &cap, at + x->size)) ||
		    (e = tfs_json_puts(&h, &len, &cap, "]}")))
			break;
		at += x->size;
	}
	if (!e)
		e = tfs_json_put(&h, &len, &cap, "}", 1);
	/* Spaces after it to a multiple of 8, as safetensors' writer pads:
	 * with the 8-byte length in front, the data starts 8-aligned. */
	while (!e && len % 8)
		e = tfs_json_put(&h, &len, &cap, " ", 1);
	if (!e && len - 8 > HEADER_LIMIT)
		e = TFS_ERR_FORMAT;
	if (e) {
		free(h);
		return e;
	}
	uint64_t nhdr = len - 8;
	for (int i = 0; i < 8; i++)
		h[i] = (char)(nhdr >> (8 * i));
	for (uint32_t i = 0; i < n; i++)
		start[i] += len;
	start[n] = len + at;
	*out = h;
	*out_len = len;
	return TFS_OK;
}
