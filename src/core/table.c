#include "core/table.h"

#include <stdlib.h>
#include <string.h>

#include "core/hash.h"
#include "core/json.h"

tfs_err tfs_grow(void **p, size_t *cap, size_t need, size_t elem)
{
	if (need <= *cap)
		return TFS_OK;
	size_t nc = *cap ? *cap : 64;
	while (nc < need)
		nc *= 2;
	if (nc > SIZE_MAX / elem)
		return TFS_ERR_NOMEM;
	void *q = realloc(*p, nc * elem);
	if (!q)
		return TFS_ERR_NOMEM;
	*p = q;
	*cap = nc;
	return TFS_OK;
}

void tfs_table_free(struct tfs_table *t)
{
	if (!t)
		return;
	free(t->kv.own);
	free(t->t);
	free(t->arena);
	free(t->dims);
	free(t->meta);
	free(t->facts);
	memset(t, 0, sizeof *t);
}

const char *tfs_tensor_dtype(const struct tfs_table *h, const struct tfs_tensor *t, size_t *len)
{
	const char *name = tfs_dtype_name(t->dtype);
	if (!name) {
		*len = t->dtype_len;
		return h->arena + t->dtype_off;
	}
	*len = strlen(name);
	return name;
}

uint64_t tfs_tensor_elements(const struct tfs_table *h, const struct tfs_tensor *t)
{
	uint64_t n = 1;
	/* A zero anywhere makes it 0, however large the others (an overflow
	 * on the way there is no overflow). */
	for (uint32_t i = 0; i < t->ndim; i++)
		if (h->dims[t->dims_off + i] == 0)
			return 0;
	for (uint32_t i = 0; i < t->ndim; i++) {
		uint64_t d = h->dims[t->dims_off + i];
		if (d && n > UINT64_MAX / d)
			return UINT64_MAX;
		n *= d;
	}
	return n;
}

tfs_err tfs_table_meta_json(const struct tfs_table *h, char **out, size_t *outlen)
{
	if (h->kv.p)
		return tfs_kvs_json(&h->kv, out, outlen, NULL, NULL);
	char *b = NULL;
	size_t len = 0, cap = 0;
	tfs_err e = TFS_OK;
	if (!h->has_metadata || h->nmeta == 0) {
		e = tfs_json_put(&b, &len, &cap, "{}\n", 3);
	} else {
		e = tfs_json_put(&b, &len, &cap, "{\n", 2);
		for (uint32_t i = 0; !e && i < h->nmeta; i++) {
			const struct tfs_meta_pair *m = &h->meta[i];
			e = tfs_json_put(&b, &len, &cap, "  ", 2);
			if (!e)
				e = tfs_json_str(&b, &len, &cap, h->arena + m->key_off, m->key_len);
			if (!e)
				e = tfs_json_put(&b, &len, &cap, ": ", 2);
			if (!e)
				e = tfs_json_str(&b, &len, &cap, h->arena + m->val_off, m->val_len);
			if (!e)
				e = tfs_json_puts(&b, &len, &cap, i + 1 < h->nmeta ? ",\n" : "\n");
		}
		if (!e)
			e = tfs_json_put(&b, &len, &cap, "}\n", 2);
	}
	if (e) {
		free(b);
		return e;
	}
	*out = b;
	*outlen = len;
	return TFS_OK;
}

/* ---- building ---- */

tfs_err tfs_table_text2(struct tfs_table_builder *b, const char *p, size_t len, const char *p2, size_t len2,
			uint32_t *off)
{
	struct tfs_table *h = b->t;
	/* A NUL after every entry lets names be used as C strings where the
	 * name has none inside. */
	if (h->arena_len + len + len2 + 1 > UINT32_MAX ||
	    tfs_grow((void **)&h->arena, &b->acap, h->arena_len + len + len2 + 1, 1))
		return TFS_ERR_NOMEM;
	if (len)
		memcpy(h->arena + h->arena_len, p, len);
	if (len2)
		memcpy(h->arena + h->arena_len + len, p2, len2);
	h->arena[h->arena_len + len + len2] = 0;
	*off = (uint32_t)h->arena_len;
	h->arena_len += len + len2 + 1;
	return TFS_OK;
}

tfs_err tfs_table_text(struct tfs_table_builder *b, const char *p, size_t len, uint32_t *off)
{
	return tfs_table_text2(b, p, len, NULL, 0, off);
}

tfs_err tfs_table_dim(struct tfs_table_builder *b, uint64_t v)
{
	struct tfs_table *h = b->t;
	if (h->ndims >= UINT32_MAX || tfs_grow((void **)&h->dims, &b->dcap, h->ndims + 1, sizeof *h->dims))
		return TFS_ERR_NOMEM;
	h->dims[h->ndims++] = v;
	return TFS_OK;
}

