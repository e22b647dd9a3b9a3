/* A remote file for the block cache's unit tests (test_cache.c,
 * test_cache_disk.c), behind the fetch seam (tfs_fetch_fn): its bytes
 * are a pattern computed from the offset and a seed, so any byte a reader
 * is served can be checked; it counts its calls and the bytes and blocks
 * asked for, notes whether the reader's thread or another (a worker)
 * asked, and fails, delivers short or holds a call at a gate on demand.
 * Every wait in it and in the tests is bounded (WAIT_MS): a call held at
 * a closed gate fails by itself after it, and says so (timed_out). Beside
 * it: readers on threads of their own, frees on one (closed), and a
 * watchdog. Included once, by each test's one file (it includes
 * check.h). */
#ifndef TFS_TEST_CACHE_DOUBLE_H
#define TFS_TEST_CACHE_DOUBLE_H

#include <errno.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "sources/bstore.h"
#include "sources/cache.h"

#include "check.h"

#define BLK ((uint64_t)TFS_CACHE_BLOCK)
#define MiB (1ull << 20)
#define WAIT_MS 20000
#define GARBAGE 0xEE /* what a failed call leaves past what it delivered */

static inline uint64_t mix64(uint64_t x)
{
	x ^= x >> 33;
	x *= 0xff51afd7ed558ccdull;
	x ^= x >> 33;
	x *= 0xc4ceb9fe1a85ec53ull;
	return x ^ (x >> 33);
}

/* Bytes [off, off + len) of the file of this seed. */
static inline void pattern(uint64_t seed, uint64_t off, void *buf, size_t len)
{
	unsigned char *p = buf;
	for (size_t i = 0; i < len;) {
		uint64_t o = off + i, w = mix64((o >> 3) ^ (seed * 0x9e3779b97f4a7c15ull));
		for (unsigned k = (unsigned)(o & 7); k < 8 && i < len; k++, i++)
			p[i] = (unsigned char)(w >> (8 * k));
	}
}

/* Whether buf holds exactly those bytes. */
static inline int is_pattern(uint64_t seed, uint64_t off, const void *buf, size_t len)
{
	const unsigned char *p = buf;
	for (size_t i = 0; i < len;) {
		uint64_t o = off + i, w = mix64((o >> 3) ^ (seed * 0x9e3779b97f4a7c15ull));
		for (unsigned k = (unsigned)(o & 7); k < 8 && i < len; k++, i++)
			if (p[i] != (unsigned char)(w >> (8 * k)))
				return 0;
	}
	return 1;
}

static inline void nap_ms(unsigned ms)
{
	struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000l};
	nanosleep(&ts, NULL);
}

static inline int64_t now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000000000ll + ts.tv_nsec;
}

/* ok = expr, tried every millisecond for at most WAIT_MS. */
#define UNTIL(ok, expr)                                                                                      \
	do {                                                                                                 \
		for (unsigned ms_ = 0; !((ok) = (expr)) && ms_ < WAIT_MS; ms_++)                             \
			nap_ms(1);                                                                           \
	} while (0)

struct call {
	uint64_t off, len;
	int worker; /* not the reader's thread */
};

struct tf {
	pthread_mutex_t lock;
	pthread_cond_t cv;
	uint64_t seed, size, nblocks;
	pthread_t reader; /* calls from any other thread are a worker's */
	unsigned calls, worker_calls, ended;
	uint64_t bytes;
	unsigned char *asked; /* per block: how many calls asked for it */
	struct call log[512];
	unsigned nlog;
	/* Faults, for the calls to come. */
	int fail;      /* the next `fail` calls fail (TFS_ERR_IO); -1: every one */
	uint64_t cut;  /* bytes delivered (and told, progress) before the gate */
	int half;      /* deliver half, then TFS_ERR_SHORT, telling nothing */
	int gate;      /* calls wait while it is closed */
	unsigned held; /* calls waiting at the gate now */
	int stopped;   /* the fetches are stopped: every call fails at once */
	int timed_out; /* a call waited WAIT_MS at the gate */
	/* A file downloaded whole (tf_whole): where the last download began,
	 * and whether the bytes before it were the file's. */
	uint64_t resumed_at;
	int kept_wrong;
};

