#include "sources/cache.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

#include "core/hash.h"
#include "core/table.h"

#include "sources/cache_i.h"
#include "core/thread.h"

/* ---- configuration ---- */

tfs_err tfs_cache_parse(const struct tfs_opts *o, struct tfs_cache_cfg *cfg, struct tfs_diag *d)
{
	const char *cs = tfs_opts_get(o, "cache_size"), *dir = tfs_opts_get(o, "cache_dir"),
		   *cm = tfs_opts_get(o, "cache_max"), *cc = tfs_opts_get(o, "concurrency"),
		   *ps = tfs_opts_get(o, "part_size");
	uint64_t mem = TFS_CACHE_DEFAULT_MEM, disk = TFS_CACHE_DEFAULT_DISK, part = RUN_DEFAULT * BLK,
		 conc = WORKERS_DEFAULT;
	int warm = tfs_opts_get(o, "warm") != NULL;
	if (cs && (tfs_opt_number(cs, 1, UINT64_MAX, &mem) || mem < 4 * BLK))
		return tfs_fail(d, TFS_ERR_INVAL,
				"-o cache_size= takes a size of at least 1M (as 512M or 2G), not '%s'", cs);
	if (cm && tfs_opt_number(cm, 1, UINT64_MAX, &disk))
		return tfs_fail(d, TFS_ERR_INVAL, "-o cache_max= takes a size (as 10G), not '%s'", cm);
	if (cc && (tfs_opt_number(cc, 0, WORKERS_MAX, &conc) || conc < 1))
		return tfs_fail(d, TFS_ERR_INVAL,
				"-o concurrency= takes a number of requests from 1 to %d, not '%s'",
				WORKERS_MAX, cc);
	if (ps && (tfs_opt_number(ps, 1, RUN_MAX * BLK, &part) || part < BLK || part % BLK))
		return tfs_fail(d, TFS_ERR_INVAL,
				"-o part_size= takes a multiple of 256K from 256K to 64M (as 8M), not '%s'",
				ps);
	if (warm && !(dir && *dir))
		return tfs_fail(d, TFS_ERR_INVAL,
				"-o warm needs -o cache_dir=DIR: the warm-up fills the disk cache");
	cfg->mem_bytes = mem;
	cfg->dir = dir && *dir ? dir : NULL;
	cfg->disk_bytes = disk;
	cfg->workers = (unsigned)conc;
	cfg->part_bytes = part;
	cfg->warm = warm;
	return TFS_OK;
}

tfs_err tfs_cache_new(const struct tfs_cache_cfg *cfg, struct tfs_bstore *lower, struct tfs_cache **out,
		      struct tfs_diag *d)
{
	struct tfs_cache *c = calloc(1, sizeof *c);
	uint64_t mem = cfg->mem_bytes, conc = cfg->workers, part = cfg->part_bytes;
	if (!c)
		return tfs_fail(d, TFS_ERR_NOMEM, "out of memory");
	pthread_mutex_init(&c->lock, NULL);
	pthread_cond_init(&c->changed, NULL);
	pthread_cond_init(&c->work, NULL);
	c->mem = mem;
	c->hold_ns = FAIL_HOLD_NS;
	c->retried = cfg->retried;
	c->retried_ctx = cfg->retried_ctx;
	c->want_workers = (unsigned)conc;
	c->run = (unsigned)(part / BLK);
	c->allowed = ALLOWED_START < c->want_workers ? ALLOWED_START : c->want_workers;
	/* What a stream keeps fetched ahead: every request in flight a part,
	 * within half the memory budget (the rest is for what was fetched
	 * and is being read). */
	c->window_max = conc * part < mem / 2 ? conc * part : mem / 2;
	c->warm = cfg->warm && lower;
	c->lower = lower;
	c->nslots = 64;
	while (c->nslots < 2 * (mem / BLK + 64))
		c->nslots *= 2;
	c->tab = calloc(c->nslots, sizeof *c->tab);
	c->lru.lnext = c->lru.lprev = &c->lru;
	if (!c->tab) {
		free(c);
		return tfs_fail(d, TFS_ERR_NOMEM, "out of memory");
	}
	*out = c;
	return TFS_OK;
}

