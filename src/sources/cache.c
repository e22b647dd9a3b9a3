#include "sources/cache.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

#include "core/hash.h"

#include "sources/cache_i.h"

struct tfs_cache_state tfs_cache_g = {
	.lock = PTHREAD_MUTEX_INITIALIZER,
	.changed = PTHREAD_COND_INITIALIZER,
	.work = PTHREAD_COND_INITIALIZER,
};

/* ---- configuration ---- */

tfs_err tfs_cache_configure(const struct tfs_opts *o, struct tfs_diag *d)
{
	const char *cs = tfs_opts_get(o, "cache_size"), *dir = tfs_opts_get(o, "cache_dir"),
		   *cm = tfs_opts_get(o, "cache_max"), *cc = tfs_opts_get(o, "concurrency"),
		   *ps = tfs_opts_get(o, "part_size");
	uint64_t mem = TFS_CACHE_DEFAULT_MEM, disk = TFS_CACHE_DEFAULT_DISK, part = RUN_DEFAULT * B,
		 conc = WORKERS_DEFAULT;
	int warm = tfs_opts_get(o, "warm") != NULL;
	if (cs && (tfs_opt_number(cs, 1, UINT64_MAX, &mem) || mem < 4 * B))
		return tfs_fail(d, TFS_ERR_INVAL,
				"-o cache_size= takes a size of at least 1M (as 512M or 2G), not '%s'", cs);
	if (cm && tfs_opt_number(cm, 1, UINT64_MAX, &disk))
		return tfs_fail(d, TFS_ERR_INVAL, "-o cache_max= takes a size (as 10G), not '%s'", cm);
	if (cc && (tfs_opt_number(cc, 0, WORKERS_MAX, &conc) || conc < 1))
		return tfs_fail(d, TFS_ERR_INVAL,
				"-o concurrency= takes a number of requests from 1 to %d, not '%s'",
				WORKERS_MAX, cc);
	if (ps && (tfs_opt_number(ps, 1, RUN_MAX * B, &part) || part < B || part % B))
		return tfs_fail(d, TFS_ERR_INVAL,
				"-o part_size= takes a multiple of 256K from 256K to 64M (as 8M), not '%s'",
				ps);
	if (warm && !(dir && *dir))
		return tfs_fail(d, TFS_ERR_INVAL,
				"-o warm needs -o cache_dir=DIR: the warm-up fills the disk cache");
	pthread_mutex_lock(&C.lock);
	if (C.configured) {
		pthread_mutex_unlock(&C.lock);
		return TFS_OK;
	}
	C.mem = mem;
	C.disk_max = disk;
	C.want_workers = (unsigned)conc;
	C.run = (unsigned)(part / B);
	C.allowed = ALLOWED_START < C.want_workers ? ALLOWED_START : C.want_workers;
	/* What a stream keeps fetched ahead: every request in flight a part,
	 * within half the memory budget (the rest is for what was fetched
	 * and is being read). */
	C.window_max = conc * part < mem / 2 ? conc * part : mem / 2;
	/* Blocks served from the disk cache hold their files open: half of
	 * what the process may open, the rest for connections and FUSE. */
	struct rlimit rl = {1024, 1024};
	if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < rl.rlim_max && rl.rlim_cur < 65536) {
		rl.rlim_cur = rl.rlim_max < 65536 ? rl.rlim_max : 65536;
		setrlimit(RLIMIT_NOFILE, &rl);
		getrlimit(RLIMIT_NOFILE, &rl);
	}
	C.fds_max = rl.rlim_cur == RLIM_INFINITY || rl.rlim_cur / 2 > mem / B ? (unsigned)(mem / B)
									      : (unsigned)(rl.rlim_cur / 2);
	C.warm = warm;
	C.nslots = 64;
	while (C.nslots < 2 * (mem / B + 64))
		C.nslots *= 2;
	C.tab = calloc(C.nslots, sizeof *C.tab);
	C.lru.lnext = C.lru.lprev = &C.lru;
	tfs_err e = C.tab ? TFS_OK : tfs_fail(d, TFS_ERR_NOMEM, "out of memory");
	if (!e && dir && *dir)
		e = tfs_cache_disk_open(dir, d);
	C.configured = !e;
	pthread_mutex_unlock(&C.lock);
	return e;
}

/* ---- the in-memory table (all under C.lock) ---- */

