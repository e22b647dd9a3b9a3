/* The read path of the block cache (sources/cache.h): a read's blocks
 * found or loaded and pinned until they are served, and the read-ahead
 * that follows a reader going through a file. The blocks, their budget,
 * loading and the workers are sources/cache.c's. */
#include "sources/cache.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "sources/cache_i.h"

/* Queues prefetch of blocks [from, to) that are not there yet, while they
 * fit the budget without pushing out anything a reader holds; none once
 * the cache is stopping (no worker would take them). */
static void prefetch(struct tfs_cfile *f, uint64_t from, uint64_t to)
{
	struct tfs_cache *c = f->c;
	if (tfs_cache_stopping(c))
		return;
	while (from < to) {
		struct job *j = NULL;
		while (from < to && tfs_cache_find(c, f, from))
			from++;
		while (from < to && !tfs_cache_find(c, f, from) && (!j || j->n < c->run)) {
			struct blk *nb = NULL;
			if (!tfs_cache_make_room(c, BLK, 1) || (!j && !(j = calloc(1, sizeof *j))) ||
			    !(nb = tfs_cache_blk_new(c, f, from))) {
				to = from; /* no room: stop here */
				break;
			}
			nb->unread = 1;
			if (!j->n)
				j->first = from;
			j->n++;
			from++;
		}
		if (!j)
			return;
		if (!j->n) {
			free(j);
			return;
		}
		tfs_cache_enqueue(c, f, j, 0);
	}
}

/* A stream that has read up to `at` (its last block b1): the window after
 * it fetched ahead in whole parts, on past the tensor it reads into the
 * next ones (loaders read a checkpoint through), and past the file's end
 * into the file chained after it (the next shard). */
static void read_ahead(struct tfs_cfile *f, struct stream *s, uint64_t at, uint64_t b1, uint64_t fence)
{
	struct tfs_cache *c = f->c;
	uint64_t from = s->ahead > b1 + 1 ? s->ahead : b1 + 1;
	uint64_t end = at + s->window;
	/* Not yet seen going from one object into the next: a part past this
	 * one's end, no more (1 GiB read from one tensor was followed by
	 * 128 MiB of the next ones, a tenth more traffic for nothing). */
	uint64_t part = (uint64_t)c->run * BLK;
	if (!s->crossed && s->limit < UINT64_MAX - part && end > s->limit + part)
		end = s->limit + part > at ? s->limit + part : at;
	/* The reader goes elsewhere after fence (sources/readahead.h). */
	if (end > fence)
		end = fence > at ? fence : at;
	uint64_t to = (end + BLK - 1) / BLK;
	if (to > f->nblocks)
		to = f->nblocks;
	/* In whole runs: topping the window up by the block or two each read
	 * moves it would make every request that small (1,070 requests of
	 * 512 KiB for 1 GiB from s3rver). */
	uint64_t wb = s->window / BLK, run = wb / 2 < c->run ? wb / 2 : c->run;
	if (from < to && (to - from >= run || to == f->nblocks)) {
		prefetch(f, from, to);
		s->ahead = to;
	}
	struct tfs_cfile *g = f->next;
	if (g && fence == UINT64_MAX && end > f->size && s->ahead >= f->nblocks) {
		uint64_t gto = (end - f->size + BLK - 1) / BLK;
		if (gto > g->nblocks)
			gto = g->nblocks;
		if (s->spill < gto && (gto - s->spill >= run || gto == g->nblocks)) {
			prefetch(g, s->spill, gto);
			s->spill = gto;
		}
	}
}

/* The prefetch window after a read of [off, off + len): grows while the
 * reads follow each other, and is 0 for a random read. */