/* ---- the in-memory table (all under c->lock) ---- */

static size_t slot_of(struct tfs_cache *c, const struct tfs_cfile *f, uint64_t idx)
{
	uint64_t k[2] = {(uint64_t)(uintptr_t)f, idx};
	return tfs_hash(k, sizeof k, 0x6a09e667f3bcc909ull) & (c->nslots - 1);
}

struct blk *tfs_cache_find(struct tfs_cache *c, const struct tfs_cfile *f, uint64_t idx)
{
	for (struct blk *b = c->tab[slot_of(c, f, idx)]; b; b = b->hnext)
		if (b->f == f && b->idx == idx)
			return b;
	return NULL;
}

void tfs_cache_table_remove(struct tfs_cache *c, struct blk *b)
{
	struct blk **pp = &c->tab[slot_of(c, b->f, b->idx)];
	while (*pp && *pp != b)
		pp = &(*pp)->hnext;
	if (*pp)
		*pp = b->hnext;
	b->in_table = 0;
}

static void lru_unlink(struct blk *b)
{
	if (b->lnext) {
		b->lnext->lprev = b->lprev;
		b->lprev->lnext = b->lnext;
		b->lnext = b->lprev = NULL;
	}
}

void tfs_cache_lru_front(struct tfs_cache *c, struct blk *b)
{
	lru_unlink(b);
	b->lnext = c->lru.lnext;
	b->lprev = &c->lru;
	c->lru.lnext->lprev = b;
	c->lru.lnext = b;
}

void tfs_cache_lru_back(struct tfs_cache *c, struct blk *b)
{
	lru_unlink(b);
	b->lprev = c->lru.lprev;
	b->lnext = &c->lru;
	c->lru.lprev->lnext = b;
	c->lru.lprev = b;
}

#define CHUNK (32 * BLK)

static char *buf_get(struct tfs_cache *c)
{
	if (c->npool) {
		c->used -= BLK;
		return c->pool[--c->npool];
	}
	if (c->chunk == c->chunk_end) {
		if (c->nchunks == c->cchunks &&
		    tfs_grow((void **)&c->chunks, &c->cchunks, c->nchunks + 1, sizeof *c->chunks))
			return NULL;
		char *chunk = aligned_alloc(2u << 20, CHUNK);
		if (!chunk)
			return NULL;
		c->chunks[c->nchunks++] = chunk;
		madvise(chunk, CHUNK, MADV_HUGEPAGE);
		c->chunk = chunk;
		c->chunk_end = chunk + CHUNK;
	}
	char *p = c->chunk;
	c->chunk += BLK;
	return p;
}

/* Buffers are never given back (they are parts of chunks); the budget
 * bounds how many there are, as readers in flight may go over it. */
static void buf_put(struct tfs_cache *c, char *p)
{
	if (c->npool == c->cpool) {
		size_t nc = c->cpool ? c->cpool * 2 : 64;
		char **q = realloc(c->pool, nc * sizeof *q);
		if (!q)
			return; /* lost to the pool, not freed: it is part of a chunk */
		c->pool = q;
		c->cpool = nc;
	}
	c->pool[c->npool++] = p;
	c->used += BLK;
}

void tfs_cache_blk_free(struct tfs_cache *c, struct blk *b)
{
	lru_unlink(b);
	c->used -= BLK;
	buf_put(c, b->data);
	free(b);
}

void tfs_cache_unpin(struct tfs_cache *c, struct blk *b)
{
	if (--b->pins == 0 && !b->in_table)
		tfs_cache_blk_free(c, b);
}

/* A block its readers have read, whose bytes the kernel's page cache
 * holds now (unless its file's readers keep no copy). */
