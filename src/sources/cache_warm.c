/* The warm-up (-o warm): every block of every remote file fetched into
 * the store below (the disk cache) after the mount is up; and the start
 * of the cache's threads, the workers and the warm-up. */
#include "sources/cache_i.h"
#include "core/thread.h"

#include <pthread.h>
#include <stdlib.h>

static void warm_progress(struct tfs_cache *c, uint64_t t0_ns, unsigned *said)
{
	uint64_t done = c->warm_done, total = c->warm_total;
	unsigned pct = total ? (unsigned)(done * 100 / total) : 100;
	while (*said + 10 <= pct) {
		*said += 10;
		double secs = (double)(tfs_cache_now_ns() - (int64_t)t0_ns) / 1e9;
		tfs_log("warm-up: %u%% (%llu of %llu MiB in %.1f s)", *said, (unsigned long long)(done >> 20),
			(unsigned long long)(total >> 20), secs);
	}
}

/* The blocks of f not yet on disk, queued a part at a time (under
 * c->lock, which the waits let go). */
static void warm_file(struct tfs_cache *c, struct tfs_cfile *f, uint64_t t0, unsigned *said)
{
	for (uint64_t idx = 0; idx < f->nblocks && !tfs_cache_stopping(c);) {
		while (c->nwarm_jobs >= c->allowed && !tfs_cache_stopping(c))
			pthread_cond_wait(&c->changed, &c->lock);
		struct job *j = calloc(1, sizeof *j);
		if (!j)
			return;
		while (idx < f->nblocks && j->n < c->run && !tfs_cache_stopping(c)) {
			uint64_t len = f->size - idx * BLK < BLK ? f->size - idx * BLK : BLK;
			struct blk *nb = tfs_cache_find(c, f, idx);
			if (nb || (f->lf && c->lower->ops->has(f->lf, idx, (uint32_t)len))) {
				/* (One a reader has, or has had, goes to disk as
				 * it is loaded.) */
				c->warm_done += len;
				f->warmed += len;
				idx++;
				if (j->n)
					break; /* a part is consecutive blocks */
				continue;
			}
			while (!tfs_cache_make_room(c, BLK, 1) && !tfs_cache_stopping(c))
				pthread_cond_wait(&c->changed, &c->lock);
			if (tfs_cache_stopping(c) || tfs_cache_find(c, f, idx) ||
			    !(nb = tfs_cache_blk_new(c, f, idx)))
				break;
			nb->unread = 1;
			if (!j->n)
				j->first = idx;
			j->n++;
			idx++;
		}
		if (!j->n) {
			free(j);
		} else {
			tfs_cache_enqueue(c, f, j, 1);
		}
		warm_progress(c, t0, said);
	}
}

/* Every block of every file not yet on disk, in the order a loader reads
 * them (each chain of shards from its first), through the workers at a
 * lower priority than any reader's read-ahead, a part at a time and never
 * more parts queued than may be in flight; what it loads is written to
 * the disk cache and its memory recycled. */
static void *warm_up(void *arg)
{
	struct tfs_cache *c = arg;
	int64_t t0 = tfs_cache_now_ns();
	unsigned said = 0;
	pthread_mutex_lock(&c->lock);
	/* (References keep each file walked, and the chain's head, from
	 * being freed while the lock is let go in the waits.) */
	for (struct tfs_cfile *h = c->files; h && !tfs_cache_stopping(c);) {
		h->refs++;
		for (struct tfs_cfile *f = h->prev ? NULL : h; f;) {
			f->refs++;
			warm_file(c, f, (uint64_t)t0, &said);
			struct tfs_cfile *nf = tfs_cache_stopping(c) ? NULL : f->next;
			if (nf)
				nf->refs++;
			tfs_cache_file_unref(c, f);
			if (nf)
				nf->refs--;                  /* taken again at the loop's top */
			pthread_cond_broadcast(&c->changed); /* tfs_cfile_free may wait */
			f = nf;
		}
		struct tfs_cfile *nh = tfs_cache_stopping(c) ? NULL : h->all_next;
		if (nh)
			nh->refs++;
		tfs_cache_file_unref(c, h);
		if (nh)
			nh->refs--;
		pthread_cond_broadcast(&c->changed);
		h = nh;
	}
	while (c->nwarm_jobs && !tfs_cache_stopping(c))
		pthread_cond_wait(&c->changed, &c->lock);
	warm_progress(c, (uint64_t)t0, &said);
	if (!tfs_cache_stopping(c))
		tfs_log("warm-up: done: %llu MiB in %.1f s", (unsigned long long)(c->warm_done >> 20),
			(double)(tfs_cache_now_ns() - t0) / 1e9);
	pthread_mutex_unlock(&c->lock);
	return NULL;
}

void tfs_cache_warm_status(struct tfs_cache *c, uint64_t *done, uint64_t *total, int *on)
{
	pthread_mutex_lock(&c->lock);
	*done = c->warm_done;
	*total = c->warm_total;
	*on = c->warm;
	pthread_mutex_unlock(&c->lock);
}

void tfs_cache_start(struct tfs_cache *c)
{
	pthread_mutex_lock(&c->lock);
	if (!c->started) {
		c->started = 1;
		tfs_cache_start_workers(c);
		if (c->warm && c->lower && tfs_thread_start(&c->warm_thread, NULL, warm_up, c) == 0)
			c->warm_running = 1;
	}
	pthread_mutex_unlock(&c->lock);
}
