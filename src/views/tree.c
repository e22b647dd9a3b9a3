#include "views/tree.h"
#include "views/view.h"
#include "views/hashes.h"
#include "views/tree_i.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/hash.h"
#include "core/json.h"
#include "core/mem.h"
#include "core/names.h"
#include "views/convert.h"

static inline uint64_t key_hash(uint32_t parent, const char *name, size_t len)
{
	return tfs_hash(name, len, tfs_hash_seed ^ ((uint64_t)parent * 0x9e3779b97f4a7c15ull));
}

uint32_t tfs_tree_lookup(const struct tfs_tree *t, uint32_t parent, const char *name, size_t len)
{
	if (!t->nslots)
		return 0;
	size_t j = key_hash(parent, name, len) & (t->nslots - 1);
	while (t->slots[j]) {
		const struct tfs_node *n = &t->nodes[t->slots[j]];
		if (n->parent == parent && n->fname_len == len && memcmp(n->fname, name, len) == 0)
			return t->slots[j];
		j = (j + 1) & (t->nslots - 1);
	}
	return 0;
}

/* Inserts node `ni`; returns 0, or the node that already has its name. */
uint32_t tfs_tree_slot_insert(struct tfs_tree *t, uint32_t ni)
{
	const struct tfs_node *n = &t->nodes[ni];
	size_t j = key_hash(n->parent, n->fname, n->fname_len) & (t->nslots - 1);
	while (t->slots[j]) {
		const struct tfs_node *o = &t->nodes[t->slots[j]];
		if (o->parent == n->parent && o->fname_len == n->fname_len &&
		    memcmp(o->fname, n->fname, n->fname_len) == 0)
			return t->slots[j];
		j = (j + 1) & (t->nslots - 1);
	}
	t->slots[j] = ni;
	return 0;
}

uint64_t tfs_node_size(const struct tfs_tree *t, const struct tfs_node *n)
{
	const struct tfs_view_ops *v = tfs_view_of_kind(n->kind);
	return v ? v->size(t, n) : 0;
}

tfs_err tfs_node_pieces(const struct tfs_tree *t, const struct tfs_node *n, uint64_t off, size_t len,
			struct tfs_pieces *out)
{
	const struct tfs_view_ops *v = tfs_view_of_kind(n->kind);
	return v ? v->pieces(t, n, off, len, out) : TFS_ERR_INVAL;
}

tfs_err tfs_tree_blob(const struct tfs_tree *t, uint32_t ref, const char **data, size_t *len)
{
	/* The tree is shared read-only by the FUSE threads; this one lazily
	 * filled member is guarded by its own lock. */
	struct tfs_tree *w = (struct tfs_tree *)t;
	struct tfs_blob *b = &w->blobs[ref];
	tfs_err e = TFS_OK;
	pthread_mutex_lock(&w->blob_lock);
	if (!b->ready) {
		char *json;
		size_t jl;
		if (!tfs_model_meta_json(t->m, &json, &jl)) {
			b->data = json;
			b->len = jl;
			b->ready = 1;
		}
	}
	if (b->ready) {
		*data = b->data;
		*len = b->len;
	} else {
		e = TFS_ERR_NOMEM;
	}
	pthread_mutex_unlock(&w->blob_lock);
	return e;
}

void tfs_tree_free(struct tfs_tree *t)
{
	if (!t)
		return;
	free(t->nodes);
	free(t->children);
	free(t->fnames);
	free(t->slots);
	for (uint32_t i = 0; i < t->nblobs; i++)
		free(t->blobs[i].data);
	if (t->m)
		pthread_mutex_destroy(&t->blob_lock);
	if (t->listing)
		tfs_view_of_kind(TFS_NODE_TABLE)->state_free(t->listing);
	if (t->exports)
		tfs_view_of_kind(TFS_NODE_EXPORT)->state_free(t->exports);
	tfs_originals_free(t->originals);
	if (t->sums)
		tfs_view_of_kind(TFS_NODE_SUMS)->state_free(t->sums);
	tfs_digests_free(t->digests);
	for (unsigned k = 0; k < TFS_NODE_KINDS; k++)
		if (t->vstate[k])
			tfs_view_of_kind(k)->state_free(t->vstate[k]);
	memset(t, 0, sizeof *t);
}

