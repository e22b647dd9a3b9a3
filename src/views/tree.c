/* The inode tree (views/tree.h): the layout's directories and the tensors'
 * files, then every wanted view's files, in registry order. */
#include "views/tree.h"
#include "views/view.h"
#include "views/tree_i.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "compute/hashes.h"
#include "core/mem.h"

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

int tfs_tree_generates(const struct tfs_tree *t)
{
	for (unsigned k = 0; k < tfs_nviews && k < TFS_VIEWS_MAX; k++)
		if (t->vstate[k] && (tfs_views[k]->flags & TFS_VIEWF_GENERATED))
			return 1;
	return 0;
}

void tfs_tree_free(struct tfs_tree *t)
{
	if (!t)
		return;
	free(t->nodes);
	free(t->children);
	free(t->fnames);
	free(t->slots);
	tfs_digests_free(t->digests);
	for (unsigned k = 0; k < TFS_VIEWS_MAX; k++)
		if (t->vstate[k])
			tfs_view_of_kind(k)->state_free(t->vstate[k]);
	memset(t, 0, sizeof *t);
}

static tfs_err node_new(struct build *b, uint32_t *out)
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
		uint8_t *f = realloc(b->flags, nc);
		if (f)
			b->flags = f;
		if (!n || !r || !rl || !f)
			return TFS_ERR_NOMEM;
		b->cap = nc;
	}
	uint32_t i = t->nnodes++;
	memset(&t->nodes[i], 0, sizeof t->nodes[i]);
	b->raw[i] = "";
	b->raw_len[i] = 0;
	b->flags[i] = 0;
	*out = i;
	return TFS_OK;
}

