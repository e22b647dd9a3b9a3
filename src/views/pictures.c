/* -o pictures: NAME.png beside every tensor file, a picture of the
 * tensor's values (compute/picture.h), drawn when first read.
 *
 * A picture can be a megabyte, read in several requests: it is kept while
 * any reader has it open (from open to release), so that readers of
 * different pictures at once (a file manager's thumbnails) never make each
 * other draw again, and besides those the last few drawn. At most KEPT_MAX
 * are kept in all (the bound on memory: KEPT_MAX times the largest
 * picture, about 1 MiB); past that many open at once, the one read least
 * recently goes first, and is drawn again if read again. The size of a
 * picture of each dimensions is worked out once, by drawing an empty one. */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "core/table.h"
#include "compute/picture.h"
#include "views/tree.h"
#include "views/view.h"

#define KEPT 8      /* drawn pictures kept that no reader has open */
#define KEPT_MAX 32 /* drawn pictures kept in all */
#define SIZES 64

/* A picture that is open, drawn or being drawn. */
struct drawn {
	uint32_t node;
	unsigned opens; /* readers that have it open */
	int busy;       /* being drawn: wait for it */
	unsigned char *png;
	size_t len;
	uint64_t used; /* for the least recently used */
};

struct pictures {
	pthread_mutex_t lock;
	pthread_cond_t done;
	uint64_t clock;
	struct drawn *v; /* in no order */
	size_t n, cap;
	unsigned ndrawn; /* with png */
	struct size {
		uint32_t w, h;
		size_t len;
	} sizes[SIZES];
	unsigned nsizes;
};

static void *state_new(const struct tfs_model *m, const struct tfs_tree_opts *o)
{
	(void)m;
	(void)o;
	struct pictures *p = calloc(1, sizeof *p);
	if (p) {
		pthread_mutex_init(&p->lock, NULL);
		pthread_cond_init(&p->done, NULL);
	}
	return p;
}

static void state_free(void *state)
{
	struct pictures *p = state;
	for (size_t i = 0; i < p->n; i++)
		free(p->v[i].png);
	free(p->v);
	pthread_cond_destroy(&p->done);
	pthread_mutex_destroy(&p->lock);
	free(p);
}

static const struct tfs_tensor *tensor_of(const struct tfs_tree *t, const struct tfs_node *n,
					  const struct tfs_shard **sh)
{
	const struct tfs_node *tn = &t->nodes[n->first];
	*sh = &t->m->shards[tn->shard];
	return &(*sh)->h.t[tn->ref];
}

static tfs_err size_of(const struct tfs_tree *t, const struct tfs_node *n, size_t *len)
{
	struct pictures *p = t->vstate[n->kind];
	const struct tfs_shard *sh;
	const struct tfs_tensor *ts = tensor_of(t, n, &sh);
	uint32_t w, h;
	tfs_picture_dims(&sh->h, ts, &w, &h);
	pthread_mutex_lock(&p->lock);
	for (unsigned i = 0; i < p->nsizes; i++) {
		if (p->sizes[i].w == w && p->sizes[i].h == h) {
			*len = p->sizes[i].len;
			pthread_mutex_unlock(&p->lock);
			return TFS_OK;
		}
	}
	pthread_mutex_unlock(&p->lock);
	tfs_err e = tfs_picture_size(w, h, len);
	if (e)
		return e;
	pthread_mutex_lock(&p->lock);
	if (p->nsizes < SIZES)
		p->sizes[p->nsizes++] = (struct size){w, h, *len};
	pthread_mutex_unlock(&p->lock);
	return TFS_OK;
}

static uint64_t size(const struct tfs_tree *t, const struct tfs_node *n)
{
	size_t len;
	/* (only memory can fail: a size of 0 then, and reads fail too) */
	return size_of(t, n, &len) ? 0 : len;
}

static struct drawn *find(struct pictures *p, uint32_t ni)
{
	for (size_t i = 0; i < p->n; i++)
		if (p->v[i].node == ni)
			return &p->v[i];
	return NULL;
}

/* Drops an entry that holds nothing any more. */
static void tidy(struct pictures *p, struct drawn *d)
{
	if (d->opens || d->busy || d->png)
		return;
	*d = p->v[--p->n];
}

static void forget(struct pictures *p, struct drawn *d)
{
	free(d->png);
	d->png = NULL;
	d->len = 0;
	p->ndrawn--;
	tidy(p, d);
}

/* Drops the least recently read drawn picture no reader has open, or
 * with only_closed 0 and none such, of all; 0 when there is none. */
static int drop_lru(struct pictures *p, int only_closed)
{
	struct drawn *closed = NULL, *any = NULL;
	for (size_t i = 0; i < p->n; i++) {
		struct drawn *c = &p->v[i];
		if (!c->png)
			continue;
		if (!any || c->used < any->used)
			any = c;
		if (!c->opens && (!closed || c->used < closed->used))
			closed = c;
	}
	struct drawn *d = closed ? closed : only_closed ? NULL : any;
	if (d)
		forget(p, d);
	return d != NULL;
}