static struct stream *follow(struct tfs_cfile *f, uint64_t off, uint64_t len, uint64_t limit)
{
	struct tfs_cache *c = f->c;
	struct stream *s = NULL, *oldest = &f->st[0];
	f->clock++;
	for (int i = 0; i < STREAMS; i++) {
		struct stream *t = &f->st[i];
		if (t->used && off + STREAM_SLACK >= t->next && off <= t->next + STREAM_SLACK)
			s = t;
		if (t->used < oldest->used)
			oldest = t;
	}
	/* Streams share the budget: each of the files read in sequence in
	 * the last half second gets its part of the window (four readers with
	 * a whole window each pushed out each other's read-ahead). The file
	 * chained before this one does not count: its reader is likely this
	 * one, gone on to the next shard. */
	int64_t now = tfs_cache_now_ns();
	unsigned streaming = 1;
	for (struct tfs_cfile *g = c->files; g; g = g->all_next)
		if (g != f && g != f->prev && now - g->last_seq < 500000000ll)
			streaming++;
	uint64_t cap = c->window_max / streaming;
	if (cap < 2 * BLK)
		cap = 2 * BLK;
	if (s) {
		/* Two random reads can land close by chance; three in a row
		 * that follow each other are a reader moving forward. */
		if (++s->hits >= 2) {
			s->window = s->window ? (s->window * 2 < cap ? s->window * 2 : cap)
					      : (2 * BLK > cap ? cap : 2 * BLK);
			if (s->window > cap)
				s->window = cap;
			f->last_seq = now;
		}
		if (off + len > s->next)
			s->next = off + len;
		if (off >= s->limit && limit > s->limit)
			s->crossed = 1;
	} else {
		s = oldest;
		s->next = off + len;
		s->hits = 0;
		s->window = 0;
		s->ahead = 0;
		s->spill = 0;
		/* A reader that came over from the file chained before this one
		 * (the shard before) keeps going through. */
		s->crossed = f->prev && now - f->prev->last_seq < 500000000ll;
	}
	s->limit = limit;
	s->used = f->clock;
	return s;
}

struct tfs_cmap {
	struct tfs_cache *c;
	unsigned n;
	struct blk *b[];
};

/* The piece [start, end) of a loaded block, under c->lock. */
static void serve(struct tfs_cache *c, struct blk *b, uint64_t start, uint64_t end, struct tfs_iov *v)
{
	/* Read once as many bytes as it holds have been served: a FUSE read
	 * is smaller than a block, the kernel's readahead sends a block's two
	 * halves in two requests that may come in either order, and the
	 * second would find the block recycled and fetch it again. */
	b->served += (uint32_t)(end - start);
	if (b->served >= b->len)
		b->unread = 0;
	/* A block read through (its bytes in the kernel's page cache now) is
	 * the first whose buffer the next block takes: a stream then cycles
	 * through the buffers of its window, where putting it first to go
	 * last grew the cache to its whole budget of fresh pages, each zeroed
	 * by the kernel (a seventh of the daemon's time on a fresh mount's
	 * first gigabyte). */
	if (b->served >= b->len && !b->f->keep)
		tfs_cache_lru_back(c, b);
	else
		tfs_cache_lru_front(c, b);
	v->p = b->data + start;
	v->len = end - start;
	v->fd = -1;
	v->foff = 0;
}

/* Pins every block of a read (c->lock held), from here until it is
 * served: a block loaded for this read used to be free for another
 * reader's make_room between its loading and its serving, and was then
 * fetched a second time. The blocks made here, to be loaded by this
 * reader, go to mine. */