static uint32_t *dir_slot(struct build *b, uint32_t parent, const char *raw, size_t len)
{
	size_t j = tfs_tree_key_hash(parent, raw, len) & (b->ndslots - 1);
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
	tfs_err e = node_new(b, &d);
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

static void free_build(struct build *b)
{
	free(b->raw);
	free(b->raw_len);
	free(b->flags);
	free(b->dslots);
	free(b->late);
	free(b->foff);
	free(b->holds);
}

/* ---- what the views add their files with (views/tree.h) ---- */

struct tfs_tree_add {
	struct build *b;
	uint8_t kind;
};

void *tfs_dir_files_new(size_t state_size, size_t slot_size)
{
	struct tfs_dir_files *f = calloc(1, state_size);
	if (f) {
		pthread_mutex_init(&f->lock, NULL);
		f->size = slot_size;
	}
	return f;
}

void tfs_dir_files_free(struct tfs_dir_files *f, void (*each)(void *slot))
{
	for (uint32_t i = 0; each && i < f->n; i++)
		each(tfs_dir_file(f, i));
	free(f->slots);
	pthread_mutex_destroy(&f->lock);
	free(f);
}

tfs_err tfs_dir_files_add(struct tfs_dir_files *f, struct tfs_tree_add *a, uint32_t dir, const char *name,
			  void **slot)
{
	if (tfs_grow(&f->slots, &f->cap, (size_t)f->n + 1, f->size))
		return TFS_ERR_NOMEM;
	memset(tfs_dir_file(f, f->n), 0, f->size);
	if (slot)
		*slot = tfs_dir_file(f, f->n);
	return tfs_tree_add_node(a, dir, name, 0, f->n++, NULL);
}

tfs_err tfs_tree_add_node(struct tfs_tree_add *a, uint32_t parent, const char *name, int dir, uint32_t ref,
			  uint32_t *out)
{
	uint32_t ni;
	if (node_new(a->b, &ni))
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

tfs_err tfs_tree_add_after(struct tfs_tree_add *a, uint32_t parent, uint32_t of, uint32_t ref, uint32_t *out)
{
	uint32_t ni;
	if (node_new(a->b, &ni))
		return TFS_ERR_NOMEM;
	struct tfs_node *n = &a->b->t->nodes[ni];
	n->kind = a->kind;
	n->parent = parent;
	n->ref = ref;
	n->first = of;
	if (out)
		*out = ni;
	return TFS_OK;
}

tfs_err tfs_tree_generate(struct tfs_tree_add *a, uint32_t dir, uint32_t ref, uint32_t count)
{
	struct tfs_tree *t = a->b->t;
	if (dir >= t->nnodes || t->nodes[dir].kind != TFS_NODE_DIR || dir == TFS_TREE_ROOT)
		return TFS_ERR_INVAL;
	if (count > TFS_TREE_GENERATED_MAX)
		return TFS_ERR_TOOBIG;
	struct tfs_node *d = &t->nodes[dir];
	d->gen = a->kind;
	d->ref = ref;
	d->shard = count;
	t->generated += count;
	return TFS_OK;
}

const struct tfs_node *tfs_tree_node(const struct tfs_tree *t, uint64_t ino, struct tfs_node *tmp)
{
	if (ino < t->nnodes)
		return ino ? &t->nodes[ino] : NULL;
	uint64_t dir = ino >> 32, i = ino & UINT32_MAX;
	if (dir >= t->nnodes || !t->nodes[dir].gen || i >= t->nodes[dir].shard)
		return NULL;
	*tmp = (struct tfs_node){
		.fname = "",
		.parent = (uint32_t)dir,
		.ref = (uint32_t)i,
		.first = t->nodes[dir].ref,
		.kind = t->nodes[dir].gen,
	};
	return tmp;
}

void tfs_tree_add_bytes(struct tfs_tree_add *a, uint64_t bytes)
{
	a->b->t->total_bytes += bytes;
}

const struct tfs_tree *tfs_tree_add_tree(const struct tfs_tree_add *a)
{
	return a->b->t;
}

const struct tfs_tree_opts *tfs_tree_add_opts(const struct tfs_tree_add *a)
{
	return a->b->o;
}

int tfs_tree_add_holds_tensors(const struct tfs_tree_add *a, uint32_t dir)
{
	struct build *b = a->b;
	const struct tfs_tree *t = b->t;
	if (!b->holds) {
		/* One pass marks them all (the children are not linked yet). */
		if (!(b->holds = calloc(b->layout_end, 1)))
			return 0; /* (the next allocation fails the build) */
		for (uint32_t i = b->first_user; i < b->layout_end; i++)
			if (t->nodes[i].kind == TFS_NODE_TENSOR)
				b->holds[t->nodes[i].parent] = 1;
	}
	return dir < b->layout_end && b->holds[dir];
}

/* ---- building ---- */

static int view_wanted(const struct build *b, unsigned k)
{
	const struct tfs_view_ops *v = tfs_view_of_kind(k);
	return v && (!v->wanted || v->wanted(b->o));
}

/* View k's state and what it says of names. */
static tfs_err view_start(struct build *b, unsigned k)
{
	const struct tfs_view_ops *v = tfs_view_of_kind(k);
	struct tfs_tree *t = b->t;
	if (v->state_new && !(t->vstate[k] = v->state_new(b->m, b->o)))
		return TFS_ERR_NOMEM;
	const char *const *r = v->reserves ? v->reserves(b->o) : NULL;
	for (; r && *r; r++)
		if (b->nreserved < sizeof b->reserved / sizeof *b->reserved)
			b->reserved[b->nreserved++] = *r;
	if (v->beside)
		b->beside[b->nbeside++] = v->beside;
	return TFS_OK;
}

/* The root, and the files of the views that come before the tensors. */
static tfs_err build_start(struct build *b, struct tfs_diag *d)
{
	struct tfs_tree *t = b->t;
	const struct tfs_model *m = b->m;
	/* Room for every tensor and the first files at once: growing a
	 * half-million-node table by doubling costs more than the rest. */
	if (m->ntensors + 8 < UINT32_MAX) {
		size_t want = (size_t)m->ntensors + 8;
		t->nodes = tfs_malloc_big(want * sizeof *t->nodes);
		b->raw = tfs_malloc_big(want * sizeof *b->raw);
		b->raw_len = tfs_malloc_big(want * sizeof *b->raw_len);
		b->flags = malloc(want);
		if (!t->nodes || !b->raw || !b->raw_len || !b->flags)
			return TFS_ERR_NOMEM;
		b->cap = want;
	}
	/* Node 0 is never used: inode 0 means nothing to FUSE. */
	if (node_new(b, &b->root) || node_new(b, &b->root))
		return TFS_ERR_NOMEM;
	t->nodes[b->root].kind = TFS_NODE_DIR;
	t->nodes[b->root].parent = b->root;
	t->nodes[b->root].fname = "";
	for (unsigned k = 0; k < tfs_nviews; k++) {
		const struct tfs_view_ops *v = tfs_view_of_kind(k);
		if (!v || !(v->flags & TFS_VIEWF_FIRST) || !view_wanted(b, k))
			continue;
		struct tfs_tree_add a = {b, (uint8_t)k};
		tfs_err e = view_start(b, k);
		if (!e && v->at_root)
			e = v->at_root(&a, t->vstate[k], d);
		if (e)
			return e;
	}
	b->first_user = t->nnodes;
	return TFS_OK;
}

/* Every tensor's node, under its directories in the tree layout, shown
 * by the tensors' view. */
static tfs_err add_tensors(struct build *b)
{
	struct tfs_tree *t = b->t;
	const struct tfs_model *m = b->m;
	tfs_err e = view_start(b, TFS_NODE_TENSOR);
	if (e)
		return e;
	t->form = tfs_tree_form(b->o->opts);
	b->suffix = (t->form & TFS_FORM_NPY) ? TFS_NPY_SUFFIX : "";
	b->suffix_len = strlen(b->suffix);
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
			if (node_new(b, &ni))
				return TFS_ERR_NOMEM;
			t->nodes[ni].kind = TFS_NODE_TENSOR;
			t->nodes[ni].parent = parent;
			t->nodes[ni].shard = s;
			t->nodes[ni].ref = i;
			b->raw[ni] = name + start;
			b->raw_len[ni] = (uint32_t)(ts->name_len - start);
			if ((e = tfs_tree_npy_len(t->form, h, ts, &t->nodes[ni].first)))
				return e;
			t->total_bytes += tfs_node_size(t, &t->nodes[ni]);
		}
	}
	/* A tensor whose name a directory also has ("a.b" beside "a.b.c"). */
	if (b->ndirs) {
		for (uint32_t i = b->first_user; i < t->nnodes; i++)
			if (t->nodes[i].kind == TFS_NODE_TENSOR &&
			    *dir_slot(b, t->nodes[i].parent, b->raw[i], b->raw_len[i]))
				b->flags[i] |= NODE_CONFLICT;
	}
	b->layout_end = t->nnodes;
	return TFS_OK;
}

