#include "views/export.h"

#include <json-c/json.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "compute/convert.h"
#include "compute/ggufwrite.h"
#include "compute/stwrite.h"
#include "core/dtype.h"
#include "core/format.h"
#include "core/hash.h"
#include "core/jscan.h"
#include "core/json.h"
#include "core/mem.h"
#include "views/tree.h"
#include "views/view.h"

/* D.safetensors beside every directory D, and the root's; a root
 * directory that would take the root's name ("model", as in
 * model.layers.0...) gets the longer suffix instead. */
#define SUFFIX ".safetensors"
#define ROOT_NAME "model.safetensors"
#define CLASH_SUFFIX ".dir.safetensors"

/* A file's header and tensor order, as made. */
struct built {
	uint32_t slot;
	uint32_t n;      /* tensors */
	uint32_t *order; /* tensor nodes in file order */
	uint64_t *start; /* file offset of each one's data; [n]: the size */
	char *hdr;       /* the 8-byte length and the header */
	size_t hdr_len;
	size_t bytes;              /* memory held, for the budget */
	int refs;                  /* reads using it now */
	struct built *prev, *next; /* most recently used first */
};

enum { UNKNOWN, READY, CANNOT };

struct slot {
	int state;
	tfs_err why; /* CANNOT: the reason */
	uint64_t size;
	struct built *b; /* NULL when not held */
};

struct tfs_exports {
	pthread_mutex_t lock;
	int meta_done;
	tfs_err meta_err;
	char *meta; /* "\"__metadata__\":{...}" or empty; build() adds the comma */
	size_t meta_len;
	size_t held, budget;
	struct built *head, *tail;
	uint32_t n;
	size_t cap;
	struct slot *slots;
};

static struct tfs_exports *exports_of(const struct tfs_tree *t, const struct tfs_node *n)
{
	return t->vstate[n->kind];
}

static struct tfs_exports *exports_new(void)
{
	struct tfs_exports *x = calloc(1, sizeof *x);
	if (!x)
		return NULL;
	pthread_mutex_init(&x->lock, NULL);
	x->budget = TFS_EXPORT_BUDGET;
	/* Tests make the cache small to see headers dropped and made again. */
	const char *mb = getenv("TENSORFS_EXPORT_BUDGET_MB");
	if (mb && *mb >= '0' && *mb <= '9' && strtoul(mb, NULL, 10) < 65536)
		x->budget = (size_t)strtoul(mb, NULL, 10) << 20;
	return x;
}

static void built_free(struct built *b)
{
	if (!b)
		return;
	free(b->order);
	free(b->start);
	free(b->hdr);
	free(b);
}

static void exports_free(struct tfs_exports *x)
{
	if (!x)
		return;
	for (struct built *b = x->head, *nx; b; b = nx) {
		nx = b->next;
		built_free(b);
	}
	free(x->slots);
	free(x->meta);
	pthread_mutex_destroy(&x->lock);
	free(x);
}

/* The dtype the export writes: the view's (F32 when converted). */
static unsigned export_dtype(const struct tfs_tree *t, const struct tfs_node *n)
{
	return tfs_node_converted(t, n) ? TFS_DT_F32 : tfs_node_tensor(t, n)->dtype;
}

static uint64_t data_size(const struct tfs_tree *t, const struct tfs_node *n)
{
	return tfs_node_size(t, n) - n->first; /* without an NPY header */
}

/* The key safetensors keeps for its metadata: a tensor of that name
 * (an .npz, GGUF or pickle may hold one) cannot be in a generated file. */
static int reserved_name(const char *name, size_t len)
{
	return len == 12 && memcmp(name, "__metadata__", 12) == 0;
}