static tfs_err pin_blocks(struct tfs_cfile *f, uint64_t b0, uint64_t b1, struct tfs_cmap *map,
			  struct blk **mine, uint64_t *nmine, struct tfs_diag *d)
{
	struct tfs_cache *c = f->c;
	int64_t now = tfs_cache_now_ns();
	for (uint64_t i = b0; i <= b1; i++) {
		struct blk *b = tfs_cache_find(c, f, i);
		if (b && b->state == FAILED) {
			/* Answered from the failure once (the kernel's re-read),
			 * then gone; unless no reader got it, or long ago. */
			int again = b->held &&
				    now - b->failed_at < __atomic_load_n(&c->hold_ns, __ATOMIC_RELAXED);
			tfs_cache_table_remove(c, b);
			if (b->pins == 0 && !again)
				tfs_cache_blk_free(c, b);
			if (!again)
				b = NULL;
		}
		if (b)
			c->hits++;
		if (!b) {
			c->misses++;
			/* A reader always gets its blocks, over budget if it
			 * must (by at most what the readers in flight hold). */
			tfs_cache_make_room(c, BLK, 0);
			if (!(b = tfs_cache_blk_new(c, f, i)))
				return tfs_fail(d, TFS_ERR_NOMEM, "out of memory");
			mine[(*nmine)++] = b;
		}
		b->pins++;
		map->b[map->n++] = b;
	}
	return TFS_OK;
}

/* Waits for each block of the map (c->lock held) and puts its part of
 * the read in iov. */
static tfs_err serve_all(struct tfs_cmap *map, uint64_t off, size_t len, uint64_t b0, uint64_t b1,
			 struct tfs_iov *iov, struct tfs_diag *d)
{
	struct tfs_cache *c = map->c;
	tfs_err e = TFS_OK;
	for (unsigned k = 0; !e && k < map->n; k++) {
		struct blk *b = map->b[k];
		while (b->state == LOADING)
			pthread_cond_wait(&c->changed, &c->lock);
		if (b->state == FAILED) {
			/* The failure of this fetch, or of one made for another
			 * reader a moment ago: never a second round of retries
			 * within one read. */
			if (!b->held) {
				b->held = 1;
				b->failed_at = tfs_cache_now_ns();
			}
			e = tfs_fail(d, b->err, "%s", b->msg);
			break;
		}
		uint64_t start = b->idx == b0 ? off - b0 * BLK : 0;
		uint64_t end = b->idx == b1 ? off + len - b1 * BLK : b->len;
		serve(c, b, start, end, &iov[k]);
	}
	return e;
}

tfs_err tfs_cfile_map(struct tfs_cfile *f, uint64_t off, size_t len, uint64_t limit, struct tfs_iov *iov,
		      unsigned *niov, struct tfs_cmap **token, struct tfs_diag *d)
{
	return tfs_cfile_map_fenced(f, off, len, limit, UINT64_MAX, iov, niov, token, d);
}

tfs_err tfs_cfile_map_fenced(struct tfs_cfile *f, uint64_t off, size_t len, uint64_t limit, uint64_t fence,
			     struct tfs_iov *iov, unsigned *niov, struct tfs_cmap **token, struct tfs_diag *d)
{
	struct tfs_cache *c = f->c;
	*niov = 0;
	*token = NULL;
	if (len == 0)
		return TFS_OK;
	if (off > f->size || len > f->size - off)
		return tfs_fail(d, TFS_ERR_SHORT, "read past the end");
	uint64_t b0 = off / BLK, b1 = (off + len - 1) / BLK, nb = b1 - b0 + 1;
	struct blk **mine = malloc(nb * sizeof *mine);
	struct tfs_cmap *map = malloc(sizeof *map + nb * sizeof map->b[0]);
	uint64_t nmine = 0;
	if (!mine || !map) {
		free(mine);
		free(map);
		return tfs_fail(d, TFS_ERR_NOMEM, "out of memory");
	}
	map->c = c;
	map->n = 0;

	pthread_mutex_lock(&c->lock);
	struct stream *s = follow(f, off, len, limit);
	tfs_err e = pin_blocks(f, b0, b1, map, mine, &nmine, d);
	if (!e && c->started && s->window)
		read_ahead(f, s, off + len, b1, fence);
	pthread_mutex_unlock(&c->lock);

