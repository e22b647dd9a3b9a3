/* The disk cache (-o cache_dir=): one file per block, written under a
 * temporary name and renamed, checked when read, evicted oldest first;
 * and the warm-up (-o warm), which fills it. */
#include "sources/cache_i.h"

#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

#include <xxhash.h>

#include "core/hash.h"

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
static const char *untrusted_parent(const char *dir)
{
	struct stat st;
	uid_t me = geteuid();
	if (stat(dir, &st) != 0)
		return errno == ENOENT ? NULL : "cannot be read"; /* made below */
	if (st.st_uid != me && st.st_uid != 0)
		return "it belongs to another user";
	if ((st.st_mode & (S_IWGRP | S_IWOTH)) && !(st.st_mode & S_ISVTX))
		return "others may write it (and it is not sticky, as /tmp is)";
	return NULL;
}

static const char *untrusted_dir(const char *dir, const char *own)
{
	struct stat st;
	uid_t me = geteuid();
	const char *why = untrusted_parent(dir);
	if (why || stat(dir, &st) != 0)
		return why ? why : "cannot be read";
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

/* DIR/tensorfs-v1, made and checked (under C.lock). */
tfs_err tfs_cache_disk_open(const char *dir, struct tfs_diag *d)
{
	tfs_err e = TFS_OK;
	{
		size_t n = strlen(dir) + 32;
		C.dir = malloc(n);
		if (!C.dir) {
			e = tfs_fail(d, TFS_ERR_NOMEM, "out of memory");
		} else {
			snprintf(C.dir, n, "%s/tensorfs-v1", dir);
			/* Nothing is made in a directory that is refused. */
			const char *why = untrusted_parent(dir);
			if (why || mkdirs(C.dir) != 0 || access(C.dir, R_OK | W_OK | X_OK) != 0 ||
			    (why = untrusted_dir(dir, C.dir))) {
				char q[TFS_QPATH_MAX];
				tfs_quote_path(q, sizeof q, dir);
				e = why ? tfs_fail(
						  d, TFS_ERR_INVAL,
						  "-o cache_dir=%s: refused: %s; a cache directory must be writable by its user only",
						  q, why)
					: tfs_fail(d, TFS_ERR_INVAL, "-o cache_dir=%s: cannot use it: %s", q,
						   strerror(errno));
				free(C.dir);
				C.dir = NULL;
			} else {
				C.disk_used = 0;
				nftw(C.dir, du_cb, 16, FTW_PHYS);
			}
		}
	}
	return e;
}

/* ---- the disk cache ---- */

/* A block file: this header, the key, then the data. */
struct disk_hdr {
	char magic[8]; /* "TFSBLK02" */
	uint32_t key_len, data_len;
	uint64_t idx;
	uint64_t data_hash;
	uint64_t flags;    /* DURABLE */
	uint64_t hdr_hash; /* of the fields above and the key */
};
/* Its data reached the disk before the file got its name (the warm-up's
 * blocks): a crash cannot have left it torn, so a read checks the header,
 * key and size only, and the data goes from the file to the reader with
 * no pass over it (checking 1 GiB cost the warm row a third of its
 * speed). Blocks written as readers fetch get the flag later (see
 * sync_later); until then their data is checked on every read. */
#define DURABLE 1u

static void blk_path(const struct tfs_cfile *f, uint64_t idx, char *out, size_t n)
{
	snprintf(out, n, "%s/%.2s/%s/%016llx.blk", C.dir, f->hex, f->hex, (unsigned long long)idx);
}

/* The checksum of a block's data: XXH3 (libxxhash) runs at memory speed,
 * where our own four-lane sum cost a disk cache hit a tenth of its time.
 * It catches torn writes and flipped bits; it is not meant to resist an
 * attacker, who could write the cache directory anyway. */
static uint64_t data_sum(const void *p, size_t n)
{
	return XXH3_64bits_withSeed(p, n, DISK_SEED);
}

static uint64_t hdr_hash(const struct disk_hdr *h, const char *key)
{
	struct disk_hdr c = *h;
	c.hdr_hash = 0;
	return tfs_hash(&c, sizeof c, DISK_SEED) ^ tfs_hash(key, h->key_len, DISK_SEED + 1);
}

/* Checks the data of a block file [doff, doff + len) against its sum,
 * through a small buffer that stays in the CPU's cache: the bytes are then
 * spliced from the file into replies, never copied into the block. */
static int data_ok(int fd, uint64_t doff, uint32_t len, uint64_t want)
{
	static _Thread_local char buf[64 << 10];
	XXH3_state_t *st = XXH3_createState();
	int ok = st && XXH3_64bits_reset_withSeed(st, DISK_SEED) == XXH_OK;
	for (uint32_t at = 0; ok && at < len;) {
		size_t n = len - at < sizeof buf ? len - at : sizeof buf;
		ok = pread(fd, buf, n, (off_t)(doff + at)) == (ssize_t)n &&
		     XXH3_64bits_update(st, buf, n) == XXH_OK;
		at += (uint32_t)n;
	}
	ok = ok && XXH3_64bits_digest(st) == want;
	XXH3_freeState(st);
	return ok;
}

/* The block from its file when one is there and checks out: held open
 * (b->fd, b->doff) while few enough are, else read into b->data. A file
 * that does not check out (torn, damaged, another key) is removed. */
int tfs_cache_disk_read(struct tfs_cfile *f, struct blk *b)
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
	int keep = __atomic_add_fetch(&C.nfds, 1, __ATOMIC_RELAXED) <= C.fds_max;
	if (!keep)
		__atomic_sub_fetch(&C.nfds, 1, __ATOMIC_RELAXED);
	struct iovec v[3] = {{&h, sizeof h}, {key, kl}, {b->data, b->len}};
	size_t want = sizeof h + kl + (keep ? 0 : b->len);
	struct stat st;
	int ok = key && preadv(fd, v, keep ? 2 : 3, 0) == (ssize_t)want &&
		 memcmp(h.magic, "TFSBLK02", 8) == 0 && h.key_len == kl && h.data_len == b->len &&
		 h.idx == b->idx && memcmp(key, f->key, kl) == 0 && hdr_hash(&h, key) == h.hdr_hash &&
		 fstat(fd, &st) == 0 && (uint64_t)st.st_size == sizeof h + kl + b->len;
	if (ok && !keep)
		ok = data_sum(b->data, b->len) == h.data_hash;
	else if (ok && !(h.flags & DURABLE))
		ok = data_ok(fd, sizeof h + kl, b->len, h.data_hash);
	if (ok)
		futimens(fd, NULL); /* its age for the eviction order */
	free(key);
	if (ok && keep) {
		b->fd = fd;
		b->doff = (uint32_t)(sizeof h + kl);
		return 1;
	}
	close(fd);
	if (keep)
		__atomic_sub_fetch(&C.nfds, 1, __ATOMIC_RELAXED);
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
	/* A memo (a few bytes a tensor) outlives the blocks it was worked out
	 * from: that is what it is for. */
	size_t pl = strlen(p);
	if (!evict_cb_collect || (pl >= 5 && strcmp(p + pl - 5, "/memo") == 0))
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

/* ---- making blocks durable behind the reader ---- */

/* A block a reader fetched is written without waiting for the disk (its
 * reply must not wait for an fdatasync), so until it is durable every read
 * of it from a later mount checks its data: a tenth of a disk cache hit's
 * time. One thread syncs such blocks in the background and then sets
 * DURABLE in their headers, through the same descriptor: a block renamed
 * over meanwhile is another inode and keeps its own flag. The header is
 * written after the data reached the disk, so a crash leaves either flag
 * with data that matches it; a header torn by a crash fails its own hash
 * and the block is fetched again. The queue is bounded: a block that does
 * not fit, or is still queued when the mount ends, stays checked. */
#define SYNC_QUEUE 1024
static struct {
	pthread_mutex_t lock;
	pthread_cond_t more;
	char *path[SYNC_QUEUE];
	unsigned head, n;
	int started;
} S = {PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, {0}, 0, 0, 0};

static void make_durable(const char *path)
{
	int fd = open(path, O_RDWR | O_CLOEXEC | O_NOFOLLOW);
	if (fd < 0)
		return;
	struct disk_hdr h;
	char key[4096];
	if (fdatasync(fd) == 0 && pread(fd, &h, sizeof h, 0) == (ssize_t)sizeof h &&
	    memcmp(h.magic, "TFSBLK02", 8) == 0 && h.key_len < sizeof key &&
	    pread(fd, key, h.key_len, sizeof h) == (ssize_t)h.key_len && hdr_hash(&h, key) == h.hdr_hash &&
	    !(h.flags & DURABLE)) {
		h.flags |= DURABLE;
		h.hdr_hash = hdr_hash(&h, key);
		if (pwrite(fd, &h, sizeof h, 0) != (ssize_t)sizeof h) {
			/* A header half written fails its hash: the block is
			 * fetched again, which is all a failure here costs. */
		}
	}
	close(fd);
}

static void *syncer(void *arg)
{
	(void)arg;
	for (;;) {
		pthread_mutex_lock(&S.lock);
		while (!S.n)
			pthread_cond_wait(&S.more, &S.lock);
		char *path = S.path[S.head];
		S.head = (S.head + 1) % SYNC_QUEUE;
		S.n--;
		pthread_mutex_unlock(&S.lock);
		make_durable(path);
		free(path);
	}
	return NULL;
}

static void sync_later(const char *path)
{
	pthread_mutex_lock(&S.lock);
	if (!S.started) {
		pthread_t t;
		pthread_attr_t a;
		pthread_attr_init(&a);
		pthread_attr_setdetachstate(&a, PTHREAD_CREATE_DETACHED);
		S.started = pthread_create(&t, &a, syncer, NULL) == 0 ? 1 : -1;
		pthread_attr_destroy(&a);
	}
	char *p = S.started > 0 && S.n < SYNC_QUEUE ? strdup(path) : NULL;
	if (p) {
		S.path[(S.head + S.n) % SYNC_QUEUE] = p;
		S.n++;
		pthread_cond_signal(&S.more);
	}
	pthread_mutex_unlock(&S.lock);
}

/* Writes the block's file atomically: a temporary name, then rename. */
void tfs_cache_disk_write(struct tfs_cfile *f, const struct blk *b, int durable)
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
	memcpy(h.magic, "TFSBLK02", 8);
	h.key_len = (uint32_t)kl;
	h.data_len = b->len;
	h.idx = b->idx;
	h.data_hash = data_sum(b->data, b->len);
	h.flags = durable ? DURABLE : 0;
	h.hdr_hash = hdr_hash(&h, f->key);
	/* A leftover of a crash may hold the name (same pid and thread). */
	unlink(tmp);
	int fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
	if (fd < 0)
		return;
	int ok = write(fd, &h, sizeof h) == (ssize_t)sizeof h && write(fd, f->key, kl) == (ssize_t)kl &&
		 write(fd, b->data, b->len) == (ssize_t)b->len && (!durable || fdatasync(fd) == 0);
	ok = close(fd) == 0 && ok;
	if (!ok || rename(tmp, path) != 0) {
		unlink(tmp);
		return;
	}
	if (!durable)
		sync_later(path);
	pthread_mutex_lock(&C.lock);
	C.disk_used += sizeof h + kl + b->len;
	C.disk_written += sizeof h + kl + b->len;
	int over = C.disk_used > C.disk_max;
	pthread_mutex_unlock(&C.lock);
	if (over)
		disk_evict();
}