int tfs_export_includes(const struct tfs_tree *t, const struct tfs_node *n)
{
	const struct tfs_table *h = &t->m->shards[n->shard].h;
	const struct tfs_tensor *ts = tfs_node_tensor(t, n);
	const char *name = tfs_tensor_name(h, ts);
	return export_dtype(t, n) < TFS_DT_SAFETENSORS_END && !reserved_name(name, ts->name_len) &&
	       tfs_utf8_check((const unsigned char *)name, ts->name_len) == ts->name_len;
}

uint64_t tfs_export_left_out(const struct tfs_tree *t, char *first, size_t firstsz)
{
	uint64_t left = 0;
	for (uint32_t i = 2; i < t->nnodes; i++) {
		const struct tfs_node *n = &t->nodes[i];
		if (n->kind != TFS_NODE_TENSOR || tfs_export_includes(t, n))
			continue;
		if (!left++) {
			const struct tfs_table *h = &t->m->shards[n->shard].h;
			const struct tfs_tensor *ts = tfs_node_tensor(t, n);
			char q[120];
			size_t dl;
			const char *dt = tfs_node_dtype(t, n, &dl);
			tfs_quote(q, sizeof q, tfs_tensor_name(h, ts), ts->name_len);
			if (reserved_name(tfs_tensor_name(h, ts), ts->name_len))
				snprintf(first, firstsz, "%s: the name safetensors keeps for its metadata",
					 q);
			else if (export_dtype(t, n) < TFS_DT_SAFETENSORS_END)
				snprintf(first, firstsz, "%s: its name is not UTF-8", q);
			else
				snprintf(first, firstsz, "%s: dtype %.*s", q, (int)(dl < 24 ? dl : 24), dt);
		}
	}
	if (left > 1) {
		size_t l = strlen(first);
		snprintf(first + l, firstsz - l, ", and more");
	}
	return left;
}

/* ---- one file ---- */

/* The tensor nodes under directory `dir` that the export holds. */
static tfs_err members(const struct tfs_tree *t, uint32_t dir, uint32_t **out, uint32_t *count)
{
	uint32_t *stack = NULL, *list = NULL;
	size_t scap = 0, lcap = 0, sn = 0, ln = 0;
	tfs_err e = TFS_OK;
	if (tfs_grow((void **)&stack, &scap, 1, sizeof *stack))
		return TFS_ERR_NOMEM;
	stack[sn++] = dir;
	while (sn && !e) {
		const struct tfs_node *d = &t->nodes[stack[--sn]];
		for (uint32_t k = 0; k < d->count && !e; k++) {
			uint32_t ci = t->children[d->first + k];
			const struct tfs_node *c = &t->nodes[ci];
			if (c->kind == TFS_NODE_DIR) {
				if (!(e = tfs_grow((void **)&stack, &scap, sn + 1, sizeof *stack)))
					stack[sn++] = ci;
			} else if (c->kind == TFS_NODE_TENSOR && tfs_export_includes(t, c)) {
				if (!(e = tfs_grow((void **)&list, &lcap, ln + 1, sizeof *list)))
					list[ln++] = ci;
			}
		}
	}
	free(stack);
	if (e || ln > UINT32_MAX) {
		free(list);
		return TFS_ERR_NOMEM;
	}
	*out = list;
	*count = (uint32_t)ln;
	return TFS_OK;
}