static int read_through(const struct blk *b)
{
	return b->state == READY && !b->unread && b->served >= b->len && !b->f->keep;
}

/* Room for one more block (need is BLK). A kept buffer is room already,
 * over the budget too: buffers are never given back (`used` never falls),
 * and one is all a block needs. Then the least recently used block that
 * has been read and that nobody holds gives its buffer: the kernel's page
 * cache keeps what was read (files are opened with keep_cache), so this
 * cache is mostly for what is fetched ahead and not read yet, and a
 * stream recycles its own buffers instead of filling the whole budget
 * with fresh pages (zeroing them cost a quarter of a sequential read's
 * time). Only then does the cache grow, up to the budget; past it, the
 * least recently used block nobody holds gives its buffer (one: evicting
 * until `used` fell under the budget emptied the whole cache on a miss,
 * and once a reader had gone over it, prefetches and the warm-up found
 * no room ever again), and a reader (not a prefetch) may take that of a
 * prefetched block nobody read: many readers would otherwise throw away
 * each other's windows. A file whose readers keep no copy (tfs_cfile_keep:
 * direct I/O, generated files) has no page cache behind it: what was read
 * of it is kept, as any other block, for the next reader. Returns whether
 * there is room. */
int tfs_cache_make_room(struct tfs_cache *c, uint64_t need, int for_prefetch)
{
	if (need <= BLK && c->npool)
		return 1;
	int looked = 0;
	for (struct blk *b = c->lru.lprev; b != &c->lru && looked < 64; b = b->lprev, looked++) {
		if (b->pins == 0 && (b->state == FAILED || read_through(b))) {
			tfs_cache_table_remove(c, b);
			tfs_cache_blk_free(c, b);
			return 1;
		}
	}
	if (c->used + need <= c->mem)
		return 1;
	for (struct blk *b = c->lru.lprev; b != &c->lru; b = b->lprev) {
		if (b->pins == 0 && b->state != LOADING && !(for_prefetch && b->unread)) {
			tfs_cache_table_remove(c, b);
			tfs_cache_blk_free(c, b);
			return 1;
		}
	}
	return 0;
}

/* A new LOADING block, pinned once for whoever will load it. */
struct blk *tfs_cache_blk_new(struct tfs_cache *c, struct tfs_cfile *f, uint64_t idx)
{
	uint64_t len = f->size - idx * BLK < BLK ? f->size - idx * BLK : BLK;
	struct blk *b = calloc(1, sizeof *b);
	if (!b)
		return NULL;
	b->data = buf_get(c);
	if (!b->data) {
		free(b);
		return NULL;
	}
	b->f = f;
	b->idx = idx;
	b->len = (uint32_t)len;
	b->state = LOADING;
	b->pins = 1;
	b->in_table = 1;
	size_t s = slot_of(c, f, idx);
	b->hnext = c->tab[s];
	c->tab[s] = b;
	c->used += BLK;
	return b;
}

/* ---- loading ---- */

int64_t tfs_cache_now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000000000ll + ts.tv_nsec;
}

/* A fetch of a run of blocks under way: those whose bytes are all in
 * place (and one more) are served at once (with 8 MiB parts, a reader used to wait for
 * the whole part, and a stream read at three quarters of the speed). */
struct landing {
	struct tfs_cache *c;
	struct blk **b;
	uint64_t n, published;
	uint64_t end; /* bytes of the published blocks */
};

static void landed(void *arg, uint64_t got)
{
	struct landing *l = arg;
	struct tfs_cache *c = l->c;
	uint64_t k = l->published, end = l->end;
	/* A byte past it must have come: the last block waits for the
	 * answer to end well (one that runs on past its range, or whose
	 * length lied, fails there, and serves none of its last block). */
	while (k < l->n && end + l->b[k]->len < got)
		end += l->b[k++]->len;
	if (k == l->published)
		return;
	pthread_mutex_lock(&c->lock);
	for (uint64_t m = l->published; m < k; m++) {
		l->b[m]->state = READY;
		tfs_cache_lru_front(c, l->b[m]);
	}
	pthread_cond_broadcast(&c->changed);
	pthread_mutex_unlock(&c->lock);
	l->published = k;
	l->end = end;
}

