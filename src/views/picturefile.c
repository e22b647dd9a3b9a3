/* -o pictures: NAME.png beside every tensor file, a picture of the
 * tensor's values (views/picture.h), drawn when first read.
 *
 * A picture can be a megabyte: the last few drawn are kept (a reader
 * reads one in several requests), not all of them. The size of a picture
 * of each dimensions is worked out once, by drawing an empty one. */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "views/picture.h"
#include "views/tree.h"
#include "views/view.h"

#define KEPT 8
#define SIZES 64

struct drawn {
	uint32_t node; /* 0: free */
	int busy;      /* being drawn: wait for it */
	unsigned char *png;
	size_t len;
	uint64_t used; /* for the least recently used */
};

struct pictures {
	pthread_mutex_t lock;
	pthread_cond_t done;
	uint64_t clock;
	struct drawn kept[KEPT];
	struct size {
		uint32_t w, h;
		size_t len;
	} sizes[SIZES];
	unsigned nsizes;
};

static void *state_new(uint32_t count)
{
	(void)count;
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
	for (int i = 0; i < KEPT; i++)
		free(p->kept[i].png);
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

/* The kept picture of node ni, drawn if need be; called and returns with
 * the lock held. */
static tfs_err picture(const struct tfs_tree *t, const struct tfs_node *n, struct pictures *p,
		       struct drawn **out)
{
	uint32_t ni = (uint32_t)(n - t->nodes);
	for (;;) {
		struct drawn *d = NULL;
		for (int i = 0; i < KEPT; i++)
			if (p->kept[i].node == ni)
				d = &p->kept[i];
		if (d && !d->busy) {
			d->used = ++p->clock;
			*out = d;
			return TFS_OK;
		}
		if (d) {
			pthread_cond_wait(&p->done, &p->lock);
			continue;
		}
		/* A slot: a free one, else the least recently used not being
		 * drawn; with every one being drawn, wait. */
		for (int i = 0; i < KEPT; i++) {
			struct drawn *c = &p->kept[i];
			if (!c->busy && (!d || !c->node || (d->node && c->used < d->used)))
				d = c;
		}
		if (!d) {
			pthread_cond_wait(&p->done, &p->lock);
			continue;
		}
		free(d->png);
		*d = (struct drawn){.node = ni, .busy = 1};
		pthread_mutex_unlock(&p->lock);
		/* Drawn outside the lock: reading a tensor's sample takes time. */
		const struct tfs_shard *sh;
		const struct tfs_tensor *ts = tensor_of(t, n, &sh);
		unsigned char *png = NULL;
		size_t len = 0, want = 0;
		tfs_err e = tfs_picture_png(sh, ts, &png, &len);
		if (!e && !(e = size_of(t, n, &want)) && len != want)
			e = TFS_ERR_IO; /* cannot be (views/picture.h); never wrong bytes */
		pthread_mutex_lock(&p->lock);
		d->busy = 0;
		pthread_cond_broadcast(&p->done);
		if (e) {
			free(png);
			d->node = 0;
			return e;
		}
		d->png = png;
		d->len = len;
		d->used = ++p->clock;
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

static const struct tfs_opt_spec opts[] = {
	{"pictures", 0, "NAME.png beside each tensor file (a heatmap or histogram)", NULL, 0},
	{NULL, 0, NULL, NULL, 0},
};

static int wanted(const struct tfs_tree_opts *o)
{
	return tfs_opts_get(o->opts, "pictures") != NULL;
}

const struct tfs_view_ops tfs_view_picture = {
	.name = "picture",
	.size = size,
	.pieces = pieces,
	.state_new = state_new,
	.state_free = state_free,
	.beside = ".png",
	.beside_long = "__picture_%u__.png",
	.wanted = wanted,
	.opts = opts,
};