static tfs_err build(const struct tfs_tree *t, struct tfs_exports *x, const struct tfs_node *en,
		     struct built **out)
{
	struct built *b = calloc(1, sizeof *b);
	struct tfs_st_entry *ent = NULL;
	size_t cap = 0;
	tfs_err e = b ? TFS_OK : TFS_ERR_NOMEM;
	if (!e)
		e = members(t, en->first, &b->order, &b->n);
	if (!e && !(ent = tfs_malloc_big(((size_t)b->n + 1) * sizeof *ent)))
		e = TFS_ERR_NOMEM;
	if (!e && !(b->start = tfs_malloc_big(((size_t)b->n + 1) * sizeof *b->start)))
		e = TFS_ERR_NOMEM;
	if (e)
		goto fail;
	for (uint32_t i = 0; i < b->n; i++) {
		const struct tfs_node *n = &t->nodes[b->order[i]];
		const struct tfs_table *tb = &t->m->shards[n->shard].h;
		const struct tfs_tensor *ts = tfs_node_tensor(t, n);
		ent[i] = (struct tfs_st_entry){tfs_tensor_name(tb, ts),
					       ts->name_len,
					       export_dtype(t, n),
					       tb->dims + ts->dims_off,
					       ts->ndim,
					       data_size(t, n),
					       b->order[i]};
	}
	e = tfs_st_header(ent, b->n, x->meta, x->meta_len, &b->hdr, &b->hdr_len, b->start);
	for (uint32_t i = 0; !e && i < b->n; i++)
		b->order[i] = ent[i].id;
	free(ent);
	if (e)
		goto fail;
	cap = b->hdr_len;
	b->slot = en->ref;
	b->bytes = cap + ((size_t)b->n + 1) * (sizeof *b->order + sizeof *b->start) + sizeof *b;
	*out = b;
	return TFS_OK;
fail:
	built_free(b);
	return e;
}

static void lru_unlink(struct tfs_exports *x, struct built *b)
{
	if (b->prev)
		b->prev->next = b->next;
	else
		x->head = b->next;
	if (b->next)
		b->next->prev = b->prev;
	else
		x->tail = b->prev;
	b->prev = b->next = NULL;
}

static void lru_front(struct tfs_exports *x, struct built *b)
{
	b->next = x->head;
	b->prev = NULL;
	if (x->head)
		x->head->prev = b;
	x->head = b;
	if (!x->tail)
		x->tail = b;
}

/* Drops the least recently used files not in use while over budget. */
static void trim(struct tfs_exports *x)
{
	struct built *b = x->tail;
	while (b && x->held > x->budget) {
		struct built *p = b->prev;
		if (!b->refs) {
			lru_unlink(x, b);
			x->slots[b->slot].b = NULL;
			x->held -= b->bytes;
			built_free(b);
		}
		b = p;
	}
}

/* Under x->lock: the file's header and order, made when not held. With
 * `pin`, held until unpin(). */
static tfs_err ready(const struct tfs_tree *t, const struct tfs_node *en, int pin, struct built **out)
{
	struct tfs_exports *x = exports_of(t, en);
	struct slot *s = &x->slots[en->ref];
	if (s->state == CANNOT)
		return s->why;
	if (!x->meta_done) {
		x->meta_err = tfs_st_meta(t->m, &x->meta, &x->meta_len);
		x->meta_done = 1;
	}
	if (x->meta_err)
		return x->meta_err;
	if (!s->b) {
		struct built *b;
		tfs_err e = build(t, x, en, &b);
		if (e) {
			if (e == TFS_ERR_FORMAT) {
				s->state = CANNOT;
				s->why = e;
				tfs_log("%s: export: the header would be over safetensors' 100,000,000-byte limit; reading this file fails (EIO)",
					en->fname);
			}
			return e;
		}
		s->b = b;
		s->size = b->start[b->n];
		s->state = READY;
		x->held += b->bytes;
		lru_front(x, b);
	} else {
		lru_unlink(x, s->b);
		lru_front(x, s->b);
	}
	if (pin)
		s->b->refs++;
	*out = s->b;
	trim(x);
	return TFS_OK;
}

uint64_t tfs_export_size(const struct tfs_tree *t, const struct tfs_node *n)
{
	struct tfs_exports *x = exports_of(t, n);
	struct slot *s = &x->slots[n->ref];
	struct built *b;
	uint64_t size = 0;
	pthread_mutex_lock(&x->lock);
	if (s->state == READY || ready(t, n, 0, &b) == TFS_OK)
		size = s->size;
	pthread_mutex_unlock(&x->lock);
	return size;
}