/* The blocks the store below has, served as they are found: those read
 * so far at once, in one go, whenever a block is missing and at the end
 * (a lock and a wake-up per block cost a disk cache hit a fifth of its
 * speed): a reader waiting for one of them need not wait for the
 * network. */
static void load_lower(struct tfs_cfile *f, struct blk **blocks, uint64_t n, char *found)
{
	struct tfs_cache *c = f->c;
	for (uint64_t i = 0, from = 0; i < n; i++) {
		found[i] = (char)c->lower->ops->get(f->lf, blocks[i]->idx, blocks[i]->len, blocks[i]->data);
		if (found[i])
			__atomic_fetch_add(&c->disk_hits, 1, __ATOMIC_RELAXED);
		if (found[i] && i + 1 < n)
			continue;
		pthread_mutex_lock(&c->lock);
		for (; from <= i; from++) {
			struct blk *b = blocks[from];
			if (!found[from])
				continue;
			b->state = READY;
			tfs_cache_lru_front(c, b);
		}
		pthread_cond_broadcast(&c->changed);
		pthread_mutex_unlock(&c->lock);
	}
}

/* Where a block being loaded came from (tfs_cache_load). */
#define FROM_NETWORK 0 /* asked of the network: its answer failed, or none came */
#define FROM_LOWER 1   /* the store below had it */
#define FROM_ANSWER 2  /* an answer that ended well: for the store below */

/* The blocks not found below, one request per stretch of consecutive
 * ones; each block's failure noted in it, and from[] set to FROM_ANSWER
 * for those of an answer that ended well. */
static void load_network(struct tfs_cfile *f, struct blk **blocks, uint64_t n, char *found,
			 struct tfs_iov *iov)
{
	uint64_t i = 0;
	while (i < n) {
		if (found && found[i]) {
			i++;
			continue;
		}
		uint64_t j = i;
		while (j < n && !(found && found[j]))
			j++;
		uint64_t len = 0;
		for (uint64_t k = i; k < j; k++) {
			iov[k - i].p = blocks[k]->data;
			iov[k - i].len = blocks[k]->len;
			len += blocks[k]->len;
		}
		struct landing l = {f->c, blocks + i, j - i, 0, 0};
		tfs_err e =
			iov ? f->fetch(f->ctx, iov, (unsigned)(j - i), blocks[i]->idx * BLK, len, landed, &l)
			    : TFS_ERR_NOMEM;
		/* A block served as it landed stays served: its bytes were
		 * whole, and the answer's headers checked (the range, the pinned
		 * version, no encoding). But only an answer that ended well goes
		 * to the store below: one that failed after (ran on past its
		 * range) leaves nothing there. */
		for (uint64_t k = i + l.published; k < j; k++) {
			blocks[k]->err = e;
			if (e)
				snprintf(blocks[k]->msg, sizeof blocks[k]->msg, "%s", tfs_err_str(e));
		}
		for (uint64_t k = i; !e && found && k < j; k++)
			found[k] = FROM_ANSWER;
		i = j;
	}
}

/* Loads blocks[0..n) (consecutive, LOADING, pinned by the caller): each
 * from the store below when it has it, the rest from the network, handed
 * to the store below then. Marks them READY or FAILED, then drops the
 * caller's pins. */