tfs_err tfs_tree_node_new(struct build *b, uint32_t *out)
{
	struct tfs_tree *t = b->t;
	if (t->nnodes == UINT32_MAX)
		return TFS_ERR_NOMEM;
	if (t->nnodes >= b->cap) {
		size_t nc = b->cap ? b->cap * 2 : 1024;
		struct tfs_node *n = realloc(t->nodes, nc * sizeof *n);
		if (n)
			t->nodes = n;
		const char **r = realloc(b->raw, nc * sizeof *r);
		if (r)
			b->raw = r;
		uint32_t *rl = realloc(b->raw_len, nc * sizeof *rl);
		if (rl)
			b->raw_len = rl;
		uint8_t *c = realloc(b->conflict, nc);
		if (c)
			b->conflict = c;
		if (!n || !r || !rl || !c)
			return TFS_ERR_NOMEM;
		b->cap = nc;
	}
	uint32_t i = t->nnodes++;
	memset(&t->nodes[i], 0, sizeof t->nodes[i]);
	b->raw[i] = "";
	b->raw_len[i] = 0;
	b->conflict[i] = 0;
	*out = i;
	return TFS_OK;
}

static uint32_t *dir_slot(struct build *b, uint32_t parent, const char *raw, size_t len)
{
	size_t j = key_hash(parent, raw, len) & (b->ndslots - 1);
	while (b->dslots[j]) {
		uint32_t d = b->dslots[j];
		if (b->t->nodes[d].parent == parent && b->raw_len[d] == len &&
		    memcmp(b->raw[d], raw, len) == 0)
			break;
		j = (j + 1) & (b->ndslots - 1);
	}
	return &b->dslots[j];
}

static tfs_err dir_get(struct build *b, uint32_t parent, const char *raw, size_t len, uint32_t *out)
{
	if ((b->ndirs + 1) * 2 > b->ndslots) {
		size_t ns = b->ndslots ? b->ndslots * 2 : 1024;
		uint32_t *old = b->dslots;
		size_t olds = b->ndslots;
		b->dslots = calloc(ns, sizeof *b->dslots);
		if (!b->dslots) {
			b->dslots = old;
			return TFS_ERR_NOMEM;
		}
		b->ndslots = ns;
		for (size_t k = 0; k < olds; k++)
			if (old[k]) {
				uint32_t d = old[k];
				*dir_slot(b, b->t->nodes[d].parent, b->raw[d], b->raw_len[d]) = d;
			}
		free(old);
	}
	uint32_t *slot = dir_slot(b, parent, raw, len);
	if (*slot) {
		*out = *slot;
		return TFS_OK;
	}
	uint32_t d;
	tfs_err e = tfs_tree_node_new(b, &d);
	if (e)
		return e;
	b->t->nodes[d].kind = TFS_NODE_DIR;
	b->t->nodes[d].parent = parent;
	b->raw[d] = raw;
	b->raw_len[d] = (uint32_t)len;
	*slot = d;
	b->ndirs++;
	*out = d;
	return TFS_OK;
}

/* data == NULL: made by tfs_tree_blob when first used. */
static tfs_err add_blob(struct build *b, const char *name, char *data, size_t len)
{
	struct tfs_tree *t = b->t;
	uint32_t i;
	tfs_err e = tfs_tree_node_new(b, &i);
	if (e) {
		free(data);
		return e;
	}
	t->nodes[i].kind = TFS_NODE_BLOB;
	t->nodes[i].parent = 1;
	t->nodes[i].fname = name;
	t->nodes[i].fname_len = (uint32_t)strlen(name);
	t->nodes[i].ref = t->nblobs;
	t->blobs[t->nblobs].data = data;
	t->blobs[t->nblobs].ready = data != NULL;
	t->blobs[t->nblobs++].len = len;
	t->total_bytes += len;
	return TFS_OK;
}