/* A wanted view's files: at the root, per directory of the layout, and
 * beside each tensor's file. */
static tfs_err add_view(struct build *b, unsigned k, struct tfs_diag *d)
{
	struct tfs_tree *t = b->t;
	const struct tfs_view_ops *v = tfs_view_of_kind(k);
	struct tfs_tree_add a = {b, (uint8_t)k};
	tfs_err e = view_start(b, k);
	if (e)
		return e;
	void *state = t->vstate[k];
	if (v->at_root && (e = v->at_root(&a, state, d)))
		return e;
	for (uint32_t i = 1; v->per_dir && i < b->layout_end; i++)
		if (t->nodes[i].kind == TFS_NODE_DIR && (e = v->per_dir(&a, state, i)))
			return e;
	uint32_t slot = 0;
	for (uint32_t i = b->first_user; v->beside && i < b->layout_end; i++) {
		uint32_t ni;
		if (t->nodes[i].kind != TFS_NODE_TENSOR)
			continue;
		if (node_new(b, &ni))
			return TFS_ERR_NOMEM;
		struct tfs_node *n = &t->nodes[ni];
		n->kind = (uint8_t)k;
		n->ref = slot++;
		n->parent = t->nodes[i].parent;
		n->first = i;
	}
	return TFS_OK;
}

/* Children, in creation order, the files of views that lead their
 * directory first; and each directory's number of subdirectories. A
 * generated directory has its entries, and nothing else. */
static tfs_err link_children(struct build *b, struct tfs_diag *d)
{
	struct tfs_tree *t = b->t;
	t->children = tfs_malloc_big(((size_t)t->nnodes + 1) * sizeof *t->children);
	if (!t->children)
		return TFS_ERR_NOMEM;
	for (uint32_t i = 2; i < t->nnodes; i++) {
		struct tfs_node *p = &t->nodes[t->nodes[i].parent];
		if (p->gen)
			return tfs_fail(d, TFS_ERR_FORMAT,
					"a node under a generated directory (a bug in tensorfs)");
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
			const struct tfs_view_ops *v = tfs_view_of_kind(t->nodes[i].kind);
			int lead = v && (v->flags & TFS_VIEWF_LEAD);
			if (lead != (pass == 0))
				continue;
			struct tfs_node *p = &t->nodes[t->nodes[i].parent];
			t->children[p->first + p->count++] = i;
		}
	}
	return TFS_OK;
}

size_t tfs_tree_dir_room(void)
{
	size_t room = 0;
	for (unsigned k = 0; k < tfs_nviews; k++)
		if (tfs_views[k] && tfs_views[k]->dir_room > room)
			room = tfs_views[k]->dir_room;
	return room;
}

static tfs_err build_steps(struct build *b, struct tfs_diag *d)
{
	tfs_err e = build_start(b, d);
	if (!e)
		e = add_tensors(b);
	for (unsigned k = TFS_NODE_TENSOR + 1; !e && k < tfs_nviews; k++)
		if (!(tfs_views[k]->flags & TFS_VIEWF_FIRST) && view_wanted(b, k))
			e = add_view(b, k, d);
	if (!e)
		e = tfs_tree_name_files(b);
	if (!e)
		e = link_children(b, d);
	if (!e)
		e = tfs_tree_index_names(b, d);
	if (!e)
		e = tfs_tree_name_beside(b, d);
	/* The hashes are kept by node: made once the nodes are all there. */
	if (!e && !(b->t->digests = tfs_digests_new(b->t->nnodes)))
		e = TFS_ERR_NOMEM;
	return e;
}

tfs_err tfs_tree_build(const struct tfs_model *m, const struct tfs_tree_opts *o, struct tfs_tree *t,
		       struct tfs_diag *d)
{
	struct build b;
	memset(t, 0, sizeof *t);
	memset(&b, 0, sizeof b);
	memset(d, 0, sizeof *d);
	b.t = t;
	b.m = m;
	b.o = o;
	b.dir_room = tfs_tree_dir_room();
	t->m = m;
	tfs_err e = tfs_nviews <= TFS_VIEWS_MAX ? build_steps(&b, d) : TFS_ERR_NOMEM;
	free_build(&b);
	if (e) {
		/* The steps say what went wrong, but for memory. */
		if (!d->msg[0])
			tfs_fail(d, e, "out of memory building the file table");
		tfs_tree_free(t);
	}
	return e;
}