static inline void tf_init(struct tf *t, uint64_t seed, uint64_t size)
{
	memset(t, 0, sizeof *t);
	pthread_mutex_init(&t->lock, NULL);
	pthread_cond_init(&t->cv, NULL);
	t->seed = seed;
	t->size = size;
	t->nblocks = (size + BLK - 1) / BLK;
	t->asked = calloc(t->nblocks ? t->nblocks : 1, 1);
	t->reader = pthread_self();
}

static inline void tf_fini(struct tf *t)
{
	free(t->asked);
	pthread_cond_destroy(&t->cv);
	pthread_mutex_destroy(&t->lock);
}

/* Sets a field under the lock, waking the calls at the gate. */
#define TF_SET(t, field, v)                                                                                  \
	do {                                                                                                 \
		pthread_mutex_lock(&(t)->lock);                                                              \
		(t)->field = (v);                                                                            \
		pthread_cond_broadcast(&(t)->cv);                                                            \
		pthread_mutex_unlock(&(t)->lock);                                                            \
	} while (0)

static inline unsigned tf_get(struct tf *t, const unsigned *field)
{
	pthread_mutex_lock(&t->lock);
	unsigned v = *field;
	pthread_mutex_unlock(&t->lock);
	return v;
}
#define TF_GET(t, field) tf_get((t), &(t)->field)

static inline uint64_t tf_bytes(struct tf *t)
{
	pthread_mutex_lock(&t->lock);
	uint64_t v = t->bytes;
	pthread_mutex_unlock(&t->lock);
	return v;
}

/* The largest number of calls that asked for any one block. */
static inline unsigned tf_most_asked(struct tf *t)
{
	unsigned m = 0;
	pthread_mutex_lock(&t->lock);
	for (uint64_t b = 0; b < t->nblocks; b++)
		m = t->asked[b] > m ? t->asked[b] : m;
	pthread_mutex_unlock(&t->lock);
	return m;
}

/* Fills [from, to) of the call's range, spread over its buffers. */
static inline void fill(const struct tf *t, const struct tfs_iov *iov, unsigned niov, uint64_t off,
			uint64_t from, uint64_t to, int garbage)
{
	uint64_t at = 0;
	for (unsigned i = 0; i < niov && at < to; at += iov[i].len, i++) {
		uint64_t a = from > at ? from - at : 0, b = to - at < iov[i].len ? to - at : iov[i].len;
		if (a >= b)
			continue;
		if (garbage)
			memset((char *)iov[i].p + a, GARBAGE, b - a);
		else
			pattern(t->seed, off + at + a, (char *)iov[i].p + a, b - a);
	}
}

static inline tfs_err tf_fetch(void *ctx, const struct tfs_iov *iov, unsigned niov, uint64_t off,
			       uint64_t len, void (*progress)(void *arg, uint64_t n), void *arg)
{
	struct tf *t = ctx;
	pthread_mutex_lock(&t->lock);
	int worker = !pthread_equal(pthread_self(), t->reader);
	t->calls++;
	t->worker_calls += (unsigned)worker;
	t->bytes += len;
	if (t->nlog < sizeof t->log / sizeof t->log[0])
		t->log[t->nlog++] = (struct call){off, len, worker};
	for (uint64_t b = off / BLK; len && b <= (off + len - 1) / BLK && b < t->nblocks; b++)
		t->asked[b] += t->asked[b] < 255;
	int fail = t->fail != 0 || t->stopped, half = t->half;
	uint64_t cut = t->cut < len ? t->cut : len;
	if (t->fail > 0)
		t->fail--;
	pthread_mutex_unlock(&t->lock);

	if (half) {
		fill(t, iov, niov, off, 0, len / 2, 0);
		fill(t, iov, niov, off, len / 2, len, 1);
		pthread_mutex_lock(&t->lock);
		t->ended++;
		pthread_mutex_unlock(&t->lock);
		return TFS_ERR_SHORT;
	}
	if (cut) {
		fill(t, iov, niov, off, 0, cut, 0);
		if (progress)
			progress(arg, cut);
	}
	pthread_mutex_lock(&t->lock);
	struct timespec until;
	clock_gettime(CLOCK_REALTIME, &until);
	until.tv_sec += WAIT_MS / 1000;
	t->held++;
	pthread_cond_broadcast(&t->cv);
	while (t->gate && !t->stopped && !t->timed_out)
		if (pthread_cond_timedwait(&t->cv, &t->lock, &until) == ETIMEDOUT)
			t->timed_out = 1;
	t->held--;
	fail |= t->stopped || t->timed_out;
	pthread_mutex_unlock(&t->lock);
	fill(t, iov, niov, off, cut, len, fail);
	if (!fail && progress)
		progress(arg, len);
	pthread_mutex_lock(&t->lock);
	t->ended++;
	pthread_mutex_unlock(&t->lock);
	return fail ? TFS_ERR_IO : TFS_OK;
}