static void free_build(struct build *b)
{
	free(b->raw);
	free(b->raw_len);
	free(b->conflict);
	free(b->dslots);
	free(b->late);
	free(b->foff);
}

/* The root, and the synthetic files of the root. */
static tfs_err build_start(struct build *b)
{
	struct tfs_tree *t = b->t;
	const struct tfs_model *m = b->m;
	/* Room for every tensor and the synthetic files at once: growing a
	 * half-million-node table by doubling costs more than the rest. */
	if (m->ntensors + 8 < UINT32_MAX) {
		size_t want = (size_t)m->ntensors + 8;
		t->nodes = tfs_malloc_big(want * sizeof *t->nodes);
		b->raw = tfs_malloc_big(want * sizeof *b->raw);
		b->raw_len = tfs_malloc_big(want * sizeof *b->raw_len);
		b->conflict = malloc(want);
		if (!t->nodes || !b->raw || !b->raw_len || !b->conflict)
			return TFS_ERR_NOMEM;
		b->cap = want;
	}
	/* Node 0 is never used: inode 0 means nothing to FUSE. */
	if (tfs_tree_node_new(b, &b->root) || tfs_tree_node_new(b, &b->root))
		return TFS_ERR_NOMEM;
	t->nodes[b->root].kind = TFS_NODE_DIR;
	t->nodes[b->root].parent = b->root;
	t->nodes[b->root].fname = "";
	if (add_blob(b, TFS_META_NAME, NULL, 0))
		return TFS_ERR_NOMEM;
	if (m->index_json) {
		char *copy = malloc(m->index_len + 1);
		if (!copy)
			return TFS_ERR_NOMEM;
		memcpy(copy, m->index_json, m->index_len + 1);
		if (add_blob(b, TFS_INDEX_NAME, copy, m->index_len))
			return TFS_ERR_NOMEM;
	}
	b->first_user = t->nnodes;
	return TFS_OK;
}

/* Every tensor's node, under its directories in the tree layout. */
static tfs_err add_tensors(struct build *b)
{
	struct tfs_tree *t = b->t;
	const struct tfs_model *m = b->m;
	const unsigned view = b->o->view;
	for (uint32_t s = 0; s < m->nshards; s++) {
		const struct tfs_table *h = &m->shards[s].h;
		for (uint32_t i = 0; i < h->n; i++) {
			const struct tfs_tensor *ts = &h->t[i];
			const char *name = tfs_tensor_name(h, ts);
			uint32_t parent = b->root, ni;
			size_t start = 0;
			if (b->o->layout == TFS_LAYOUT_TREE) {
				for (size_t k = 0; k < ts->name_len; k++) {
					if (name[k] != '.')
						continue;
					if (dir_get(b, parent, name + start, k - start, &parent))
						return TFS_ERR_NOMEM;
					start = k + 1;
				}
			}
			if (tfs_tree_node_new(b, &ni))
				return TFS_ERR_NOMEM;
			t->nodes[ni].kind = TFS_NODE_TENSOR;
			t->nodes[ni].parent = parent;
			t->nodes[ni].shard = s;
			t->nodes[ni].ref = i;
			b->raw[ni] = name + start;
			b->raw_len[ni] = (uint32_t)(ts->name_len - start);
			if (view & TFS_VIEW_NPY) {
				char hb[4096], *hp = hb;
				size_t need = tfs_npy_header_max(ts);
				if (need > sizeof hb && !(hp = malloc(need)))
					return TFS_ERR_NOMEM;
				t->nodes[ni].first =
					(uint32_t)tfs_npy_header(h, ts, view & TFS_VIEW_F32, hp, need);
				if (hp != hb)
					free(hp);
			}
			t->total_bytes += tfs_node_size(t, &t->nodes[ni]);
		}
	}
	/* A tensor whose name a directory also has ("a.b" beside "a.b.c"). */
	if (b->ndirs) {
		for (uint32_t i = b->first_user; i < t->nnodes; i++)
			if (t->nodes[i].kind == TFS_NODE_TENSOR &&
			    *dir_slot(b, t->nodes[i].parent, b->raw[i], b->raw_len[i]))
				b->conflict[i] = 1;
	}
	return TFS_OK;
}

