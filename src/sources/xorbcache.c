#include "sources/xorbcache.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <unistd.h>

#define XXH_STATIC_LINKING_ONLY /* a streaming state on the stack */
#include <xxhash.h>
#include <xxh_x86dispatch.h>

#include "compute/xetchunk.h"
#include "sources/cachedir.h"
#include "core/table.h"

#define REC 64u
#define CHUNKS_MAX 65536u /* the records fit before the first slot */
#define DATA0 ((uint64_t)CHUNKS_MAX * REC)
#define SLOT ((uint64_t)TFS_XET_CHUNK_MAX)
#define SEED 0x9e3779b97f4a7c15ull

struct rec {
	uint32_t len; /* 0: not held */
	uint32_t idx;
	uint64_t sum; /* XXH3 of the chunk's bytes */
	uint8_t hash[TFS_XET_HASH_LEN];
	uint32_t hashed; /* 1: hash holds its Xet hash */
	uint32_t pad;
	uint64_t self; /* XXH3 of the fields above */
};
_Static_assert(sizeof(struct rec) == REC, "a record is 64 bytes");

struct tfs_xorbcache {
	pthread_mutex_t lock;
	char *top; /* DIR/tensorfs-v1: what cache_max bounds */
	char *dir; /* DIR/tensorfs-v1/xet */
	uint64_t max, used, written;
	int evicting;
};

/* A xorb's seed: records and slots of another xorb's file, or of
 * another chunk, never check out here. */
static uint64_t seed_of(const uint8_t xorb[TFS_XET_HASH_LEN], uint32_t c)
{
	return XXH3_64bits_withSeed(xorb, TFS_XET_HASH_LEN, SEED) ^ ((uint64_t)c * 0xff51afd7ed558ccdull);
}

static uint64_t rec_sum(const struct rec *r, uint64_t seed)
{
	return XXH3_64bits_withSeed(r, offsetof(struct rec, self), seed);
}

static void xorb_path(const struct tfs_xorbcache *x, const uint8_t xorb[TFS_XET_HASH_LEN], char *out,
		      size_t n, int dir_only)
{
	char hex[TFS_XET_HEX_LEN + 1];
	tfs_xet_hash_hex(xorb, hex);
	if (dir_only)
		snprintf(out, n, "%s/%.2s", x->dir, hex);
	else
		snprintf(out, n, "%s/%.2s/%s", x->dir, hex, hex);
}

/* A xorb's file: a regular file of the user's, opened without blocking
 * (a FIFO or a device in its place is refused, never waited on). */
static int open_xorb(const char *path, int flags)
{
	struct stat st;
	int fd = open(path, flags | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK, 0600);
	if (fd >= 0 && (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode) || st.st_uid != geteuid())) {
		close(fd);
		return -1;
	}
	return fd;
}

/* ---- the room it takes ---- */

/* Over the limit: the oldest files of the whole cache directory go (xorbs
 * and the block cache's blocks alike) until 90% of it is used, measured
 * again each time (other mounts share it), one thread at a time. */
static void evict(struct tfs_xorbcache *x)
{
	pthread_mutex_lock(&x->lock);
	if (x->evicting) {
		pthread_mutex_unlock(&x->lock);
		return;
	}
	x->evicting = 1;
	for (int pass = 0; pass < 4 && x->used > x->max; pass++) {
		uint64_t written = x->written;
		pthread_mutex_unlock(&x->lock);
		uint64_t measured = tfs_cachedir_trim(x->top, 3, x->max / 10 * 9);
		pthread_mutex_lock(&x->lock);
		x->used = measured + (x->written - written);
	}
	x->evicting = 0;
	pthread_mutex_unlock(&x->lock);
}

/* ---- reading ---- */

static int read_rec(int fd, const uint8_t xorb[TFS_XET_HASH_LEN], uint32_t c, struct rec *r)
{
	return pread(fd, r, REC, (off_t)c * REC) == (ssize_t)REC && r->len && r->len <= TFS_XET_CHUNK_MAX &&
	       r->idx == c && r->self == rec_sum(r, seed_of(xorb, c));
}