static size_t slot_of(const struct tfs_cfile *f, uint64_t idx)
{
	uint64_t k[2] = {(uint64_t)(uintptr_t)f, idx};
	return tfs_hash(k, sizeof k, 0x6a09e667f3bcc909ull) & (C.nslots - 1);
}

struct blk *tfs_cache_find(const struct tfs_cfile *f, uint64_t idx)
{
	for (struct blk *b = C.tab[slot_of(f, idx)]; b; b = b->hnext)
		if (b->f == f && b->idx == idx)
			return b;
	return NULL;
}

void tfs_cache_table_remove(struct blk *b)
{
	struct blk **pp = &C.tab[slot_of(b->f, b->idx)];
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

void tfs_cache_lru_front(struct blk *b)
{
	lru_unlink(b);
	b->lnext = C.lru.lnext;
	b->lprev = &C.lru;
	C.lru.lnext->lprev = b;
	C.lru.lnext = b;
}

#define CHUNK (32 * B)

static char *buf_get(void)
{
	if (C.npool) {
		C.used -= B;
		return C.pool[--C.npool];
	}
	if (C.chunk == C.chunk_end) {
		char *c = aligned_alloc(2u << 20, CHUNK);
		if (!c)
			return NULL;
		madvise(c, CHUNK, MADV_HUGEPAGE);
		C.chunk = c;
		C.chunk_end = c + CHUNK;
	}
	char *p = C.chunk;
	C.chunk += B;
	return p;
}

/* Buffers are never given back (they are parts of chunks); the budget
 * bounds how many there are, as readers in flight may go over it. */
static void buf_put(char *p)
{
	if (C.npool == C.cpool) {
		size_t nc = C.cpool ? C.cpool * 2 : 64;
		char **q = realloc(C.pool, nc * sizeof *q);
		if (!q)
			return; /* lost to the pool, not freed: it is part of a chunk */
		C.pool = q;
		C.cpool = nc;
	}
	C.pool[C.npool++] = p;
	C.used += B;
}

void tfs_cache_blk_free(struct blk *b)
{
	lru_unlink(b);
	C.used -= B;
	if (b->data) {
		buf_put(b->data);
	} else {
		close(b->fd);
		__atomic_sub_fetch(&C.nfds, 1, __ATOMIC_RELAXED);
	}
	free(b);
}

void tfs_cache_unpin(struct blk *b)
{
	if (--b->pins == 0 && !b->in_table)
		tfs_cache_blk_free(b);
}

/* A block its readers have read, whose bytes the kernel's page cache
 * holds now (unless its file's readers keep no copy). */
static int read_through(const struct blk *b)
{
	return b->state == READY && !b->unread && b->served >= b->len && !b->f->keep;
}

/* Room for one more block (need is B). A kept buffer is room already.
 * Then the least recently used block that has been read and that nobody
 * holds gives its buffer: the kernel's page cache keeps what was read
 * (files are opened with keep_cache), so this cache is mostly for what
 * is fetched ahead and not read yet, and a stream recycles its own
 * buffers instead of filling the whole budget with fresh pages (zeroing
 * them cost a quarter of a sequential read's time). Only then does the
 * cache grow, up to the budget; past it, a reader (not a prefetch) may
 * push out prefetched blocks nobody read: many readers would otherwise
 * throw away each other's windows. A file whose readers keep no copy
 * (tfs_cfile_keep: direct I/O, generated files) has no page cache behind
 * it: what was read of it is kept, as any other block, for the next
 * reader. Returns whether there is room. */
int tfs_cache_make_room(uint64_t need, int for_prefetch)
{
	/* (Blocks served from their files count too, though their buffers
	 * went back to the pool: that bounds how many files are open.) */
	if (need <= B && C.npool && C.used <= C.mem)
		return 1;
	int looked = 0;
	for (struct blk *b = C.lru.lprev; b != &C.lru && looked < 64; b = b->lprev, looked++) {
		if (b->pins == 0 && (b->state == FAILED || read_through(b))) {
			tfs_cache_table_remove(b);
			tfs_cache_blk_free(b);
			return 1;
		}
	}
	if (C.used + need <= C.mem)
		return 1;
	for (struct blk *b = C.lru.lprev; b != &C.lru && C.used + need > C.mem;) {
		struct blk *prev = b->lprev;
		if (b->pins == 0 && b->state != LOADING && !(for_prefetch && b->unread)) {
			tfs_cache_table_remove(b);
			tfs_cache_blk_free(b);
		}
		b = prev;
	}
	return C.used + need <= C.mem;
}

/* A new LOADING block, pinned once for whoever will load it. */
struct blk *tfs_cache_blk_new(struct tfs_cfile *f, uint64_t idx)
{
	uint64_t len = f->size - idx * B < B ? f->size - idx * B : B;
	struct blk *b = calloc(1, sizeof *b);
	if (!b)
		return NULL;
	b->data = buf_get();
	if (!b->data) {
		free(b);
		return NULL;
	}
	b->fd = -1;
	b->f = f;
	b->idx = idx;
	b->len = (uint32_t)len;
	b->state = LOADING;
	b->pins = 1;
	b->in_table = 1;
	size_t s = slot_of(f, idx);
	b->hnext = C.tab[s];
	C.tab[s] = b;
	C.used += B;
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
	struct blk **b;
	uint64_t n, published;
	uint64_t end; /* bytes of the published blocks */
};

static void landed(void *arg, uint64_t got)
{
	struct landing *l = arg;
	uint64_t k = l->published, end = l->end;
	/* A byte past it must have come: the last block waits for the
	 * answer to end well (one that runs on past its range, or whose
	 * length lied, fails there, and serves none of its last block). */
	while (k < l->n && end + l->b[k]->len < got)
		end += l->b[k++]->len;
	if (k == l->published)
		return;
	pthread_mutex_lock(&C.lock);
	for (uint64_t m = l->published; m < k; m++) {
		l->b[m]->state = READY;
		tfs_cache_lru_front(l->b[m]);
	}
	pthread_cond_broadcast(&C.changed);
	pthread_mutex_unlock(&C.lock);
	l->published = k;
	l->end = end;
}

/* Loads blocks[0..n) (consecutive, LOADING, pinned by the caller): each
 * from the disk cache when it has it, the rest with one request per
 * stretch of consecutive blocks. Marks them READY or FAILED, then drops
 * the caller's pins. */
void tfs_cache_load(struct tfs_cfile *f, struct blk **blocks, uint64_t n, int durable)
{
	struct tfs_iov *iov = malloc((n ? n : 1) * sizeof *iov);
	char *from_disk = calloc(n ? n : 1, 1);
	for (uint64_t i = 0, from = 0; C.dir && from_disk && i < n; i++) {
		from_disk[i] = (char)tfs_cache_disk_read(f, blocks[i]);
		if (from_disk[i])
			__atomic_fetch_add(&C.disk_hits, 1, __ATOMIC_RELAXED);
		if (from_disk[i] && i + 1 < n)
			continue;
		/* The blocks read from the disk so far are served at once, in
		 * one go (a lock and a wake-up per block cost a disk cache hit
		 * a fifth of its speed): a reader waiting for one of them need
		 * not wait for the network. */
		pthread_mutex_lock(&C.lock);
		for (; from <= i; from++) {
			struct blk *b = blocks[from];
			if (!from_disk[from])
				continue;
			if (b->fd >= 0) {
				/* Served from its file: the buffer is free, the
				 * block still counts in the budget. */
				buf_put(b->data);
				b->data = NULL;
			}
			b->state = READY;
			tfs_cache_lru_front(b);
		}
		pthread_cond_broadcast(&C.changed);
		pthread_mutex_unlock(&C.lock);
	}
	uint64_t i = 0;
	while (i < n) {
		if (from_disk && from_disk[i]) {
			i++;
			continue;
		}
		uint64_t j = i;
		while (j < n && !(from_disk && from_disk[j]))
			j++;
		uint64_t len = 0;
		for (uint64_t k = i; k < j; k++) {
			iov[k - i].p = blocks[k]->data;
			iov[k - i].len = blocks[k]->len;
			len += blocks[k]->len;
		}
		struct landing l = {blocks + i, j - i, 0, 0};
		tfs_err e =
			iov ? f->fetch(f->ctx, iov, (unsigned)(j - i), blocks[i]->idx * B, len, landed, &l)
			    : TFS_ERR_NOMEM;
		/* A block served as it landed stays served: its bytes were
		 * whole and of the pinned version. */
		for (uint64_t k = i + l.published; k < j; k++) {
			blocks[k]->err = e;
			if (e)
				snprintf(blocks[k]->msg, sizeof blocks[k]->msg, "%s", tfs_err_str(e));
		}
		i = j;
	}
	pthread_mutex_lock(&C.lock);
	for (uint64_t k = 0; k < n; k++) {
		struct blk *b = blocks[k];
		b->state = b->err ? FAILED : READY;
		tfs_cache_lru_front(b); /* a failed one too: make_room may drop it */
	}
	pthread_cond_broadcast(&C.changed);
	pthread_mutex_unlock(&C.lock);
	for (uint64_t k = 0; C.dir && k < n; k++)
		if (!blocks[k]->err && !(from_disk && from_disk[k]))
			tfs_cache_disk_write(f, blocks[k], durable);
	free(from_disk);
	free(iov);
	pthread_mutex_lock(&C.lock);
	for (uint64_t k = 0; k < n; k++)
		tfs_cache_unpin(blocks[k]);
	pthread_mutex_unlock(&C.lock);
}

/* The last reference gone (the owner's, and every prefetch job's): its
 * blocks leave the table before the file goes, so that no block can ever
 * be taken for a later file's at the same address. */
void tfs_cache_file_unref(struct tfs_cfile *f)
{
	if (--f->refs)
		return;
	for (size_t s = 0; s < C.nslots; s++) {
		struct blk **pp = &C.tab[s];
		while (*pp) {
			struct blk *b = *pp;
			if (b->f == f) {
				*pp = b->hnext;
				b->in_table = 0;
				if (b->pins == 0)
					tfs_cache_blk_free(b);
			} else {
				pp = &b->hnext;
			}
		}
	}
	if (f->prev)
		f->prev->next = NULL;
	if (f->next)
		f->next->prev = NULL;
	for (struct tfs_cfile **pp = &C.files; *pp; pp = &(*pp)->all_next)
		if (*pp == f) {
			*pp = f->all_next;
			break;
		}
	/* (An index read at mount and closed is no part of the warm-up.) */
	C.warm_total -= f->size;
	C.warm_done -= f->warmed;
	free(f->key);
	free(f->memo);
	free(f->memo_slot);
	pthread_mutex_destroy(&f->memo_lock);
	free(f);
}

/* The next job: read-ahead first, the warm-up's when none waits. */
static struct job *take_job(void)
{
	struct job *j = C.jh;
	if (j) {
		C.jh = j->next;
		if (!C.jh)
			C.jt = NULL;
	} else if ((j = C.wh)) {
		C.wh = j->next;
		if (!C.wh)
			C.wt = NULL;
	}
	return j;
}

static void *worker(void *arg)
{
	(void)arg;
	struct blk *blocks[RUN_MAX];
	pthread_mutex_lock(&C.lock);
	for (;;) {
		while ((!(C.jh || C.wh) || C.active >= C.allowed) && !tfs_http_aborted())
			pthread_cond_wait(&C.work, &C.lock);
		if (tfs_http_aborted() && !(C.jh || C.wh))
			break;
		struct job *j = take_job();
		C.active++;
		/* Pinned for the worker too: tfs_cache_load() lets go of the job's
		 * pins, and the blocks are looked at again below. */
		for (uint64_t k = 0; k < j->n; k++) {
			blocks[k] = tfs_cache_find(j->f, j->first + k);
			blocks[k]->pins++;
		}
		uint64_t retried = tfs_http_retried();
		pthread_mutex_unlock(&C.lock);
		tfs_cache_load(j->f, blocks, j->n, j->warm);
		pthread_mutex_lock(&C.lock);
		C.active--;
		int bad = tfs_http_retried() != retried;
		for (uint64_t k = 0; k < j->n; k++) {
			bad |= blocks[k]->state == FAILED;
			if (j->warm) {
				/* On disk now (or failed): its memory may be reused. */
				blocks[k]->unread = 0;
				blocks[k]->served = blocks[k]->len;
				C.warm_done += blocks[k]->len;
				j->f->warmed += blocks[k]->len;
			}
			tfs_cache_unpin(blocks[k]);
		}
		/* Additive increase, multiplicative decrease, as TCP and the
		 * S3 clients do: a server that asks to slow down is heard. */
		if (bad)
			C.allowed = C.allowed > 1 ? C.allowed / 2 : 1;
		else if (C.allowed < C.nworkers)
			C.allowed++;
		if (j->warm)
			C.nwarm_jobs--; /* queued or running */
		tfs_cache_file_unref(j->f);
		pthread_cond_broadcast(&C.changed); /* tfs_cfile_free may wait */
		/* This job's place, and the one the limit may have grown by:
		 * waking every idle worker for them (32 by default) cost a
		 * disk cache hit a tenth of its speed in wake-ups. */
		if (C.jh || C.wh) {
			pthread_cond_signal(&C.work);
			pthread_cond_signal(&C.work);
		}
		free(j);
	}
	pthread_mutex_unlock(&C.lock);
	return NULL;
}

void tfs_cache_start(void)
{
	pthread_mutex_lock(&C.lock);
	if (!C.started && C.configured) {
		C.started = 1;
		for (unsigned i = 0; i < C.want_workers; i++) {
			pthread_t t;
			if (pthread_create(&t, NULL, worker, NULL) == 0) {
				pthread_detach(t);
				C.nworkers++;
			}
		}
		pthread_t t;
		if (C.warm && C.dir && pthread_create(&t, NULL, tfs_cache_warm_up, NULL) == 0)
			pthread_detach(t);
	}
	pthread_mutex_unlock(&C.lock);
}

/* Queues a job of f's (its blocks made and pinned) for the workers:
 * the read-ahead's queue, or the warm-up's. */
void tfs_cache_enqueue(struct tfs_cfile *f, struct job *j, int warm)
{
	struct job **head = warm ? &C.wh : &C.jh, **tail = warm ? &C.wt : &C.jt;
	j->f = f;
	j->warm = warm;
	f->refs++;
	if (*tail)
		(*tail)->next = j;
	else
		*head = j;
	*tail = j;
	C.nwarm_jobs += (unsigned)warm;
	pthread_cond_signal(&C.work);
}

struct tfs_cfile *tfs_cfile_new(const char *key, uint64_t size, tfs_fetch_fn fetch, void *ctx)
{
	struct tfs_cfile *f = calloc(1, sizeof *f);
	if (!f || !(f->key = strdup(key))) {
		free(f);
		return NULL;
	}
	f->size = size;
	f->nblocks = (size + B - 1) / B;
	f->fetch = fetch;
	f->ctx = ctx;
	f->refs = 1;
	pthread_mutex_init(&f->memo_lock, NULL);
	uint64_t h1 = tfs_hash(key, strlen(key), DISK_SEED), h2 = tfs_hash(key, strlen(key), ~DISK_SEED);
	snprintf(f->hex, sizeof f->hex, "%016llx%016llx", (unsigned long long)h1, (unsigned long long)h2);
	pthread_mutex_lock(&C.lock);
	struct tfs_cfile **pp = &C.files;
	while (*pp)
		pp = &(*pp)->all_next;
	*pp = f;
	C.warm_total += size;
	pthread_mutex_unlock(&C.lock);
	return f;
}

/* Drops f's jobs from one queue: their blocks fail, for no one. */
static void drop_jobs(struct tfs_cfile *f, struct job **head, struct job **tail)
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
		for (uint64_t k = 0; k < j->n; k++) {
			struct blk *b = tfs_cache_find(f, j->first + k);
			if (!b)
				continue;
			b->state = FAILED;
			b->err = TFS_ERR_IO;
			tfs_cache_table_remove(b);
			tfs_cache_unpin(b);
		}
		if (j->warm)
			C.nwarm_jobs--;
		f->refs--;
		free(j);
	}
}

void tfs_cfile_free(struct tfs_cfile *f)
{
	if (!f)
		return;
	pthread_mutex_lock(&C.lock);
	/* Its queued prefetches are dropped, and the running ones (and the
	 * warm-up, which holds the file it walks) are waited for: they use
	 * the source that is about to go. At unmount, tfs_http_abort() has
	 * made them short. */
	drop_jobs(f, &C.jh, &C.jt);
	drop_jobs(f, &C.wh, &C.wt);
	pthread_cond_broadcast(&C.changed);
	pthread_cond_broadcast(&C.work);
	while (f->refs > 1)
		pthread_cond_wait(&C.changed, &C.lock);
	tfs_cache_file_unref(f);
	pthread_mutex_unlock(&C.lock);
}

void tfs_cfile_keep(struct tfs_cfile *f)
{
	pthread_mutex_lock(&C.lock);
	f->keep = 1;
	pthread_mutex_unlock(&C.lock);
}

void tfs_cfile_chain(struct tfs_cfile *f, struct tfs_cfile *next)
{
	pthread_mutex_lock(&C.lock);
	if (f != next && !f->next && !next->prev) {
		f->next = next;
		next->prev = f;
	}
	pthread_mutex_unlock(&C.lock);
}