	/* Loads in runs of consecutive blocks (they are, unless another
	 * reader got some of them first), one request a run; every block
	 * made above is loaded, even after an error, or its waiters would
	 * wait for ever. */
	for (uint64_t i = 0; i < nmine;) {
		uint64_t j = i + 1;
		while (j < nmine && mine[j]->idx == mine[j - 1]->idx + 1)
			j++;
		tfs_cache_load(f, mine + i, j - i);
		i = j;
	}
	free(mine);

	pthread_mutex_lock(&c->lock);
	if (!e)
		e = serve_all(map, off, len, b0, b1, iov, d);
	pthread_mutex_unlock(&c->lock);
	if (e) {
		tfs_cfile_unmap(map);
		return e;
	}
	*niov = map->n;
	*token = map;
	return TFS_OK;
}

void tfs_cache_counters(struct tfs_cache *c, uint64_t *hits, uint64_t *misses, uint64_t *disk_hits)
{
	pthread_mutex_lock(&c->lock);
	*hits = c->hits;
	*misses = c->misses;
	pthread_mutex_unlock(&c->lock);
	*disk_hits = __atomic_load_n(&c->disk_hits, __ATOMIC_RELAXED);
}

void tfs_cfile_unmap(struct tfs_cmap *map)
{
	if (!map)
		return;
	struct tfs_cache *c = map->c;
	pthread_mutex_lock(&c->lock);
	for (unsigned i = 0; i < map->n; i++)
		tfs_cache_unpin(c, map->b[i]);
	pthread_mutex_unlock(&c->lock);
	free(map);
}

tfs_err tfs_cfile_read(struct tfs_cfile *f, void *buf, size_t len, uint64_t off, uint64_t limit,
		       struct tfs_diag *d)
{
	return tfs_cfile_read_fenced(f, buf, len, off, limit, UINT64_MAX, d);
}

tfs_err tfs_cfile_read_fenced(struct tfs_cfile *f, void *buf, size_t len, uint64_t off, uint64_t limit,
			      uint64_t fence, struct tfs_diag *d)
{
	if (len == 0)
		return TFS_OK;
	if (off > f->size || len > f->size - off)
		return tfs_fail(d, TFS_ERR_SHORT, "read past the end");
	if (len >= DIRECT_MIN || len > f->c->mem / 4) {
		struct tfs_iov v = {.p = buf, .len = len};
		tfs_err e = f->fetch(f->ctx, &v, 1, off, len, NULL, NULL);
		return e ? tfs_fail(d, e, "%s", tfs_err_str(e)) : TFS_OK;
	}
	struct tfs_iov *iov = malloc((len / BLK + 2) * sizeof *iov);
	struct tfs_cmap *map;
	unsigned n;
	if (!iov)
		return tfs_fail(d, TFS_ERR_NOMEM, "out of memory");
	tfs_err e = tfs_cfile_map_fenced(f, off, len, limit, fence, iov, &n, &map, d);
	char *out = buf;
	for (unsigned i = 0; !e && i < n; i++) {
		memcpy(out, iov[i].p, iov[i].len);
		out += iov[i].len;
	}
	tfs_cfile_unmap(map);
	free(iov);
	return e;
}

void tfs_cfile_prefetch(struct tfs_cfile *f, uint64_t off, uint64_t len)
{
	struct tfs_cache *c = f->c;
	if (!len || off >= f->size)
		return;
	if (len > f->size - off)
		len = f->size - off;
	pthread_mutex_lock(&c->lock);
	if (c->started)
		prefetch(f, off / BLK, (off + len + BLK - 1) / BLK);
	pthread_mutex_unlock(&c->lock);
}

void tfs_cache_shape(struct tfs_cache *c, uint64_t *window, uint64_t *part)
{
	pthread_mutex_lock(&c->lock);
	*window = c->window_max;
	*part = (uint64_t)c->run * BLK;
	pthread_mutex_unlock(&c->lock);
}
