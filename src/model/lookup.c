/* A model's tensors by name (model/lookup.h). */
#include "model/lookup.h"

#include <stdlib.h>
#include <string.h>

#include "core/hash.h"

struct tfs_model_names {
	const struct tfs_model *m;
	struct tfs_model_pos *slot; /* n + 1; 0 in n: empty */
	size_t cap;
};

static const char *name_at(const struct tfs_model *m, const struct tfs_model_pos *p, size_t *len)
{
	const struct tfs_table *h = &m->shards[p->shard].h;
	*len = h->t[p->idx].name_len;
	return tfs_tensor_name(h, &h->t[p->idx]);
}

/* The slot of name[0..len): its own, or the empty one it would take. */
static size_t slot_of(const struct tfs_model_names *x, const char *name, size_t len)
{
	size_t i = (size_t)tfs_hash(name, len, tfs_hash_seed) & (x->cap - 1);
	while (x->slot[i].n) {
		size_t l;
		const char *s = name_at(x->m, &x->slot[i], &l);
		if (l == len && memcmp(s, name, len) == 0)
			break;
		i = (i + 1) & (x->cap - 1);
	}
	return i;
}

tfs_err tfs_model_names_new(const struct tfs_model *m, struct tfs_model_names **out)
{
	struct tfs_model_names *x = calloc(1, sizeof *x);
	if (!x)
		return TFS_ERR_NOMEM;
	x->m = m;
	x->cap = 16;
	while (x->cap < 2 * (size_t)m->ntensors + 2)
		x->cap *= 2;
	if (!(x->slot = calloc(x->cap, sizeof *x->slot))) {
		free(x);
		return TFS_ERR_NOMEM;
	}
	uint64_t n = 0;
	for (uint32_t s = 0; s < m->nshards; s++)
		for (uint32_t i = 0; i < m->shards[s].h.n; i++) {
			const struct tfs_tensor *t = &m->shards[s].h.t[i];
			size_t k = slot_of(x, tfs_tensor_name(&m->shards[s].h, t), t->name_len);
			if (!x->slot[k].n)
				x->slot[k] = (struct tfs_model_pos){s, i, n + 1};
			n++;
		}
	*out = x;
	return TFS_OK;
}

void tfs_model_names_free(struct tfs_model_names *x)
{
	if (x)
		free(x->slot);
	free(x);
}

int tfs_model_find(const struct tfs_model_names *x, const char *name, size_t len, struct tfs_model_pos *at)
{
	const struct tfs_model_pos *p = &x->slot[slot_of(x, name, len)];
	if (!p->n)
		return 0;
	*at = (struct tfs_model_pos){p->shard, p->idx, p->n - 1};
	return 1;
}