unsigned tfs_xorbcache_index(struct tfs_xorbcache *x, const uint8_t xorb[TFS_XET_HASH_LEN], uint32_t a,
			     uint32_t b, uint32_t *lens, uint8_t (*hashes)[TFS_XET_HASH_LEN], uint8_t *has)
{
	char path[4096];
	unsigned held = 0;
	memset(lens, 0, (b - a) * sizeof *lens);
	memset(has, 0, b - a);
	xorb_path(x, xorb, path, sizeof path, 0);
	int fd = b <= CHUNKS_MAX ? open_xorb(path, O_RDONLY) : -1;
	if (fd < 0)
		return 0;
	struct rec buf[64];
	for (uint32_t c = a; c < b;) {
		uint32_t n = b - c < 64 ? b - c : 64;
		ssize_t got = pread(fd, buf, n * REC, (off_t)c * REC);
		if (got < (ssize_t)REC)
			break;
		n = (uint32_t)got / REC;
		for (uint32_t i = 0; i < n; i++) {
			const struct rec *r = &buf[i];
			if (!r->len || r->len > TFS_XET_CHUNK_MAX || r->idx != c + i ||
			    r->self != rec_sum(r, seed_of(xorb, c + i)))
				continue;
			lens[c + i - a] = r->len;
			if (r->hashed == 1) {
				memcpy(hashes[c + i - a], r->hash, TFS_XET_HASH_LEN);
				has[c + i - a] = 1;
			}
			held++;
		}
		c += n;
	}
	close(fd);
	return held;
}

int tfs_xorbcache_open_xorb(struct tfs_xorbcache *x, const uint8_t xorb[TFS_XET_HASH_LEN])
{
	char path[4096];
	xorb_path(x, xorb, path, sizeof path, 0);
	int fd = open_xorb(path, O_RDWR | O_NOATIME);
	if (fd < 0 && errno == EPERM)
		fd = open_xorb(path, O_RDWR);
	return fd;
}

int tfs_xorbcache_get(struct tfs_xorbcache *x, int fd, const uint8_t xorb[TFS_XET_HASH_LEN], uint32_t c,
		      uint32_t len, uint8_t *buf)
{
	struct iovec v = {buf, len};
	return tfs_xorbcache_getv(x, fd, xorb, c, len, &v, 1);
}

/* The checksum of len bytes in the pieces v[0..n). */
static uint64_t sum_of(const struct iovec *v, int n, uint64_t seed)
{
	if (n == 1)
		return XXH3_64bits_withSeed(v[0].iov_base, v[0].iov_len, seed);
	XXH3_state_t st;
	XXH3_64bits_reset_withSeed(&st, seed);
	for (int i = 0; i < n; i++)
		XXH3_64bits_update(&st, v[i].iov_base, v[i].iov_len);
	return XXH3_64bits_digest(&st);
}

int tfs_xorbcache_getv(struct tfs_xorbcache *x, int fd, const uint8_t xorb[TFS_XET_HASH_LEN], uint32_t c,
		       uint32_t len, const struct iovec *v, int n)
{
	struct rec r;
	(void)x;
	if (fd < 0 || c >= CHUNKS_MAX)
		return 0;
	if (!read_rec(fd, xorb, c, &r) || r.len != len)
		return 0;
	int ok = preadv(fd, v, n, (off_t)(DATA0 + c * SLOT)) == (ssize_t)len &&
		 sum_of(v, n, seed_of(xorb, c)) == r.sum;
	if (!ok) {
		/* Torn, damaged, or written over by another mount: gone, and
		 * fetched again. */
		static const struct rec zero;
		if (pwrite(fd, &zero, REC, (off_t)c * REC) != (ssize_t)REC)
			(void)0;
	}
	return ok;
}

void tfs_xorbcache_close_xorb(int fd)
{
	if (fd < 0)
		return;
	futimens(fd, NULL); /* its age for the eviction order */
	close(fd);
}

/* ---- writing ---- */