/* ---- the memo ---- */

/* One file per cached file, "KEY\tVALUE\n" lines appended (a line written
 * by one write(2) with O_APPEND lands whole, whoever else appends), the
 * last line of a key winning; read once per mount, then kept in memory
 * with an index by key (a lookup per tensor must not scan the file).
 * A memo is at most this large (a hash line per tensor of a large model
 * is a few megabytes). */
#define MEMO_MAX (64u << 20)

static void memo_path(const struct tfs_cfile *f, char *out, size_t n)
{
	snprintf(out, n, "%s/%.2s/%s/memo", C.dir, f->hex, f->hex);
}

/* The slot of `key` in the index: its line's, or the empty one where it
 * would go. */
static size_t memo_find(const struct tfs_cfile *f, const char *key, size_t kl)
{
	size_t i = (size_t)tfs_hash(key, kl, DISK_SEED) & (f->memo_cap - 1);
	for (; f->memo_slot[i]; i = (i + 1) & (f->memo_cap - 1)) {
		const char *line = f->memo + f->memo_slot[i] - 1;
		if (f->memo_len - (f->memo_slot[i] - 1) > kl && memcmp(line, key, kl) == 0 &&
		    line[kl] == '\t')
			break;
	}
	return i;
}

/* Indexes every whole line from `from` on (a later line of a key wins);
 * the index doubles as the lines grow. A line cut short (by a crash) is
 * no value. Without memory for the index, the memo is forgotten. */