void tfs_cache_load(struct tfs_cfile *f, struct blk **blocks, uint64_t n)
{
	struct tfs_cache *c = f->c;
	struct tfs_iov *iov = malloc((n ? n : 1) * sizeof *iov);
	char *found = calloc(n ? n : 1, 1);
	if (f->lf && found)
		load_lower(f, blocks, n, found);
	load_network(f, blocks, n, found, iov);
	pthread_mutex_lock(&c->lock);
	for (uint64_t k = 0; k < n; k++) {
		struct blk *b = blocks[k];
		b->state = b->err ? FAILED : READY;
		tfs_cache_lru_front(c, b); /* a failed one too: make_room may drop it */
	}
	pthread_cond_broadcast(&c->changed);
	pthread_mutex_unlock(&c->lock);
	for (uint64_t k = 0; f->lf && found && k < n; k++)
		if (found[k] == FROM_ANSWER)
			c->lower->ops->put(f->lf, blocks[k]->idx, blocks[k]->data, blocks[k]->len);
	free(found);
	free(iov);
	pthread_mutex_lock(&c->lock);
	for (uint64_t k = 0; k < n; k++)
		tfs_cache_unpin(c, blocks[k]);
	pthread_mutex_unlock(&c->lock);
}

/* The last reference gone (the owner's, and every prefetch job's): its
 * blocks leave the table before the file goes, so that no block can ever
 * be taken for a later file's at the same address. */
void tfs_cache_file_unref(struct tfs_cache *c, struct tfs_cfile *f)
{
	if (--f->refs)
		return;
	for (size_t s = 0; s < c->nslots; s++) {
		struct blk **pp = &c->tab[s];
		while (*pp) {
			struct blk *b = *pp;
			if (b->f == f) {
				*pp = b->hnext;
				b->in_table = 0;
				if (b->pins == 0)
					tfs_cache_blk_free(c, b);
			} else {
				pp = &b->hnext;
			}
		}
	}
	if (f->prev)
		f->prev->next = NULL;
	if (f->next)
		f->next->prev = NULL;
	for (struct tfs_cfile **pp = &c->files; *pp; pp = &(*pp)->all_next)
		if (*pp == f) {
			*pp = f->all_next;
			break;
		}
	/* (An index read at mount and closed is no part of the warm-up.) */
	c->warm_total -= f->size;
	c->warm_done -= f->warmed;
	if (f->lf)
		c->lower->ops->close(f->lf);
	free(f);
}

/* The next job: read-ahead first, the warm-up's when none waits. */
static struct job *take_job(struct tfs_cache *c)
{
	struct job *j = c->jh;
	if (j) {
		c->jh = j->next;
		if (!c->jh)
			c->jt = NULL;
	} else if ((j = c->wh)) {
		c->wh = j->next;
		if (!c->wh)
			c->wt = NULL;
	}
	return j;
}

static uint64_t retried(const struct tfs_cache *c)
{
	return c->retried ? c->retried(c->retried_ctx) : 0;
}

static void *worker(void *arg)
{
	struct tfs_cache *c = arg;
	struct blk *blocks[RUN_MAX];
	pthread_mutex_lock(&c->lock);
	for (;;) {
		while ((!(c->jh || c->wh) || c->active >= c->allowed) && !tfs_cache_stopping(c))
			pthread_cond_wait(&c->work, &c->lock);
		if (tfs_cache_stopping(c) && !(c->jh || c->wh))
			break;
		struct job *j = take_job(c);
		c->active++;
		/* Pinned for the worker too: tfs_cache_load() lets go of the job's
		 * pins, and the blocks are looked at again below. */
		for (uint64_t k = 0; k < j->n; k++) {
			blocks[k] = tfs_cache_find(c, j->f, j->first + k);
			blocks[k]->pins++;
		}
		uint64_t before = retried(c);
		pthread_mutex_unlock(&c->lock);
		tfs_cache_load(j->f, blocks, j->n);
		pthread_mutex_lock(&c->lock);
		c->active--;
		int bad = retried(c) != before;
		for (uint64_t k = 0; k < j->n; k++) {
			bad |= blocks[k]->state == FAILED;
			if (j->warm) {
				/* On disk now (or failed): its memory may be reused. */
				blocks[k]->unread = 0;
				blocks[k]->served = blocks[k]->len;
				c->warm_done += blocks[k]->len;
				j->f->warmed += blocks[k]->len;
			}
			tfs_cache_unpin(c, blocks[k]);
		}
		/* Additive increase, multiplicative decrease, as TCP and the
		 * S3 clients do: a server that asks to slow down is heard. */
		if (bad)
			c->allowed = c->allowed > 1 ? c->allowed / 2 : 1;
		else if (c->allowed < c->nworkers)
			c->allowed++;
		if (j->warm)
			c->nwarm_jobs--; /* queued or running */
		tfs_cache_file_unref(c, j->f);
		pthread_cond_broadcast(&c->changed); /* tfs_cfile_free may wait */
		/* This job's place, and the one the limit may have grown by:
		 * waking every idle worker for them (32 by default) cost a
		 * disk cache hit a tenth of its speed in wake-ups. */
		if (c->jh || c->wh) {
			pthread_cond_signal(&c->work);
			pthread_cond_signal(&c->work);
		}
		free(j);
	}
	pthread_mutex_unlock(&c->lock);
	return NULL;
}

