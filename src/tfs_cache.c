#include "tfs_cache.h"

#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

#include "tfs_hash.h"

#define B ((uint64_t)TFS_CACHE_BLOCK)
/* Requests in flight at most (-o concurrency=) and blocks per request
 * (-o part_size=): CDNs and S3 cap each connection well below the link,
 * so a fast load keeps many ranges in flight (Run:ai's streamer uses 32,
 * gcsfuse 16 per file, mountpoint-s3 8 MiB parts). */
#define WORKERS_DEFAULT 32
#define WORKERS_MAX 256
#define RUN_DEFAULT 16           /* 4 MiB: see README, "Loading a model fast" */
#define RUN_MAX 256              /* 64 MiB */
/* The in-flight limit starts here and grows by one with every part that
 * arrives without a retry, halving on one (a 503, SlowDown, a reset). */
#define ALLOWED_START 4
#define STREAMS 4
/* A read this close to where a reader stopped continues its stream: the
 * kernel's readahead (4 MiB on a tensorfs mount) sends a sequential
 * reader's requests several at once, handled by several threads, so they
 * arrive out of order by up to its window. (At 1 MiB, reads of one stream
 * were taken for new ones, the window kept starting over, and 1 GiB from
 * s3rver took 1,070 requests of 512 KiB.) */
#define STREAM_SLACK (4ull << 20)
/* Larger reads (a header, an index, read once) bypass the cache: one
 * request straight into the reader's buffer. FUSE reads are far smaller. */
#define DIRECT_MIN (4ull << 20)
/* A block whose failure a reader received answers the next lookup of it
 * with that failure, without a request, if it comes within this long:
 * when a read fails, the kernel asks again at once for the page it needed
 * (after its readahead failed), and that second ask must not run all the
 * retries again. Any later read, and any read of a block whose prefetch
 * failed with no reader waiting (the server may have healed since), tries
 * the network anew. */
#define FAIL_HOLD_NS 1000000000ll

enum { LOADING, READY, FAILED };

struct blk {
	struct tfs_cfile *f;
	uint64_t idx;
	int state;
	tfs_err err;
	unsigned pins;
	int in_table;
	int64_t failed_at;        /* FAILED: when a reader received it (ns) */
	int held;                 /* FAILED and received by a reader */
	int unread;               /* prefetched, not read yet */
	uint32_t len;
	char *data;
	struct blk *hnext, *lprev, *lnext;
	char msg[200];            /* why it failed */
};

struct stream {
	uint64_t next;            /* where the reader stopped */
	unsigned hits;            /* reads in a row that continued it */
	uint64_t window;          /* bytes to keep fetched ahead of it */
	uint64_t ahead;           /* first block not yet scheduled */
	uint64_t spill;           /* ... and of the file after this one */
	uint64_t used;
};

struct tfs_cfile {
	char *key;
	uint64_t size, nblocks;
	tfs_fetch_fn fetch;
	void *ctx;
	char hex[33];             /* its directory in the disk cache */
	int dir_made;
	struct stream st[STREAMS];
	uint64_t clock;
	unsigned refs;            /* the owner's, and one per queued job */
	/* The file a loader reads after this one (the next shard), where a
	 * stream's read-ahead goes on past this file's end. */
	struct tfs_cfile *next, *prev;
	struct tfs_cfile *all_next; /* every file, for the warm-up */
	uint64_t warmed;          /* of its bytes, counted in C.warm_done */
	int64_t last_seq;         /* when a stream last moved forward in it */
};

struct job {
	struct tfs_cfile *f;
	uint64_t first, n;
	int warm;                 /* the warm-up's: recyclable once on disk */
	struct job *next;
};

static struct {
	pthread_mutex_t lock;
	pthread_cond_t changed;   /* a block left LOADING */
	pthread_cond_t work;      /* a job was queued */
	int configured, started;
	uint64_t mem, used;
	struct blk **tab;
	size_t nslots;
	struct blk lru;           /* lnext: most recent; lprev: least */
	struct job *jh, *jt;      /* read-ahead, first come first served */
	struct job *wh, *wt;      /* the warm-up's, when no read-ahead waits */
	unsigned nwarm_jobs;      /* queued or running */
	unsigned nworkers, want_workers, run;
	unsigned allowed, active; /* in-flight limit and jobs running */
	uint64_t window_max;
	int warm;                 /* -o warm */
	uint64_t warm_total, warm_done;
	struct tfs_cfile *files;  /* all_next list, in the order they opened */
	/* Block buffers are cut from 8 MiB chunks asking for huge pages, and
	 * a freed block's buffer is kept for the next one: a fresh 256 KiB
	 * malloc is an mmap whose 64 pages each fault in, which cost a
	 * sequential read over loopback half its speed. Kept buffers are
	 * counted in `used`. */
	char **pool;
	size_t npool, cpool;
	char *chunk, *chunk_end;
	char *dir;                /* DIR/tensorfs-v1, or NULL */
	uint64_t disk_max, disk_used;
	uint64_t disk_written; /* ever, by this process: what a scan may miss */
	int evicting;
} C = {
	.lock = PTHREAD_MUTEX_INITIALIZER,
	.changed = PTHREAD_COND_INITIALIZER,
	.work = PTHREAD_COND_INITIALIZER,
};