static int mkdir_own(const char *path)
{
	struct stat st;
	if (mkdir(path, 0700) != 0 && errno != EEXIST)
		return -1;
	errno = 0; /* (not "File exists": the message says what is wrong) */
	return lstat(path, &st) == 0 && S_ISDIR(st.st_mode) && st.st_uid == geteuid() &&
			       !(st.st_mode & (S_IWGRP | S_IWOTH))
		       ? 0
		       : -1;
}

void tfs_xorbcache_put(struct tfs_xorbcache *x, const uint8_t xorb[TFS_XET_HASH_LEN], uint32_t c, uint32_t n,
		       const uint32_t *lens, const uint8_t *const *data,
		       const uint8_t (*hashes)[TFS_XET_HASH_LEN])
{
	char path[4096];
	if (c >= CHUNKS_MAX || n > CHUNKS_MAX - c)
		return;
	xorb_path(x, xorb, path, sizeof path, 1);
	if (mkdir_own(path) != 0)
		return;
	xorb_path(x, xorb, path, sizeof path, 0);
	int fd = open_xorb(path, O_RDWR | O_CREAT);
	if (fd < 0)
		return;
	uint64_t wrote = 0;
	for (uint32_t i = 0; i < n; i++) {
		struct rec r;
		memset(&r, 0, sizeof r);
		r.len = lens[i];
		r.idx = c + i;
		r.sum = XXH3_64bits_withSeed(data[i], lens[i], seed_of(xorb, c + i));
		if (hashes) {
			memcpy(r.hash, hashes[i], TFS_XET_HASH_LEN);
			r.hashed = 1;
		}
		r.self = rec_sum(&r, seed_of(xorb, c + i));
		/* The bytes first, then the record that vouches for them;
		 * never synced: a crash leaves a record whose bytes do not
		 * check out, which a read drops. */
		if (pwrite(fd, data[i], lens[i], (off_t)(DATA0 + (uint64_t)(c + i) * SLOT)) !=
			    (ssize_t)lens[i] ||
		    pwrite(fd, &r, REC, (off_t)(c + i) * REC) != (ssize_t)REC)
			break;
		wrote += ((uint64_t)lens[i] + 4095) / 4096 * 4096 +
			 REC; /* (a slot takes whole pages on disk) */
	}
	close(fd);
	pthread_mutex_lock(&x->lock);
	x->used += wrote;
	x->written += wrote;
	int over = x->used > x->max;
	pthread_mutex_unlock(&x->lock);
	if (over)
		evict(x);
}

void tfs_xorbcache_drop(struct tfs_xorbcache *x, const uint8_t xorb[TFS_XET_HASH_LEN])
{
	char path[4096];
	xorb_path(x, xorb, path, sizeof path, 0);
	unlink(path);
}

/* ---- the cache ---- */

tfs_err tfs_xorbcache_open(const char *dir, uint64_t max, struct tfs_xorbcache **out, struct tfs_diag *d)
{
	struct tfs_xorbcache *x = calloc(1, sizeof *x);
	size_t n = strlen(dir) + 32;
	if (!x || !(x->top = malloc(n)) || !(x->dir = malloc(n))) {
		if (x)
			free(x->top);
		free(x);
		return tfs_fail(d, TFS_ERR_NOMEM, "out of memory");
	}
	snprintf(x->top, n, "%s/tensorfs-v1", dir);
	snprintf(x->dir, n, "%s/tensorfs-v1/xet", dir);
	pthread_mutex_init(&x->lock, NULL);
	x->max = max;
	if (mkdir_own(x->dir) != 0) {
		char q[TFS_QPATH_MAX];
		tfs_err e = tfs_fail(d, TFS_ERR_INVAL, "-o cache_dir=%s: cannot use its tensorfs-v1/xet: %s",
				     tfs_quote_path(q, sizeof q, dir),
				     errno ? strerror(errno) : "not a directory of the user's alone");
		tfs_xorbcache_free(x);
		return e;
	}
	x->used = tfs_cachedir_used(x->top, 3);
	*out = x;
	return TFS_OK;
}

void tfs_xorbcache_free(struct tfs_xorbcache *x)
{
	if (!x)
		return;
	pthread_mutex_destroy(&x->lock);
	free(x->top);
	free(x->dir);
	free(x);
}