/* The same file for tfs_cwhole (a server that ignores ranges): fails the
 * next `fail` calls after `cut` bytes, telling them landed first. */
static inline tfs_err tf_whole(void *ctx, void *buf, uint64_t off, uint64_t len,
			       void (*progress)(void *arg, uint64_t n), void *arg, uint64_t *in_place,
			       struct tfs_diag *d)
{
	struct tf *t = ctx;
	char *p = buf;
	pthread_mutex_lock(&t->lock);
	t->calls++;
	t->bytes += len;
	if (t->nlog < sizeof t->log / sizeof t->log[0])
		t->log[t->nlog++] = (struct call){off, len, in_place != NULL};
	int fail = t->fail != 0 || t->stopped;
	uint64_t from = in_place ? *in_place : 0, end = fail && t->cut < len ? t->cut : len;
	if (t->fail > 0)
		t->fail--;
	t->resumed_at = from;
	t->kept_wrong |= !is_pattern(t->seed, off, p, from);
	pthread_mutex_unlock(&t->lock);
	for (uint64_t at = from; at < end;) {
		uint64_t n = end - at < BLK ? end - at : BLK;
		pattern(t->seed, off + at, p + at, n);
		at += n;
		if (in_place)
			*in_place = at;
		if (progress)
			progress(arg, at);
	}
	return fail ? tfs_fail(d, TFS_ERR_IO, "the answer was cut at byte %llu", (unsigned long long)end)
		    : TFS_OK;
}

/* A cache of mem bytes over `lower` (NULL: memory only), or NULL. */
static inline struct tfs_cache *cache_of(uint64_t mem, unsigned workers, uint64_t part,
					 struct tfs_bstore *lower, int warm)
{
	struct tfs_cache_cfg cfg = {.mem_bytes = mem,
				    .disk_bytes = lower ? lower->max : 0,
				    .workers = workers,
				    .part_bytes = part,
				    .warm = warm};
	struct tfs_cache *c = NULL;
	struct tfs_diag d;
	if (tfs_cache_new(&cfg, lower, &c, &d) != TFS_OK)
		return NULL;
	return c;
}

static inline uint64_t c_hits(struct tfs_cache *c)
{
	uint64_t h, m, dh;
	tfs_cache_counters(c, &h, &m, &dh);
	return h;
}

static inline uint64_t c_misses(struct tfs_cache *c)
{
	uint64_t h, m, dh;
	tfs_cache_counters(c, &h, &m, &dh);
	return m;
}

static inline uint64_t c_disk_hits(struct tfs_cache *c)
{
	uint64_t h, m, dh;
	tfs_cache_counters(c, &h, &m, &dh);
	return dh;
}

/* What a read of [off, off + len) of f returns; *right: whether its
 * bytes are the file's. */
static inline tfs_err read_at(struct tfs_cfile *f, struct tf *t, uint64_t off, size_t len, int *right)
{
	char *buf = malloc(len ? len : 1);
	struct tfs_diag d;
	tfs_err e = buf ? tfs_cfile_read(f, buf, len, off, t->size, &d) : TFS_ERR_NOMEM;
	if (right)
		*right = !e && is_pattern(t->seed, off, buf, len);
	free(buf);
	return e;
}