/* ---- configuration ---- */

static int parse_size(const char *s, uint64_t *v)
{
	char *end;
	errno = 0;
	unsigned long long x = strtoull(s, &end, 10);
	if (errno || end == s || s[0] == '-')
		return -1;
	uint64_t mul = 1;
	if (*end == 'K' || *end == 'k')
		mul = 1ull << 10, end++;
	else if (*end == 'M' || *end == 'm')
		mul = 1ull << 20, end++;
	else if (*end == 'G' || *end == 'g')
		mul = 1ull << 30, end++;
	else if (*end == 'T' || *end == 't')
		mul = 1ull << 40, end++;
	if (*end || (x && mul > UINT64_MAX / x))
		return -1;
	*v = x * mul;
	return 0;
}

static int du_cb(const char *p, const struct stat *st, int type, struct FTW *ftw)
{
	(void)p;
	(void)ftw;
	if (type == FTW_F)
		C.disk_used += (uint64_t)st->st_size;
	return 0;
}

/* Made for the user alone: the blocks of a gated model are no one
 * else's to read. */
static int mkdirs(char *path)
{
	for (char *p = path + 1; *p; p++) {
		if (*p != '/')
			continue;
		*p = 0;
		int r = mkdir(path, 0700);
		*p = '/';
		if (r != 0 && errno != EEXIST)
			return -1;
	}
	return mkdir(path, 0700) != 0 && errno != EEXIST ? -1 : 0;
}

/* Whoever can write the cache directory chooses the bytes a mount
 * serves (a block's checksum is no signature): DIR must be the user's or
 * root's, and if others may write it, sticky (as /tmp is); DIR/tensorfs-v1
 * must be a real directory of the user's that no one else may write.
 * Returns NULL, or what is wrong. */
static const char *untrusted_dir(const char *dir, const char *own)
{
	struct stat st;
	uid_t me = geteuid();
	if (stat(dir, &st) != 0)
		return "cannot be read";
	if (st.st_uid != me && st.st_uid != 0)
		return "it belongs to another user";
	if ((st.st_mode & (S_IWGRP | S_IWOTH)) && !(st.st_mode & S_ISVTX))
		return "others may write it (and it is not sticky, as /tmp is)";
	if (lstat(own, &st) != 0)
		return "its tensorfs-v1 cannot be read";
	if (!S_ISDIR(st.st_mode))
		return "its tensorfs-v1 is not a directory (a symlink?)";
	if (st.st_uid != me)
		return "its tensorfs-v1 belongs to another user";
	if (st.st_mode & (S_IWGRP | S_IWOTH))
		return "others may write its tensorfs-v1";
	return NULL;
}