/* A file of `kind` for every directory: its table (in it), or its
 * generated file (beside it; the root's in the root). Named later, once
 * the directories have their names. */
static tfs_err add_per_dir(struct build *b, uint8_t kind, uint32_t *count, void **state)
{
	struct tfs_tree *t = b->t;
	uint32_t nn = t->nnodes;
	for (uint32_t i = 1; i < nn; i++) {
		uint32_t ni;
		if (t->nodes[i].kind != TFS_NODE_DIR)
			continue;
		if (tfs_tree_node_new(b, &ni))
			return TFS_ERR_NOMEM;
		struct tfs_node *n = &t->nodes[ni];
		n->kind = kind;
		n->ref = (*count)++;
		if (kind == TFS_NODE_TABLE) {
			n->parent = i;
			n->fname = TFS_TABLE_NAME;
			n->fname_len = (uint32_t)strlen(TFS_TABLE_NAME);
		} else {
			n->parent = i == b->root ? b->root : t->nodes[i].parent;
			n->first = i;
		}
	}
	return (*state = tfs_view_of_kind(kind)->state_new(*count)) ? TFS_OK : TFS_ERR_NOMEM;
}

/* -o sums: a manifest in every directory that holds tensor files (one
 * pass marks them: the children are not linked yet). */
static tfs_err add_sums(struct build *b)
{
	struct tfs_tree *t = b->t;
	uint32_t nn = t->nnodes;
	uint8_t *has = calloc(nn, 1);
	if (!has)
		return TFS_ERR_NOMEM;
	for (uint32_t i = 1; i < nn; i++)
		if (t->nodes[i].kind == TFS_NODE_TENSOR)
			has[t->nodes[i].parent] = 1;
	tfs_err e = TFS_OK;
	for (uint32_t i = 1; !e && i < nn; i++) {
		uint32_t ni;
		if (!has[i])
			continue;
		if (tfs_tree_node_new(b, &ni)) {
			e = TFS_ERR_NOMEM;
			break;
		}
		struct tfs_node *n = &t->nodes[ni];
		n->kind = TFS_NODE_SUMS;
		n->ref = t->nsums++;
		n->parent = i;
		n->first = i;
		n->fname = TFS_SUMS_NAME;
		n->fname_len = (uint32_t)strlen(TFS_SUMS_NAME);
	}
	free(has);
	if (!e && !(t->sums = tfs_view_of_kind(TFS_NODE_SUMS)->state_new(t->nsums)))
		e = TFS_ERR_NOMEM;
	return e;
}

/* The views with a file beside every tensor's (stats, pictures), named
 * once the tensors are (tfs_tree_name_beside). */
static tfs_err add_beside(struct build *b)
{
	struct tfs_tree *t = b->t;
	uint32_t nn = t->nnodes;
	for (unsigned k = 0; k < TFS_NODE_KINDS; k++) {
		const struct tfs_view_ops *v = tfs_view_of_kind(k);
		if (!v || !v->beside || !v->wanted(b->o))
			continue;
		b->beside[b->nbeside++] = v->beside;
		uint32_t slots = 0;
		for (uint32_t i = 1; i < nn; i++) {
			uint32_t ni;
			if (t->nodes[i].kind != TFS_NODE_TENSOR)
				continue;
			if (tfs_tree_node_new(b, &ni))
				return TFS_ERR_NOMEM;
			struct tfs_node *n = &t->nodes[ni];
			n->kind = (uint8_t)k;
			n->ref = slots++;
			n->parent = t->nodes[i].parent;
			n->first = i;
		}
		if (!(t->vstate[k] = v->state_new(slots)))
			return TFS_ERR_NOMEM;
	}
	return TFS_OK;
}