/* 1 when a read of [off, off + len) returns the file's bytes. */
static inline int read_ok(struct tfs_cfile *f, struct tf *t, uint64_t off, size_t len)
{
	int right = 0;
	read_at(f, t, off, len, &right);
	return right;
}

/* A reader on a thread of its own: one read, or with `to`, reads of len
 * from off to there. */
struct reader {
	pthread_t th;
	struct tfs_cfile *f;
	struct tf *t;
	uint64_t off, to; /* to: a sequential reader's end, reading len at a time */
	size_t len;
	tfs_err e;
	int right, done;
};

static inline void *reader_main(void *arg)
{
	struct reader *r = arg;
	do {
		r->e = read_at(r->f, r->t, r->off, r->len, &r->right);
		r->off += r->len;
	} while (!r->e && r->right && r->off < r->to);
	__atomic_store_n(&r->done, 1, __ATOMIC_RELEASE);
	return NULL;
}

static inline void reader_start(struct reader *r, struct tfs_cfile *f, struct tf *t, uint64_t off, size_t len,
				uint64_t to)
{
	*r = (struct reader){.f = f, .t = t, .off = off, .to = to, .len = len};
	if (pthread_create(&r->th, NULL, reader_main, r) != 0)
		r->done = -1;
}

static inline int readers_done(struct reader *r, int n)
{
	for (int i = 0; i < n; i++)
		if (!__atomic_load_n(&r[i].done, __ATOMIC_ACQUIRE))
			return 0;
	return 1;
}

static inline void reader_join(struct reader *r)
{
	if (r->done >= 0)
		pthread_join(r->th, NULL);
}

/* Frees two files and their cache on a thread of its own, so that a free
 * that never returns fails a check instead of hanging the test; a reader
 * still in flight (a free wakes it) returns before the cache goes. */
struct closer {
	struct tfs_cache *c;
	struct tfs_cfile *f, *g;
	struct reader *r;
	int done;
};

static inline void *close_main(void *arg)
{
	struct closer *k = arg;
	int ok = 1;
	tfs_cfile_free(k->f);
	tfs_cfile_free(k->g);
	if (k->r)
		UNTIL(ok, readers_done(k->r, 1));
	if (ok)
		tfs_cache_free(k->c);
	__atomic_store_n(&k->done, ok ? 1 : 2, __ATOMIC_RELEASE);
	return NULL;
}

/* 1 when all was freed. */
static inline int closed(struct tfs_cache *c, struct tfs_cfile *f, struct tfs_cfile *g, struct reader *r)
{
	static struct closer k; /* (outlives a closer that never returns) */
	pthread_t th;
	int ok = 0;
	k = (struct closer){c, f, g, r, 0};
	if (pthread_create(&th, NULL, close_main, &k) != 0)
		return 0;
	UNTIL(ok, __atomic_load_n(&k.done, __ATOMIC_ACQUIRE));
	if (ok)
		pthread_join(th, NULL);
	return ok && k.done == 1;
}

/* The test's last bound: a wait inside the cache that never ends (a
 * block left loading for no one) ends the test, failed, naming the group
 * it was in, instead of hanging it. */
static inline void *watchdog_main(void *arg)
{
	unsigned seconds = *(const unsigned *)arg;
	for (unsigned s = 0; s < seconds; s++)
		nap_ms(1000);
	const char *g = __atomic_load_n(&current, __ATOMIC_ACQUIRE);
	fprintf(stderr, "FAIL [%s]: still running after %u s: stuck\n", g ? g : "", seconds);
	printf("%d passed, %d failed\n", __atomic_load_n(&passed, __ATOMIC_RELAXED),
	       __atomic_load_n(&failed, __ATOMIC_RELAXED) + 1);
	fflush(stdout);
	_exit(1);
}

static inline void watchdog_start(unsigned seconds)
{
	static unsigned s;
	pthread_t th;
	s = seconds;
	if (pthread_create(&th, NULL, watchdog_main, &s) == 0)
		pthread_detach(th);
}

static uint64_t rnd_state = 0x853c49e6748fea9bull;
static inline uint64_t rnd(uint64_t n)
{
	rnd_state = rnd_state * 6364136223846793005ull + 1442695040888963407ull;
	return n ? (rnd_state >> 17) % n : 0;
}

#endif