tfs_err tfs_cache_configure(const struct tfs_opts *o, struct tfs_diag *d)
{
	const char *cs = tfs_opts_get(o, "cache_size"), *dir = tfs_opts_get(o, "cache_dir"),
		   *cm = tfs_opts_get(o, "cache_max"), *cc = tfs_opts_get(o, "concurrency"),
		   *ps = tfs_opts_get(o, "part_size");
	uint64_t mem = TFS_CACHE_DEFAULT_MEM, disk = TFS_CACHE_DEFAULT_DISK, part = RUN_DEFAULT * B, conc = WORKERS_DEFAULT;
	int warm = tfs_opts_get(o, "warm") != NULL;
	if (cs && (parse_size(cs, &mem) || mem < 4 * B))
		return tfs_fail(d, TFS_ERR_INVAL, "-o cache_size= takes a size of at least 1M (as 512M or 2G), not '%s'", cs);
	if (cm && parse_size(cm, &disk))
		return tfs_fail(d, TFS_ERR_INVAL, "-o cache_max= takes a size (as 10G), not '%s'", cm);
	if (cc && (parse_size(cc, &conc) || conc < 1 || conc > WORKERS_MAX || strpbrk(cc, "KkMmGgTt")))
		return tfs_fail(d, TFS_ERR_INVAL, "-o concurrency= takes a number of requests from 1 to %d, not '%s'",
				WORKERS_MAX, cc);
	if (ps && (parse_size(ps, &part) || part < B || part > RUN_MAX * B || part % B))
		return tfs_fail(d, TFS_ERR_INVAL,
				"-o part_size= takes a multiple of 256K from 256K to 64M (as 8M), not '%s'", ps);
	if (warm && !(dir && *dir))
		return tfs_fail(d, TFS_ERR_INVAL, "-o warm needs -o cache_dir=DIR: the warm-up fills the disk cache");
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
	C.warm = warm;
	C.nslots = 64;
	while (C.nslots < 2 * (mem / B + 64))
		C.nslots *= 2;
	C.tab = calloc(C.nslots, sizeof *C.tab);
	C.lru.lnext = C.lru.lprev = &C.lru;
	tfs_err e = C.tab ? TFS_OK : tfs_fail(d, TFS_ERR_NOMEM, "out of memory");
	if (!e && dir && *dir) {
		size_t n = strlen(dir) + 32;
		C.dir = malloc(n);
		if (!C.dir) {
			e = tfs_fail(d, TFS_ERR_NOMEM, "out of memory");
		} else {
			snprintf(C.dir, n, "%s/tensorfs-v1", dir);
			const char *why = NULL;
			if (mkdirs(C.dir) != 0 || access(C.dir, R_OK | W_OK | X_OK) != 0 ||
			    (why = untrusted_dir(dir, C.dir))) {
				e = why ? tfs_fail(d, TFS_ERR_INVAL,
						   "-o cache_dir=%s: refused: %s; a cache directory must be writable by its user only",
						   dir, why)
					: tfs_fail(d, TFS_ERR_INVAL, "-o cache_dir=%s: cannot use it: %s", dir,
						   strerror(errno));
				free(C.dir);
				C.dir = NULL;
			} else {
				C.disk_used = 0;
				nftw(C.dir, du_cb, 16, FTW_PHYS);
			}
		}
	}
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

static struct blk *find(const struct tfs_cfile *f, uint64_t idx)
{
	for (struct blk *b = C.tab[slot_of(f, idx)]; b; b = b->hnext)
		if (b->f == f && b->idx == idx)
			return b;
	return NULL;
}

static void table_remove(struct blk *b)
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

static void lru_front(struct blk *b)
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

static void blk_free(struct blk *b)
{
	lru_unlink(b);
	C.used -= B;
	buf_put(b->data);
	free(b);
}

static void unpin(struct blk *b)
{
	if (--b->pins == 0 && !b->in_table)
		blk_free(b);
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
 * throw away each other's windows. Returns whether there is room. */
static int make_room(uint64_t need, int for_prefetch)
{
	if (need <= B && C.npool)
		return 1;
	int looked = 0;
	for (struct blk *b = C.lru.lprev; b != &C.lru && looked < 64; b = b->lprev, looked++) {
		if (b->pins == 0 && (b->state == FAILED || (b->state == READY && !b->unread))) {
			table_remove(b);
			blk_free(b);
			return 1;
		}
	}
	if (C.used + need <= C.mem)
		return 1;
	for (struct blk *b = C.lru.lprev; b != &C.lru && C.used + need > C.mem;) {
		struct blk *prev = b->lprev;
		if (b->pins == 0 && b->state != LOADING && !(for_prefetch && b->unread)) {
			table_remove(b);
			blk_free(b);
		}
		b = prev;
	}
	return C.used + need <= C.mem;
}

/* A new LOADING block, pinned once for whoever will load it. */
static struct blk *blk_new(struct tfs_cfile *f, uint64_t idx)
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

/* ---- the disk cache ---- */

/* A block file: this header, the key, then the data. */
struct disk_hdr {
	char magic[8];            /* "TFSBLK01" */
	uint32_t key_len, data_len;
	uint64_t idx;
	uint64_t data_hash;
	uint64_t hdr_hash;        /* of the fields above and the key */
};
#define DISK_SEED 0x3c6ef372fe94f82bull

static void blk_path(const struct tfs_cfile *f, uint64_t idx, char *out, size_t n)
{
	snprintf(out, n, "%s/%.2s/%s/%016llx.blk", C.dir, f->hex, f->hex, (unsigned long long)idx);
}

/* The checksum of a block's data: four independent lanes, so that the
 * multiplications overlap (a single chain of tfs_hash ran at about 2.5
 * GB/s and cost a disk cache hit a fifth of its time). It catches torn
 * writes and flipped bits; it is not meant to resist an attacker, who
 * could write the cache directory anyway. */
static uint64_t data_sum(const unsigned char *p, size_t n)
{
	const uint64_t k = 0x9e3779b97f4a7c15ull;
	uint64_t a = n, b = ~(uint64_t)n, c = DISK_SEED, d = k, w[4];
	size_t i = 0;
	for (; i + 32 <= n; i += 32) {
		memcpy(w, p + i, 32);
		a = (a ^ w[0]) * k;
		b = (b ^ w[1]) * k;
		c = (c ^ w[2]) * k;
		d = (d ^ w[3]) * k;
		a ^= a >> 29;
		b ^= b >> 29;
		c ^= c >> 29;
		d ^= d >> 29;
	}
	return tfs_hash(p + i, n - i, a ^ (b << 1) ^ (c << 2) ^ (d << 3) ^ tfs_hash_mix(a + c, b + d));
}

static uint64_t hdr_hash(const struct disk_hdr *h, const char *key)
{
	struct disk_hdr c = *h;
	c.hdr_hash = 0;
	return tfs_hash(&c, sizeof c, DISK_SEED) ^ tfs_hash(key, h->key_len, DISK_SEED + 1);
}

/* Fills the block from its file when one is there and checks out; a file
 * that does not (torn, damaged, another key) is removed. */
static int disk_read(struct tfs_cfile *f, struct blk *b)
{
	char path[4096];
	blk_path(f, b->idx, path, sizeof path);
	int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOATIME | O_NOFOLLOW);
	if (fd < 0 && errno == EPERM)
		fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW); /* O_NOATIME needs the owner */
	if (fd < 0)
		return 0;
	struct disk_hdr h;
	size_t kl = strlen(f->key);
	char *key = malloc(kl + 1);
	/* Header, key and data in one call: a block is read whole anyway. */
	struct iovec v[3] = {{&h, sizeof h}, {key, kl}, {b->data, b->len}};
	int ok = key && preadv(fd, v, 3, 0) == (ssize_t)(sizeof h + kl + b->len) &&
		 memcmp(h.magic, "TFSBLK01", 8) == 0 && h.key_len == kl && h.data_len == b->len &&
		 h.idx == b->idx && memcmp(key, f->key, kl) == 0 && hdr_hash(&h, key) == h.hdr_hash &&
		 data_sum((const unsigned char *)b->data, b->len) == h.data_hash;
	if (ok)
		futimens(fd, NULL); /* its age for the eviction order */
	close(fd);
	free(key);
	if (!ok)
		unlink(path);
	return ok;
}