/* The source's own files, in a directory of the root whose name no
 * tensor's file can have (the mapping's rule 3); after the tables and
 * exports, which it has none of. */
static tfs_err add_originals(struct build *b, struct tfs_diag *d)
{
	struct tfs_tree *t = b->t;
	tfs_err e = tfs_originals_new(b->m, &t->originals, d);
	if (e)
		return e;
	uint32_t di;
	if (tfs_tree_node_new(b, &di))
		return tfs_fail(d, TFS_ERR_NOMEM, "out of memory building the file table");
	t->nodes[di].kind = TFS_NODE_DIR;
	t->nodes[di].parent = b->root;
	t->nodes[di].fname = TFS_ORIGINALS_DIR;
	t->nodes[di].fname_len = (uint32_t)strlen(TFS_ORIGINALS_DIR);
	for (uint32_t k = 0; k < tfs_originals_count(t->originals); k++) {
		uint32_t ni;
		size_t nl;
		if (tfs_tree_node_new(b, &ni))
			return tfs_fail(d, TFS_ERR_NOMEM, "out of memory building the file table");
		t->nodes[ni].kind = TFS_NODE_ORIGINAL;
		t->nodes[ni].parent = di;
		t->nodes[ni].ref = k;
		/* (plain names only: tfs_originals keeps no other) */
		t->nodes[ni].fname = tfs_originals_name(t->originals, k, &nl);
		t->nodes[ni].fname_len = (uint32_t)nl;
	}
	return TFS_OK;
}

struct tfs_tree_add {
	struct build *b;
	uint8_t kind;
};

tfs_err tfs_tree_add_node(struct tfs_tree_add *a, uint32_t parent, const char *name, int dir, uint32_t ref,
			  uint32_t *out)
{
	uint32_t ni;
	if (tfs_tree_node_new(a->b, &ni))
		return TFS_ERR_NOMEM;
	struct tfs_node *n = &a->b->t->nodes[ni];
	n->kind = dir ? TFS_NODE_DIR : a->kind;
	n->parent = parent;
	n->ref = dir ? 0 : ref;
	n->fname = name;
	n->fname_len = (uint32_t)strlen(name);
	if (out)
		*out = ni;
	return TFS_OK;
}

/* The files of the views that add their own. */
static tfs_err add_views(struct build *b, struct tfs_diag *d)
{
	tfs_err e = TFS_OK;
	for (unsigned k = 0; !e && k < TFS_NODE_KINDS; k++) {
		const struct tfs_view_ops *v = tfs_view_of_kind(k);
		if (!v || !v->add)
			continue;
		struct tfs_tree_add a = {b, (uint8_t)k};
		if (!(b->t->vstate[k] = v->state_new(0)))
			return TFS_ERR_NOMEM;
		e = v->add(b->m, b->o, b->t->vstate[k], &a, d);
	}
	return e;
}

/* Children, in creation order, the synthetic files first in every
 * directory; and each directory's number of subdirectories. */
static tfs_err link_children(struct build *b)
{
	struct tfs_tree *t = b->t;
	t->children = tfs_malloc_big(((size_t)t->nnodes + 1) * sizeof *t->children);
	if (!t->children)
		return TFS_ERR_NOMEM;
	for (uint32_t i = 2; i < t->nnodes; i++) {
		struct tfs_node *p = &t->nodes[t->nodes[i].parent];
		p->count++;
		if (t->nodes[i].kind == TFS_NODE_DIR)
			p->ref++;
	}
	uint32_t at = 0;
	for (uint32_t i = 1; i < t->nnodes; i++) {
		if (t->nodes[i].kind != TFS_NODE_DIR)
			continue;
		t->nodes[i].first = at;
		at += t->nodes[i].count;
		t->nodes[i].count = 0;
	}
	for (int pass = 0; pass < 2; pass++) {
		for (uint32_t i = 2; i < t->nnodes; i++) {
			int synthetic =
				t->nodes[i].kind == TFS_NODE_BLOB || t->nodes[i].kind == TFS_NODE_TABLE ||
				t->nodes[i].kind == TFS_NODE_EXPORT || t->nodes[i].kind == TFS_NODE_SUMS;
			if (synthetic != (pass == 0))
				continue;
			struct tfs_node *p = &t->nodes[t->nodes[i].parent];
			t->children[p->first + p->count++] = i;
		}
	}
	return TFS_OK;
}