static void memo_index(struct tfs_cfile *f, size_t from)
{
	size_t lines = f->memo_n;
	for (size_t at = from; at < f->memo_len; at++)
		lines += f->memo[at] == '\n';
	if (2 * lines + 2 > f->memo_cap) {
		size_t cap = 64;
		while (cap < 4 * lines + 4)
			cap *= 2;
		size_t *slot = calloc(cap, sizeof *slot);
		if (!slot) {
			free(f->memo_slot);
			f->memo_slot = NULL;
			f->memo_len = f->memo_n = f->memo_cap = 0;
			return;
		}
		free(f->memo_slot);
		f->memo_slot = slot;
		f->memo_cap = cap;
		f->memo_n = 0;
		from = 0;
	}
	for (size_t at = from; at < f->memo_len;) {
		const char *line = f->memo + at;
		const char *nl = memchr(line, '\n', f->memo_len - at);
		if (!nl)
			break;
		const char *tab = memchr(line, '\t', (size_t)(nl - line));
		if (tab) {
			size_t i = memo_find(f, line, (size_t)(tab - line));
			f->memo_n += !f->memo_slot[i];
			f->memo_slot[i] = at + 1;
		}
		at = (size_t)(nl - f->memo) + 1;
	}
}

static void memo_read(struct tfs_cfile *f)
{
	char path[4096];
	f->memo_read = 1;
	memo_path(f, path, sizeof path);
	int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
	struct stat st;
	if (fd < 0)
		return;
	if (fstat(fd, &st) == 0 && st.st_size > 0 && (uint64_t)st.st_size <= MEMO_MAX &&
	    (f->memo = malloc((size_t)st.st_size))) {
		ssize_t k = pread(fd, f->memo, (size_t)st.st_size, 0);
		f->memo_len = k > 0 ? (size_t)k : 0;
	}
	close(fd);
	memo_index(f, 0);
}