static int evict_cb_collect;
static uint64_t scan_total;
struct old {
	int64_t mtime;
	uint64_t size;
	char *path;
};
static struct old *olds;
static size_t nolds, cold;

static int scan_cb(const char *p, const struct stat *st, int type, struct FTW *ftw)
{
	(void)ftw;
	if (type != FTW_F)
		return 0;
	scan_total += (uint64_t)st->st_size;
	if (!evict_cb_collect)
		return 0;
	if (nolds == cold) {
		size_t nc = cold ? cold * 2 : 1024;
		struct old *q = realloc(olds, nc * sizeof *q);
		if (!q)
			return 0;
		olds = q;
		cold = nc;
	}
	olds[nolds].mtime = st->st_mtim.tv_sec * 1000000000ll + st->st_mtim.tv_nsec;
	olds[nolds].size = (uint64_t)st->st_size;
	olds[nolds].path = strdup(p);
	if (olds[nolds].path)
		nolds++;
	return 0;
}

static int old_cmp(const void *a, const void *b)
{
	const struct old *x = a, *y = b;
	return (x->mtime > y->mtime) - (x->mtime < y->mtime);
}

/* Over the limit: remove the oldest block files until 90% of it is used.
 * The directory may be shared by other mounts, so it is measured again
 * rather than trusted. One thread at a time (the others go on), which is
 * why blocks written during a pass are added to its measure: overwriting
 * the count with the scan alone lost them, and the directory grew past
 * the limit under concurrent readers. */
static void disk_evict(void)
{
	pthread_mutex_lock(&C.lock);
	if (C.evicting) {
		pthread_mutex_unlock(&C.lock);
		return;
	}
	C.evicting = 1;
	/* A block written during a scan may be counted twice, which only
	 * makes the next pass remove more; a few passes end it. */
	for (int pass = 0; pass < 4 && C.disk_used > C.disk_max; pass++) {
		uint64_t written = C.disk_written;
		pthread_mutex_unlock(&C.lock);
		/* nftw has no context argument: the collection is serialised
		 * by C.evicting. */
		uint64_t measured;
		scan_total = 0;
		evict_cb_collect = 1;
		nolds = 0;
		nftw(C.dir, scan_cb, 16, FTW_PHYS);
		measured = scan_total;
		qsort(olds, nolds, sizeof *olds, old_cmp);
		for (size_t i = 0; i < nolds; i++) {
			if (measured > C.disk_max / 10 * 9 && unlink(olds[i].path) == 0)
				measured -= olds[i].size;
			free(olds[i].path);
		}
		nolds = 0;
		evict_cb_collect = 0;
		pthread_mutex_lock(&C.lock);
		C.disk_used = measured + (C.disk_written - written);
	}
	C.evicting = 0;
	pthread_mutex_unlock(&C.lock);
}