tfs_err tfs_tree_build(const struct tfs_model *m, const struct tfs_tree_opts *o, struct tfs_tree *t,
		       struct tfs_diag *d)
{
	struct build b;
	memset(t, 0, sizeof *t);
	memset(&b, 0, sizeof b);
	b.t = t;
	b.m = m;
	b.o = o;
	b.npy_len = (o->view & TFS_VIEW_NPY) ? strlen(TFS_NPY_SUFFIX) : 0;
	t->m = m;
	pthread_mutex_init(&t->blob_lock, NULL);
	t->view = o->view;
	memset(d, 0, sizeof *d);
	tfs_err e = build_start(&b);
	if (!e)
		e = add_tensors(&b);
	void *state = NULL;
	if (!e && o->tables) {
		e = add_per_dir(&b, TFS_NODE_TABLE, &t->ntables, &state);
		t->listing = state;
	}
	if (!e && o->export) {
		state = NULL;
		e = add_per_dir(&b, TFS_NODE_EXPORT, &t->nexports, &state);
		t->exports = state;
	}
	if (!e && o->sums)
		e = add_sums(&b);
	if (!e)
		e = add_beside(&b);
	if (!e && o->originals)
		e = add_originals(&b, d);
	if (!e)
		e = add_views(&b, d);
	if (!e)
		e = tfs_tree_name_files(&b);
	if (!e)
		e = link_children(&b);
	if (!e)
		e = tfs_tree_index_names(&b, d);
	if (!e)
		e = tfs_tree_name_beside(&b, d);
	if (!e && !(t->digests = tfs_digests_new(t->nnodes)))
		e = TFS_ERR_NOMEM;
	free_build(&b);
	if (e) {
		/* The steps say what went wrong, but for memory. */
		if (!d->msg[0])
			tfs_fail(d, e, "out of memory building the file table");
		tfs_tree_free(t);
	}
	return e;
}

int tfs_node_converted(const struct tfs_tree *t, const struct tfs_node *n)
{
	return (t->view & TFS_VIEW_F32) && tfs_converts(tfs_node_tensor(t, n)->dtype);
}

const char *tfs_node_dtype(const struct tfs_tree *t, const struct tfs_node *n, size_t *len)
{
	if (tfs_node_converted(t, n)) {
		*len = 3;
		return "F32";
	}
	return tfs_tensor_dtype(&t->m->shards[n->shard].h, tfs_node_tensor(t, n), len);
}

size_t tfs_node_shape_max(const struct tfs_tree *t, const struct tfs_node *n)
{
	/* 20 digits and a comma per dimension, and the brackets. */
	return 2 + (size_t)tfs_node_tensor(t, n)->ndim * 21;
}

size_t tfs_node_shape(const struct tfs_tree *t, const struct tfs_node *n, char *out)
{
	const struct tfs_table *h = &t->m->shards[n->shard].h;
	const struct tfs_tensor *ts = tfs_node_tensor(t, n);
	size_t o = 0;
	char num[24];
	out[o++] = '[';
	for (uint32_t i = 0; i < ts->ndim; i++) {
		int k = snprintf(num, sizeof num, "%s%llu", i ? "," : "",
				 (unsigned long long)h->dims[ts->dims_off + i]);
		memcpy(out + o, num, (size_t)k);
		o += (size_t)k;
	}
	out[o++] = ']';
	return o;
}

size_t tfs_node_offsets(const struct tfs_tree *t, const struct tfs_node *n, char *out)
{
	const struct tfs_tensor *ts = tfs_node_tensor(t, n);
	return (size_t)snprintf(out, TFS_OFFSETS_MAX, "[%llu,%llu]", (unsigned long long)ts->begin,
				(unsigned long long)ts->end);
}