tfs_err tfs_export_check(const struct tfs_tree *t, const struct tfs_node *n)
{
	struct tfs_exports *x = exports_of(t, n);
	struct built *b;
	pthread_mutex_lock(&x->lock);
	tfs_err e = ready(t, n, 0, &b);
	pthread_mutex_unlock(&x->lock);
	return e;
}

tfs_err tfs_export_walk(const struct tfs_tree *t, const struct tfs_node *n, uint64_t off, size_t len,
			tfs_export_fn fn, void *ctx)
{
	struct tfs_exports *x = exports_of(t, n);
	struct built *b;
	pthread_mutex_lock(&x->lock);
	tfs_err e = ready(t, n, 1, &b);
	pthread_mutex_unlock(&x->lock);
	if (e)
		return e;
	uint64_t size = b->start[b->n];
	uint64_t end = off + len < size && off + len >= off ? off + len : size;
	struct tfs_export_piece p;
	if (off < b->hdr_len && off < end) {
		uint64_t stop = end < b->hdr_len ? end : b->hdr_len;
		p = (struct tfs_export_piece){b->hdr + off, 0, 0, (size_t)(stop - off)};
		e = fn(ctx, &p);
		off = stop;
	}
	if (!e && off < end) {
		/* The last tensor that starts at or before off. */
		uint32_t lo = 0, hi = b->n;
		while (hi - lo > 1) {
			uint32_t mid = lo + (hi - lo) / 2;
			if (b->start[mid] <= off)
				lo = mid;
			else
				hi = mid;
		}
		for (uint32_t i = lo; !e && i < b->n && off < end; i++) {
			uint64_t te = b->start[i + 1];
			if (te <= off)
				continue;
			uint64_t stop = end < te ? end : te;
			p = (struct tfs_export_piece){NULL, b->order[i], off - b->start[i],
						      (size_t)(stop - off)};
			e = fn(ctx, &p);
			off = stop;
		}
	}
	pthread_mutex_lock(&x->lock);
	b->refs--;
	trim(x);
	pthread_mutex_unlock(&x->lock);
	return e;
}

/* The view: a generated file's pieces are its header's bytes and, for each
 * tensor, the pieces of that tensor's own file (raw, or decoded where the
 * mount converts), so a range inside one tensor is spliced or mapped like
 * the tensor's file. */
static tfs_err piece_out(void *ctx, const struct tfs_export_piece *p)
{
	struct {
		const struct tfs_tree *t;
		struct tfs_pieces *out;
	} *c = ctx;
	if (p->mem) {
		/* Copied now: the header may leave its bounded cache as soon
		 * as the walk is over, before the reply is written. */
		char *to = tfs_pieces_room(c->out, p->len);
		if (!to)
			return TFS_ERR_NOMEM;
		memcpy(to, p->mem, p->len);
		return tfs_pieces_mem(c->out, to, p->len);
	}
	const struct tfs_node *tn = &c->t->nodes[p->node];
	return tfs_node_pieces(c->t, tn, tn->first + p->off, p->len, c->out);
}

static tfs_err export_pieces(const struct tfs_tree *t, const struct tfs_node *n, uint64_t off, size_t len,
			     struct tfs_pieces *out)
{
	struct {
		const struct tfs_tree *t;
		struct tfs_pieces *out;
	} c = {t, out};
	return tfs_export_walk(t, n, off, len, piece_out, &c);
}

static const struct tfs_opt_spec opts[] = {
	{"export", 0,
	 "model.safetensors of every tensor, and with\n"
	 "layout=tree D.safetensors beside every directory D;\n"
	 "for a GGUF model also model.gguf (all parts merged)",
	 NULL, 0},
	{"export_cache", 0,
	 "read generated files through the page cache even\n"
	 "where direct I/O could keep shared mmap",
	 NULL, 0},
	{NULL, 0, NULL, NULL, 0},
};