int tfs_cfile_memo_get(struct tfs_cfile *f, const char *key, char *val, size_t cap)
{
	if (!C.dir)
		return 0;
	size_t kl = strlen(key);
	int found = 0;
	pthread_mutex_lock(&f->memo_lock);
	if (!f->memo_read)
		memo_read(f);
	size_t i = f->memo_cap ? memo_find(f, key, kl) : 0;
	if (f->memo_cap && f->memo_slot[i]) {
		const char *v = f->memo + f->memo_slot[i] - 1 + kl + 1;
		const char *nl = memchr(v, '\n', f->memo_len - (size_t)(v - f->memo));
		if (nl && (size_t)(nl - v) < cap) {
			memcpy(val, v, (size_t)(nl - v));
			val[nl - v] = 0;
			found = 1;
		}
	}
	pthread_mutex_unlock(&f->memo_lock);
	return found;
}

void tfs_cfile_memo_put(struct tfs_cfile *f, const char *key, const char *val)
{
	if (!C.dir || strpbrk(key, "\t\n") || strchr(val, '\n'))
		return;
	char path[4096], line[1024];
	int n = snprintf(line, sizeof line, "%s\t%s\n", key, val);
	if (n < 0 || (size_t)n >= sizeof line)
		return;
	pthread_mutex_lock(&f->memo_lock);
	if (!f->memo_read)
		memo_read(f);
	if (!f->dir_made) {
		snprintf(path, sizeof path, "%s/%.2s/%s", C.dir, f->hex, f->hex);
		f->dir_made = mkdirs(path) == 0;
	}
	memo_path(f, path, sizeof path);
	int fd = f->dir_made ? open(path, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600) : -1;
	if (fd >= 0) {
		if (write(fd, line, (size_t)n) != n)
			(void)0; /* a memo that is not kept is worked out again */
		close(fd);
	}
	char *m = f->memo_len + (size_t)n <= MEMO_MAX ? realloc(f->memo, f->memo_len + (size_t)n) : NULL;
	if (m) {
		memcpy(m + f->memo_len, line, (size_t)n);
		f->memo = m;
		f->memo_len += (size_t)n;
		memo_index(f, f->memo_len - (size_t)n);
	}
	pthread_mutex_unlock(&f->memo_lock);
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
		double secs = (double)(tfs_cache_now_ns() - (int64_t)t0_ns) / 1e9;
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
			struct blk *nb = tfs_cache_find(f, idx);
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
			while (!tfs_cache_make_room(B, 1) && !tfs_http_aborted())
				pthread_cond_wait(&C.changed, &C.lock);
			if (tfs_http_aborted() || tfs_cache_find(f, idx) || !(nb = tfs_cache_blk_new(f, idx)))
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
			tfs_cache_enqueue(f, j, 1);
		}
		warm_progress(t0, said);
	}
}

/* Every block of every file not yet on disk, in the order a loader reads
 * them (each chain of shards from its first), through the workers at a
 * lower priority than any reader's read-ahead, a part at a time and never
 * more parts queued than may be in flight; what it loads is written to
 * the disk cache and its memory recycled. */
void *tfs_cache_warm_up(void *arg)
{
	(void)arg;
	int64_t t0 = tfs_cache_now_ns();
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
			tfs_cache_file_unref(f);
			if (nf)
				nf->refs--;                 /* taken again at the loop's top */
			pthread_cond_broadcast(&C.changed); /* tfs_cfile_free may wait */
			f = nf;
		}
		struct tfs_cfile *nh = tfs_http_aborted() ? NULL : h->all_next;
		if (nh)
			nh->refs++;
		tfs_cache_file_unref(h);
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
			(double)(tfs_cache_now_ns() - t0) / 1e9);
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