void tfs_cache_start_workers(struct tfs_cache *c)
{
	if (!(c->threads = calloc(c->want_workers, sizeof *c->threads)))
		return;
	for (unsigned i = 0; i < c->want_workers; i++)
		if (tfs_thread_start(&c->threads[c->nworkers], NULL, worker, c) == 0)
			c->nworkers++;
}

void tfs_cache_set_hold(struct tfs_cache *c, int64_t ns)
{
	__atomic_store_n(&c->hold_ns, ns, __ATOMIC_RELAXED);
}

void tfs_cache_stop(struct tfs_cache *c)
{
	if (!c)
		return;
	pthread_mutex_lock(&c->lock);
	__atomic_store_n(&c->stopping, 1, __ATOMIC_RELEASE);
	pthread_cond_broadcast(&c->work);
	pthread_cond_broadcast(&c->changed);
	pthread_mutex_unlock(&c->lock);
}

void tfs_cache_free(struct tfs_cache *c)
{
	if (!c)
		return;
	tfs_cache_stop(c);
	for (unsigned i = 0; i < c->nworkers; i++)
		pthread_join(c->threads[i], NULL);
	if (c->warm_running)
		pthread_join(c->warm_thread, NULL);
	/* Every file is gone, and with it every block of the table; a
	 * failed block a reader held may still be on the list. */
	for (struct blk *b = c->lru.lnext, *next; b != &c->lru; b = next) {
		next = b->lnext;
		free(b);
	}
	for (size_t i = 0; i < c->nchunks; i++)
		free(c->chunks[i]);
	free(c->chunks);
	free(c->pool);
	free(c->threads);
	free(c->tab);
	if (c->lower)
		c->lower->ops->free(c->lower);
	pthread_cond_destroy(&c->changed);
	pthread_cond_destroy(&c->work);
	pthread_mutex_destroy(&c->lock);
	free(c);
}

/* A job no worker will run: its blocks fail, for whoever waits for them,
 * and leave the table (a later read fetches them itself). */
static void abandon(struct tfs_cache *c, struct job *j, const char *why)
{
	for (uint64_t k = 0; k < j->n; k++) {
		struct blk *b = tfs_cache_find(c, j->f, j->first + k);
		if (!b)
			continue;
		b->state = FAILED;
		b->err = TFS_ERR_IO;
		snprintf(b->msg, sizeof b->msg, "%s", why);
		tfs_cache_table_remove(c, b);
		tfs_cache_unpin(c, b);
	}
	pthread_cond_broadcast(&c->changed);
	free(j);
}

/* Queues a job of f's (its blocks made and pinned) for the workers:
 * the read-ahead's queue, or the warm-up's. Once the cache is stopping,
 * the workers leave as soon as the queue is empty: a job queued then
 * (by a read still in flight, or the warm-up) would never run, and the
 * next read of the stream that asked for it would wait for ever, with
 * the FUSE loop waiting for that read before the files are freed. */