static tfs_err check(const struct tfs_opts *o, struct tfs_diag *d)
{
	if (tfs_opts_get(o, "export_cache") && !tfs_opts_get(o, "export"))
		return tfs_fail(d, TFS_ERR_INVAL, "-o export_cache goes with -o export");
	return TFS_OK;
}

static int wanted(const struct tfs_tree_opts *o)
{
	return tfs_opts_get(o->opts, "export") != NULL;
}

/* -o export_cache: every generated file through the page cache. */
static int keep_pages(const struct tfs_opts *o)
{
	return tfs_opts_get(o, "export_cache") != NULL;
}

/* model.safetensors takes a root tensor's name only in the flat layout:
 * in the tree layout a tensor of that name is model/safetensors. */
static const char *const *reserves(const struct tfs_tree_opts *o)
{
	static const char *const names[] = {ROOT_NAME, NULL};
	return o->layout == TFS_LAYOUT_FLAT ? names : NULL;
}

static void *state_new(const struct tfs_model *m, const struct tfs_tree_opts *o)
{
	(void)m;
	(void)o;
	return exports_new();
}

static void state_free(void *state)
{
	exports_free(state);
}

/* D.safetensors beside every directory D (the root's in the root),
 * named once D is. */
static tfs_err per_dir(struct tfs_tree_add *a, void *state, uint32_t dir)
{
	struct tfs_exports *x = state;
	const struct tfs_tree *t = tfs_tree_add_tree(a);
	if (tfs_grow((void **)&x->slots, &x->cap, (size_t)x->n + 1, sizeof *x->slots))
		return TFS_ERR_NOMEM;
	memset(&x->slots[x->n], 0, sizeof x->slots[x->n]);
	uint32_t parent = dir == TFS_TREE_ROOT ? TFS_TREE_ROOT : t->nodes[dir].parent;
	return tfs_tree_add_after(a, parent, dir, x->n++, NULL);
}

static size_t name(const struct tfs_tree *t, const struct tfs_node *n, const char *of, size_t of_len,
		   char *out)
{
	if (n->first == TFS_TREE_ROOT) {
		memcpy(out, ROOT_NAME, strlen(ROOT_NAME));
		return strlen(ROOT_NAME);
	}
	const struct tfs_node *dn = &t->nodes[n->first];
	const char *suffix = SUFFIX;
	if (dn->parent == TFS_TREE_ROOT && of_len + strlen(SUFFIX) == strlen(ROOT_NAME) &&
	    memcmp(of, ROOT_NAME, of_len) == 0)
		suffix = CLASH_SUFFIX;
	memcpy(out, of, of_len);
	memcpy(out + of_len, suffix, strlen(suffix));
	return of_len + strlen(suffix);
}

static int notice(const struct tfs_tree *t, const void *state, char *buf, size_t cap)
{
	(void)state;
	char first[200];
	uint64_t left = tfs_export_left_out(t, first, sizeof first);
	/* A GGUF model's model.gguf holds them all: say so, or the warning
	 * reads as if they were lost. */
	int gguf = tfs_gguf_offered(t->m);
	if (left)
		snprintf(buf, cap, "-o export leaves out %llu tensor%s that safetensors cannot hold (%s)%s",
			 (unsigned long long)left, left == 1 ? "" : "s", first,
			 gguf ? "; model.gguf holds every tensor" : "");
	return left != 0;
}

const struct tfs_view_ops tfs_view_export = {
	.name = "export",
	.flags = TFS_VIEWF_GENERATED | TFS_VIEWF_LEAD,
	.opts = opts,
	.check = check,
	.wanted = wanted,
	.keep_pages = keep_pages,
	.reserves = reserves,
	.dir_room = sizeof CLASH_SUFFIX - 1,
	.state_new = state_new,
	.state_free = state_free,
	.per_dir = per_dir,
	.name_after = name,
	.notice = notice,
	.size = tfs_export_size,
	.pieces = export_pieces,
	.open = tfs_export_check,
};