/* Room for one more drawn picture within KEPT_MAX: one no reader has open
 * goes first; past KEPT_MAX open at once, one that is open. */
static void make_room(struct pictures *p)
{
	while (p->ndrawn >= KEPT_MAX && drop_lru(p, 0))
		;
}

/* The entry of node ni, made if need be (NULL: out of memory). */
static struct drawn *entry(struct pictures *p, uint32_t ni)
{
	struct drawn *d = find(p, ni);
	if (d)
		return d;
	if (tfs_grow((void **)&p->v, &p->cap, p->n + 1, sizeof *p->v))
		return NULL;
	d = &p->v[p->n++];
	*d = (struct drawn){.node = ni};
	return d;
}

/* The picture of node n, drawn if need be; called and returns with the
 * lock held. Its entry may move while the lock is not held: it is looked
 * up again each time. */
static tfs_err picture(const struct tfs_tree *t, const struct tfs_node *n, struct pictures *p,
		       struct drawn **out)
{
	uint32_t ni = (uint32_t)(n - t->nodes);
	for (;;) {
		struct drawn *d = find(p, ni);
		if (d && d->png) {
			d->used = ++p->clock;
			*out = d;
			return TFS_OK;
		}
		if (d && d->busy) {
			pthread_cond_wait(&p->done, &p->lock);
			continue;
		}
		make_room(p);
		if (!(d = entry(p, ni)))
			return TFS_ERR_NOMEM;
		d->busy = 1;
		pthread_mutex_unlock(&p->lock);
		/* Drawn outside the lock: reading a tensor's sample takes time. */
		const struct tfs_shard *sh;
		const struct tfs_tensor *ts = tensor_of(t, n, &sh);
		unsigned char *png = NULL;
		size_t len = 0, want = 0;
		tfs_err e = tfs_picture_png(sh, ts, &png, &len);
		if (!e && !(e = size_of(t, n, &want)) && len != want)
			e = TFS_ERR_IO; /* cannot be (compute/picture.h); never wrong bytes */
		if (!e) {
			char q[120];
			tfs_quote(q, sizeof q, n->fname, n->fname_len);
			tfs_log_detail("%s: drawn", q); /* (-o verbose: a test counts them) */
		}
		pthread_mutex_lock(&p->lock);
		d = find(p, ni);
		d->busy = 0;
		pthread_cond_broadcast(&p->done);
		if (e) {
			free(png);
			tidy(p, d);
			return e;
		}
		d->png = png;
		d->len = len;
		d->used = ++p->clock;
		p->ndrawn++;
		*out = d;
		return TFS_OK;
	}
}

static tfs_err pieces(const struct tfs_tree *t, const struct tfs_node *n, uint64_t off, size_t len,
		      struct tfs_pieces *out)
{
	struct pictures *p = t->vstate[n->kind];
	struct drawn *d;
	pthread_mutex_lock(&p->lock);
	tfs_err e = picture(t, n, p, &d);
	if (!e) {
		/* Copied while the lock keeps the picture from being dropped. */
		void *to = off + len <= d->len ? tfs_pieces_room(out, len) : NULL;
		if (to)
			memcpy(to, d->png + off, len);
		e = to ? tfs_pieces_mem(out, to, len) : TFS_ERR_IO;
	}
	pthread_mutex_unlock(&p->lock);
	return e;
}

static tfs_err open_(const struct tfs_tree *t, const struct tfs_node *n)
{
	struct pictures *p = t->vstate[n->kind];
	pthread_mutex_lock(&p->lock);
	struct drawn *d = entry(p, (uint32_t)(n - t->nodes));
	if (d)
		d->opens++;
	pthread_mutex_unlock(&p->lock);
	return d ? TFS_OK : TFS_ERR_NOMEM;
}

static void release(const struct tfs_tree *t, const struct tfs_node *n)
{
	struct pictures *p = t->vstate[n->kind];
	pthread_mutex_lock(&p->lock);
	struct drawn *d = find(p, (uint32_t)(n - t->nodes));
	if (d && d->opens) {
		d->opens--;
		tidy(p, d);
		/* Of those no reader has open, the last KEPT read stay. */
		unsigned nclosed = 0;
		for (size_t i = 0; i < p->n; i++)
			nclosed += p->v[i].png && !p->v[i].opens;
		if (nclosed > KEPT)
			drop_lru(p, 1);
	}
	pthread_mutex_unlock(&p->lock);
}

static const struct tfs_opt_spec opts[] = {
	{"pictures", 0, "NAME.png beside each tensor file (a heatmap or histogram)", NULL, 0},
	{NULL, 0, NULL, NULL, 0},
};

static int wanted(const struct tfs_tree_opts *o)
{
	return tfs_opts_get(o->opts, "pictures") != NULL;
}

const struct tfs_view_ops tfs_view_pictures = {
	.name = "pictures",
	.size = size,
	.pieces = pieces,
	.open = open_,
	.release = release,
	.state_new = state_new,
	.state_free = state_free,
	.beside = ".png",
	.beside_long = "__picture_%u__.png",
	.wanted = wanted,
	.opts = opts,
};