static tfs_err slots_grow(struct tfs_table_builder *b)
{
	struct tfs_table *h = b->t;
	size_t ns = b->nslots ? b->nslots * 2 : 1024;
	uint32_t *sl = calloc(ns, sizeof *sl);
	if (!sl)
		return TFS_ERR_NOMEM;
	for (uint32_t i = 0; i < h->n; i++) {
		const struct tfs_tensor *t = &h->t[i];
		size_t j = tfs_hash(h->arena + t->name_off, t->name_len, tfs_hash_seed) & (ns - 1);
		while (sl[j])
			j = (j + 1) & (ns - 1);
		sl[j] = i + 1;
	}
	free(b->slots);
	b->slots = sl;
	b->nslots = ns;
	return TFS_OK;
}

tfs_err tfs_table_reserve(struct tfs_table_builder *b, uint32_t n, size_t arena, size_t dims)
{
	struct tfs_table *h = b->t;
	if (tfs_grow((void **)&h->t, &b->tcap, (size_t)h->n + n, sizeof *h->t) ||
	    tfs_grow((void **)&h->arena, &b->acap, h->arena_len + arena, 1) ||
	    tfs_grow((void **)&h->dims, &b->dcap, h->ndims + dims, sizeof *h->dims))
		return TFS_ERR_NOMEM;
	while (((size_t)h->n + n) * 2 >= b->nslots)
		if (slots_grow(b))
			return TFS_ERR_NOMEM;
	return TFS_OK;
}

tfs_err tfs_table_put(struct tfs_table_builder *b, const struct tfs_tensor *t, int replace, int *dup)
{
	struct tfs_table *h = b->t;
	if (dup)
		*dup = 0;
	if ((size_t)h->n * 2 >= b->nslots && slots_grow(b))
		return TFS_ERR_NOMEM;
	const char *name = h->arena + t->name_off;
	size_t j = tfs_hash(name, t->name_len, tfs_hash_seed) & (b->nslots - 1);
	while (b->slots[j]) {
		struct tfs_tensor *o = &h->t[b->slots[j] - 1];
		if (o->name_len == t->name_len && memcmp(h->arena + o->name_off, name, t->name_len) == 0) {
			if (replace)
				*o = *t;
			else if (dup)
				*dup = 1;
			return TFS_OK;
		}
		j = (j + 1) & (b->nslots - 1);
	}
	if (h->n == UINT32_MAX || tfs_grow((void **)&h->t, &b->tcap, (size_t)h->n + 1, sizeof *h->t))
		return TFS_ERR_NOMEM;
	h->t[h->n] = *t;
	b->slots[j] = ++h->n;
	return TFS_OK;
}

tfs_err tfs_table_meta(struct tfs_table_builder *b, const struct tfs_meta_pair *m)
{
	struct tfs_table *h = b->t;
	if (h->nmeta == UINT32_MAX ||
	    tfs_grow((void **)&h->meta, &b->mcap, (size_t)h->nmeta + 1, sizeof *h->meta))
		return TFS_ERR_NOMEM;
	h->meta[h->nmeta++] = *m;
	return TFS_OK;
}

tfs_err tfs_table_meta_dedupe(struct tfs_table_builder *b)
{
	struct tfs_table *h = b->t;
	if (h->nmeta < 2)
		return TFS_OK;
	size_t ns = 16;
	while (ns < (size_t)h->nmeta * 2)
		ns *= 2;
	uint32_t *sl = calloc(ns, sizeof *sl);
	if (!sl)
		return TFS_ERR_NOMEM;
	uint32_t out = 0;
	for (uint32_t i = 0; i < h->nmeta; i++) {
		struct tfs_meta_pair *m = &h->meta[i];
		const char *k = h->arena + m->key_off;
		size_t j = tfs_hash(k, m->key_len, tfs_hash_seed) & (ns - 1);
		for (;;) {
			if (!sl[j]) {
				h->meta[out] = *m;
				sl[j] = ++out;
				break;
			}
			struct tfs_meta_pair *o = &h->meta[sl[j] - 1];
			if (o->key_len == m->key_len && memcmp(h->arena + o->key_off, k, m->key_len) == 0) {
				o->val_off = m->val_off;
				o->val_len = m->val_len;
				break;
			}
			j = (j + 1) & (ns - 1);
		}
	}
	free(sl);
	h->nmeta = out;
	return TFS_OK;
}

void tfs_table_builder_done(struct tfs_table_builder *b)
{
	free(b->slots);
	b->slots = NULL;
	b->nslots = 0;
}

tfs_err tfs_table_fact(struct tfs_table *t, const char *key, const char *val, size_t vlen)
{
	size_t kl = strlen(key);
	char *p = realloc(t->facts, t->facts_len + kl + vlen + 2);
	if (!p)
		return TFS_ERR_NOMEM;
	memcpy(p + t->facts_len, key, kl + 1);
	memcpy(p + t->facts_len + kl + 1, val, vlen);
	p[t->facts_len + kl + 1 + vlen] = 0;
	t->facts = p;
	t->facts_len += kl + vlen + 2;
	return TFS_OK;
}