void tfs_cache_enqueue(struct tfs_cache *c, struct tfs_cfile *f, struct job *j, int warm)
{
	j->f = f;
	if (tfs_cache_stopping(c)) {
		abandon(c, j, "stopped: the mount is going away");
		return;
	}
	struct job **head = warm ? &c->wh : &c->jh, **tail = warm ? &c->wt : &c->jt;
	j->warm = warm;
	f->refs++;
	if (*tail)
		(*tail)->next = j;
	else
		*head = j;
	*tail = j;
	c->nwarm_jobs += (unsigned)warm;
	pthread_cond_signal(&c->work);
}

struct tfs_cfile *tfs_cfile_new(struct tfs_cache *c, const char *key, uint64_t size, tfs_fetch_fn fetch,
				void *ctx)
{
	struct tfs_cfile *f = calloc(1, sizeof *f);
	if (!f)
		return NULL;
	f->c = c;
	f->size = size;
	f->nblocks = (size + BLK - 1) / BLK;
	f->fetch = fetch;
	f->ctx = ctx;
	f->refs = 1;
	f->lf = c->lower && key ? c->lower->ops->open(c->lower, key) : NULL;
	pthread_mutex_lock(&c->lock);
	struct tfs_cfile **pp = &c->files;
	while (*pp)
		pp = &(*pp)->all_next;
	*pp = f;
	c->warm_total += size;
	pthread_mutex_unlock(&c->lock);
	return f;
}

/* Drops f's jobs from one queue: their blocks fail, for no one. */
static void drop_jobs(struct tfs_cache *c, struct tfs_cfile *f, struct job **head, struct job **tail)
{
	for (struct job **pp = head, *prev = NULL; *pp;) {
		struct job *j = *pp;
		if (j->f != f) {
			prev = j;
			pp = &j->next;
			continue;
		}
		*pp = j->next;
		if (*tail == j)
			*tail = prev;
		if (j->warm)
			c->nwarm_jobs--;
		f->refs--;
		abandon(c, j, "the file was closed");
	}
}

void tfs_cfile_free(struct tfs_cfile *f)
{
	if (!f)
		return;
	struct tfs_cache *c = f->c;
	pthread_mutex_lock(&c->lock);
	/* Its queued prefetches are dropped, and the running ones (and the
	 * warm-up, which holds the file it walks) are waited for: they use
	 * the source that is about to go. At unmount, the stopped fetches have
	 * made them short. */
	drop_jobs(c, f, &c->jh, &c->jt);
	drop_jobs(c, f, &c->wh, &c->wt);
	pthread_cond_broadcast(&c->changed);
	pthread_cond_broadcast(&c->work);
	while (f->refs > 1)
		pthread_cond_wait(&c->changed, &c->lock);
	tfs_cache_file_unref(c, f);
	pthread_mutex_unlock(&c->lock);
}

void tfs_cfile_keep(struct tfs_cfile *f)
{
	struct tfs_cache *c = f->c;
	pthread_mutex_lock(&c->lock);
	f->keep = 1;
	pthread_mutex_unlock(&c->lock);
}

void tfs_cfile_chain(struct tfs_cfile *f, struct tfs_cfile *next)
{
	struct tfs_cache *c = f->c;
	pthread_mutex_lock(&c->lock);
	if (f != next && !f->next && !next->prev) {
		f->next = next;
		next->prev = f;
	}
	pthread_mutex_unlock(&c->lock);
}

int tfs_cfile_memo_get(struct tfs_cfile *f, const char *key, char *val, size_t cap)
{
	return f->lf ? f->c->lower->ops->memo_get(f->lf, key, val, cap) : 0;
}

void tfs_cfile_memo_put(struct tfs_cfile *f, const char *key, const char *val)
{
	if (f->lf)
		f->c->lower->ops->memo_put(f->lf, key, val);
}