/* Writes the block's file atomically: a temporary name, then rename. */
static void disk_write(struct tfs_cfile *f, const struct blk *b)
{
	char path[4096], tmp[4200];
	size_t kl = strlen(f->key);
	if (!f->dir_made) {
		snprintf(path, sizeof path, "%s/%.2s/%s", C.dir, f->hex, f->hex);
		if (mkdirs(path) != 0)
			return;
		f->dir_made = 1;
	}
	blk_path(f, b->idx, path, sizeof path);
	snprintf(tmp, sizeof tmp, "%s.%d.%lx.tmp", path, (int)getpid(), (unsigned long)pthread_self());
	struct disk_hdr h;
	memset(&h, 0, sizeof h);
	memcpy(h.magic, "TFSBLK01", 8);
	h.key_len = (uint32_t)kl;
	h.data_len = b->len;
	h.idx = b->idx;
	h.data_hash = data_sum((const unsigned char *)b->data, b->len);
	h.hdr_hash = hdr_hash(&h, f->key);
	/* A leftover of a crash may hold the name (same pid and thread). */
	unlink(tmp);
	int fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
	if (fd < 0)
		return;
	int ok = write(fd, &h, sizeof h) == (ssize_t)sizeof h && write(fd, f->key, kl) == (ssize_t)kl &&
		 write(fd, b->data, b->len) == (ssize_t)b->len;
	ok = close(fd) == 0 && ok;
	if (!ok || rename(tmp, path) != 0) {
		unlink(tmp);
		return;
	}
	pthread_mutex_lock(&C.lock);
	C.disk_used += sizeof h + kl + b->len;
	C.disk_written += sizeof h + kl + b->len;
	int over = C.disk_used > C.disk_max;
	pthread_mutex_unlock(&C.lock);
	if (over)
		disk_evict();
}

/* ---- loading ---- */

static int64_t now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000000000ll + ts.tv_nsec;
}

/* Loads blocks[0..n) (consecutive, LOADING, pinned by the caller): each
 * from the disk cache when it has it, the rest with one request per
 * stretch of consecutive blocks. Marks them READY or FAILED, then drops
 * the caller's pins. */
static void load(struct tfs_cfile *f, struct blk **blocks, uint64_t n)
{
	struct tfs_iov *iov = malloc((n ? n : 1) * sizeof *iov);
	char *from_disk = calloc(n ? n : 1, 1);
	for (uint64_t i = 0; C.dir && from_disk && i < n; i++) {
		from_disk[i] = (char)disk_read(f, blocks[i]);
		if (from_disk[i]) {
			/* Served at once: a reader waiting for this block need
			 * not wait for the rest of the run. */
			pthread_mutex_lock(&C.lock);
			blocks[i]->state = READY;
			lru_front(blocks[i]);
			pthread_cond_broadcast(&C.changed);
			pthread_mutex_unlock(&C.lock);
		}
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
		tfs_err e = iov ? f->fetch(f->ctx, iov, (unsigned)(j - i), blocks[i]->idx * B, len)
				: TFS_ERR_NOMEM;
		for (uint64_t k = i; k < j; k++) {
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
		lru_front(b); /* a failed one too: make_room may drop it */
	}
	pthread_cond_broadcast(&C.changed);
	pthread_mutex_unlock(&C.lock);
	for (uint64_t k = 0; C.dir && k < n; k++)
		if (!blocks[k]->err && !(from_disk && from_disk[k]))
			disk_write(f, blocks[k]);
	free(from_disk);
	free(iov);
	pthread_mutex_lock(&C.lock);
	for (uint64_t k = 0; k < n; k++)
		unpin(blocks[k]);
	pthread_mutex_unlock(&C.lock);
}

/* The last reference gone (the owner's, and every prefetch job's): its
 * blocks leave the table before the file goes, so that no block can ever
 * be taken for a later file's at the same address. */
static void file_unref(struct tfs_cfile *f)
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
					blk_free(b);
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
		/* Pinned for the worker too: load() lets go of the job's
		 * pins, and the blocks are looked at again below. */
		for (uint64_t k = 0; k < j->n; k++) {
			blocks[k] = find(j->f, j->first + k);
			blocks[k]->pins++;
		}
		uint64_t retried = tfs_http_retried();
		pthread_mutex_unlock(&C.lock);
		load(j->f, blocks, j->n);
		pthread_mutex_lock(&C.lock);
		C.active--;
		int bad = tfs_http_retried() != retried;
		for (uint64_t k = 0; k < j->n; k++) {
			bad |= blocks[k]->state == FAILED;
			if (j->warm) {
				/* On disk now (or failed): its memory may be reused. */
				blocks[k]->unread = 0;
				C.warm_done += blocks[k]->len;
				j->f->warmed += blocks[k]->len;
			}
			unpin(blocks[k]);
		}
		/* Additive increase, multiplicative decrease, as TCP and the
		 * S3 clients do: a server that asks to slow down is heard. */
		if (bad)
			C.allowed = C.allowed > 1 ? C.allowed / 2 : 1;
		else if (C.allowed < C.nworkers)
			C.allowed++;
		if (j->warm)
			C.nwarm_jobs--; /* queued or running */
		file_unref(j->f);
		pthread_cond_broadcast(&C.changed); /* tfs_cfile_free may wait */
		pthread_cond_broadcast(&C.work);
		free(j);
	}
	pthread_mutex_unlock(&C.lock);
	return NULL;
}

static void *warm_up(void *arg);

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
		if (C.warm && C.dir && pthread_create(&t, NULL, warm_up, NULL) == 0)
			pthread_detach(t);
	}
	pthread_mutex_unlock(&C.lock);
}

/* Queues a job of f's (its blocks made and pinned) for the workers:
 * the read-ahead's queue, or the warm-up's. */
static void enqueue(struct tfs_cfile *f, struct job *j, int warm)
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

/* Queues prefetch of blocks [from, to) that are not there yet, while they
 * fit the budget without pushing out anything a reader holds. */
static void prefetch(struct tfs_cfile *f, uint64_t from, uint64_t to)
{
	while (from < to) {
		struct job *j = NULL;
		while (from < to && find(f, from))
			from++;
		while (from < to && !find(f, from) && (!j || j->n < C.run)) {
			struct blk *nb = NULL;
			if (!make_room(B, 1) || (!j && !(j = calloc(1, sizeof *j))) ||
			    !(nb = blk_new(f, from))) {
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
		enqueue(f, j, 0);
	}
}

/* A stream that has read up to `at` (its last block b1): the window after
 * it fetched ahead in whole parts, on past the tensor it reads into the
 * next ones (loaders read a checkpoint through), and past the file's end
 * into the file chained after it (the next shard). */
static void read_ahead(struct tfs_cfile *f, struct stream *s, uint64_t at, uint64_t b1)
{
	uint64_t from = s->ahead > b1 + 1 ? s->ahead : b1 + 1;
	uint64_t end = at + s->window;
	uint64_t to = (end + B - 1) / B;
	if (to > f->nblocks)
		to = f->nblocks;
	/* In whole runs: topping the window up by the block or two each read
	 * moves it would make every request that small (1,070 requests of
	 * 512 KiB for 1 GiB from s3rver). */
	uint64_t wb = s->window / B, run = wb / 2 < C.run ? wb / 2 : C.run;
	if (from < to && (to - from >= run || to == f->nblocks)) {
		prefetch(f, from, to);
		s->ahead = to;
	}
	struct tfs_cfile *g = f->next;
	if (g && end > f->size && s->ahead >= f->nblocks) {
		uint64_t gto = (end - f->size + B - 1) / B;
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
static struct stream *follow(struct tfs_cfile *f, uint64_t off, uint64_t len)
{
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
	int64_t now = now_ns();
	unsigned streaming = 1;
	for (struct tfs_cfile *g = C.files; g; g = g->all_next)
		if (g != f && g != f->prev && now - g->last_seq < 500000000ll)
			streaming++;
	uint64_t cap = C.window_max / streaming;
	if (cap < 2 * B)
		cap = 2 * B;
	if (s) {
		/* Two random reads can land close by chance; three in a row
		 * that follow each other are a reader moving forward. */
		if (++s->hits >= 2) {
			s->window = s->window ? (s->window * 2 < cap ? s->window * 2 : cap)
					      : (2 * B > cap ? cap : 2 * B);
			if (s->window > cap)
				s->window = cap;
			f->last_seq = now;
		}
		if (off + len > s->next)
			s->next = off + len;
	} else {
		s = oldest;
		s->next = off + len;
		s->hits = 0;
		s->window = 0;
		s->ahead = 0;
		s->spill = 0;
	}
	s->used = f->clock;
	return s;
}

struct tfs_cmap {
	unsigned n;
	struct blk *b[];
};

tfs_err tfs_cfile_map(struct tfs_cfile *f, uint64_t off, size_t len, uint64_t limit,
		      struct tfs_iov *iov, unsigned *niov, struct tfs_cmap **token, struct tfs_diag *d)
{
	(void)limit; /* read-ahead goes on past the tensor: loaders read on */
	*niov = 0;
	*token = NULL;
	if (len == 0)
		return TFS_OK;
	if (off > f->size || len > f->size - off)
		return tfs_fail(d, TFS_ERR_SHORT, "read past the end");
	uint64_t b0 = off / B, b1 = (off + len - 1) / B, nb = b1 - b0 + 1;
	struct blk **mine = malloc(nb * sizeof *mine);
	struct tfs_cmap *map = malloc(sizeof *map + nb * sizeof map->b[0]);
	uint64_t nmine = 0;
	if (!mine || !map) {
		free(mine);
		free(map);
		return tfs_fail(d, TFS_ERR_NOMEM, "out of memory");
	}
	map->n = 0;
	tfs_err e = TFS_OK;
	int64_t now = now_ns();

	pthread_mutex_lock(&C.lock);
	struct stream *s = follow(f, off, len);
	/* Every block of the read is pinned from here until it is served: a
	 * block loaded for this read used to be free for another reader's
	 * make_room between its loading and its serving, and was then
	 * fetched a second time. */
	for (uint64_t i = b0; i <= b1; i++) {
		struct blk *b = find(f, i);
		if (b && b->state == FAILED) {
			/* Answered from the failure once (the kernel's re-read),
			 * then gone; unless no reader got it, or long ago. */
			int again = b->held && now - b->failed_at < FAIL_HOLD_NS;
			table_remove(b);
			if (b->pins == 0 && !again)
				blk_free(b);
			if (!again)
				b = NULL;
		}
		if (!b) {
			/* A reader always gets its blocks, over budget if it
			 * must (by at most what the readers in flight hold). */
			make_room(B, 0);
			if (!(b = blk_new(f, i))) {
				e = tfs_fail(d, TFS_ERR_NOMEM, "out of memory");
				break;
			}
			mine[nmine++] = b;
		}
		b->pins++;
		map->b[map->n++] = b;
	}
	if (!e && C.started && s->window)
		read_ahead(f, s, off + len, b1);
	pthread_mutex_unlock(&C.lock);

	/* Loads in runs of consecutive blocks (they are, unless another
	 * reader got some of them first), one request a run; every block
	 * made above is loaded, even after an error, or its waiters would
	 * wait for ever. */
	for (uint64_t i = 0; i < nmine;) {
		uint64_t j = i + 1;
		while (j < nmine && mine[j]->idx == mine[j - 1]->idx + 1)
			j++;
		load(f, mine + i, j - i);
		i = j;
	}
	free(mine);

	pthread_mutex_lock(&C.lock);
	for (unsigned k = 0; !e && k < map->n; k++) {
		struct blk *b = map->b[k];
		while (b->state == LOADING)
			pthread_cond_wait(&C.changed, &C.lock);
		if (b->state == FAILED) {
			/* The failure of this fetch, or of one made for another
			 * reader a moment ago: never a second round of retries
			 * within one read. */
			if (!b->held) {
				b->held = 1;
				b->failed_at = now_ns();
			}
			e = tfs_fail(d, b->err, "%s", b->msg);
			break;
		}
		lru_front(b);
		uint64_t i = b->idx;
		uint64_t start = i == b0 ? off - b0 * B : 0;
		uint64_t end = i == b1 ? off + len - b1 * B : b->len;
		/* Read once its last byte is: a FUSE read is smaller than a
		 * block, and the read of a block's second half would find it
		 * recycled and fetch it again. */
		if (end == b->len)
			b->unread = 0;
		iov[k].p = b->data + start;
		iov[k].len = end - start;
	}
	pthread_mutex_unlock(&C.lock);
	if (e) {
		tfs_cfile_unmap(map);
		return e;
	}
	*niov = map->n;
	*token = map;
	return TFS_OK;
}

void tfs_cfile_unmap(struct tfs_cmap *map)
{
	if (!map)
		return;
	pthread_mutex_lock(&C.lock);
	for (unsigned i = 0; i < map->n; i++)
		unpin(map->b[i]);
	pthread_mutex_unlock(&C.lock);
	free(map);
}

tfs_err tfs_cfile_read(struct tfs_cfile *f, void *buf, size_t len, uint64_t off,
		       uint64_t limit, struct tfs_diag *d)
{
	if (len == 0)
		return TFS_OK;
	if (off > f->size || len > f->size - off)
		return tfs_fail(d, TFS_ERR_SHORT, "read past the end");
	if (len >= DIRECT_MIN || len > C.mem / 4) {
		struct tfs_iov v = {buf, len};
		tfs_err e = f->fetch(f->ctx, &v, 1, off, len);
		return e ? tfs_fail(d, e, "%s", tfs_err_str(e)) : TFS_OK;
	}
	struct tfs_iov *iov = malloc((len / B + 2) * sizeof *iov);
	struct tfs_cmap *map;
	unsigned n;
	if (!iov)
		return tfs_fail(d, TFS_ERR_NOMEM, "out of memory");
	tfs_err e = tfs_cfile_map(f, off, len, limit, iov, &n, &map, d);
	char *out = buf;
	for (unsigned i = 0; !e && i < n; i++) {
		memcpy(out, iov[i].p, iov[i].len);
		out += iov[i].len;
	}
	tfs_cfile_unmap(map);
	free(iov);
	return e;
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
	uint64_t h1 = tfs_hash(key, strlen(key), DISK_SEED), h2 = tfs_hash(key, strlen(key), ~DISK_SEED);
	snprintf(f->hex, sizeof f->hex, "%016llx%016llx", (unsigned long long)h1,
		 (unsigned long long)h2);
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
			struct blk *b = find(f, j->first + k);
			if (!b)
				continue;
			b->state = FAILED;
			b->err = TFS_ERR_IO;
			table_remove(b);
			unpin(b);
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
	file_unref(f);
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

/* ---- the warm-up ---- */

static int on_disk(const struct tfs_cfile *f, uint64_t idx)
{
	char path[4096];
	struct stat st;
	uint64_t len = f->size - idx * B < B ? f->size - idx * B : B;
	blk_path(f, idx, path, sizeof path);
	return lstat(path, &st) == 0 && S_ISREG(st.st_mode) &&
	       (uint64_t)st.st_size == sizeof(struct disk_hdr) + strlen(f->key) + len;
}

static void warm_progress(uint64_t t0_ns, unsigned *said)
{
	uint64_t done = C.warm_done, total = C.warm_total;
	unsigned pct = total ? (unsigned)(done * 100 / total) : 100;
	while (*said + 10 <= pct) {
		*said += 10;
		double secs = (double)(now_ns() - (int64_t)t0_ns) / 1e9;
		tfs_log("warm-up: %u%% (%llu of %llu MiB in %.1f s)", *said, (unsigned long long)(done >> 20),
			(unsigned long long)(total >> 20), secs);
	}
}

/* The blocks of f not yet on disk, queued a part at a time (under
 * C.lock, which the waits let go). */
static void warm_file(struct tfs_cfile *f, uint64_t t0, unsigned *said)
{
	for (uint64_t idx = 0; idx < f->nblocks && !tfs_http_aborted();) {
		while (C.nwarm_jobs >= C.allowed && !tfs_http_aborted())
			pthread_cond_wait(&C.changed, &C.lock);
		struct job *j = calloc(1, sizeof *j);
		if (!j)
			return;
		while (idx < f->nblocks && j->n < C.run && !tfs_http_aborted()) {
			uint64_t len = f->size - idx * B < B ? f->size - idx * B : B;
			struct blk *nb = find(f, idx);
			if (nb || on_disk(f, idx)) {
				/* (One a reader has, or has had, goes to disk as
				 * it is loaded.) */
				C.warm_done += len;
				f->warmed += len;
				idx++;
				if (j->n)
					break; /* a part is consecutive blocks */
				continue;
			}
			while (!make_room(B, 1) && !tfs_http_aborted())
				pthread_cond_wait(&C.changed, &C.lock);
			if (tfs_http_aborted() || find(f, idx) || !(nb = blk_new(f, idx)))
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
			enqueue(f, j, 1);
		}
		warm_progress(t0, said);
	}
}

/* Every block of every file not yet on disk, in the order a loader reads
 * them (each chain of shards from its first), through the workers at a
 * lower priority than any reader's read-ahead, a part at a time and never
 * more parts queued than may be in flight; what it loads is written to
 * the disk cache and its memory recycled. */
static void *warm_up(void *arg)
{
	(void)arg;
	int64_t t0 = now_ns();
	unsigned said = 0;
	pthread_mutex_lock(&C.lock);
	/* (References keep each file walked, and the chain's head, from
	 * being freed while the lock is let go in the waits.) */
	for (struct tfs_cfile *h = C.files; h && !tfs_http_aborted();) {
		h->refs++;
		for (struct tfs_cfile *f = h->prev ? NULL : h; f;) {
			f->refs++;
			warm_file(f, (uint64_t)t0, &said);
			struct tfs_cfile *nf = tfs_http_aborted() ? NULL : f->next;
			if (nf)
				nf->refs++;
			file_unref(f);
			if (nf)
				nf->refs--; /* taken again at the loop's top */
			pthread_cond_broadcast(&C.changed); /* tfs_cfile_free may wait */
			f = nf;
		}
		struct tfs_cfile *nh = tfs_http_aborted() ? NULL : h->all_next;
		if (nh)
			nh->refs++;
		file_unref(h);
		if (nh)
			nh->refs--;
		pthread_cond_broadcast(&C.changed);
		h = nh;
	}
	while (C.nwarm_jobs && !tfs_http_aborted())
		pthread_cond_wait(&C.changed, &C.lock);
	warm_progress((uint64_t)t0, &said);
	if (!tfs_http_aborted())
		tfs_log("warm-up: done: %llu MiB in %.1f s", (unsigned long long)(C.warm_done >> 20),
			(double)(now_ns() - t0) / 1e9);
	pthread_mutex_unlock(&C.lock);
	return NULL;
}

void tfs_cache_warm_status(uint64_t *done, uint64_t *total, int *on)
{
	pthread_mutex_lock(&C.lock);
	*done = C.warm_done;
	*total = C.warm_total;
	*on = C.warm;
	pthread_mutex_unlock(&C.lock);
}
