/* The disk cache (-o cache_dir=), a block store under the memory cache
 * (sources/bstore.h): one file per block, written under a temporary name
 * and renamed, checked when read, evicted oldest first; and a memo per
 * file beside its blocks. */
#include "sources/bstore.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

#include <xxh_x86dispatch.h>

#include "core/hash.h"
#include "sources/cachedir.h"
#include "core/table.h"

/* Seeds the block files' checksums and the name of a file's directory. */
#define DISK_SEED 0x3c6ef372fe94f82bull

struct disk_store {
	struct tfs_bstore base;
	pthread_mutex_t lock; /* the byte counts */
	char *dir;            /* DIR/tensorfs-v1 */
	uint64_t used;
	uint64_t written; /* ever, by this process: what a scan may miss */
	int evicting;
};

struct disk_file {
	struct disk_store *s;
	char *key;
	size_t kl;
	char hex[33]; /* its directory: a hash of the key */
	int dir_made;
	/* Its memo (memo_get): the file's lines, once read, and an index of
	 * them by key (offset + 1 of each key's last line). */
	pthread_mutex_t memo_lock;
	char *memo;
	size_t memo_len;
	size_t *memo_slot, memo_cap, memo_n;
	int memo_read;
};

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

/* ---- the disk cache ---- */

/* A block file: this header, the key, then the data. */
struct disk_hdr {
	char magic[8]; /* "TFSBLK02" */
	uint32_t key_len, data_len;
	uint64_t idx;
	uint64_t data_hash;
	/* Written 0. Bit 0 said the data had reached the disk, and spared it
	 * the check on read: no longer looked at, since every read checks. */
	uint64_t flags;
	uint64_t hdr_hash; /* of the fields above and the key */
};

static void blk_path(const struct disk_file *f, uint64_t idx, char *out, size_t n)
{
	snprintf(out, n, "%s/%.2s/%s/%016llx.blk", f->s->dir, f->hex, f->hex, (unsigned long long)idx);
}

/* The checksum of a block's data: XXH3 (libxxhash) runs at memory speed,
 * where our own four-lane sum cost a disk cache hit a tenth of its time;
 * its dispatching entry picks the CPU's widest vectors at run time (the
 * same sums, twice as fast as the SSE2 build here: 30-42 against 16-19
 * GB/s over 256 KiB blocks).
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

/* The block from its file when one is there and checks out, read into
 * buf once, in one call with its header and key, and its data checked
 * there against its sum before anyone is served: the bytes checked are
 * the bytes served, read once (splicing from the file would read them a
 * second time). A file that does not check out (torn, damaged, another
 * key) is removed. */
static int disk_get(struct tfs_bfile *bf, uint64_t idx, uint32_t len, char *buf)
{
	struct disk_file *f = (struct disk_file *)bf;
	char path[4096];
	blk_path(f, idx, path, sizeof path);
	int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOATIME | O_NOFOLLOW | O_NONBLOCK);
	if (fd < 0 && errno == EPERM)
		fd = open(path,
			  O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK); /* O_NOATIME needs the owner */
	if (fd < 0)
		return 0;
	struct disk_hdr h;
	size_t kl = f->kl;
	char *key = malloc(kl + 1);
	struct iovec v[3] = {{&h, sizeof h}, {key, kl}, {buf, len}};
	struct stat st;
	int ok = key && preadv(fd, v, 3, 0) == (ssize_t)(sizeof h + kl + len) &&
		 memcmp(h.magic, "TFSBLK02", 8) == 0 && h.key_len == kl && h.data_len == len &&
		 h.idx == idx && memcmp(key, f->key, kl) == 0 && hdr_hash(&h, key) == h.hdr_hash &&
		 fstat(fd, &st) == 0 && (uint64_t)st.st_size == sizeof h + kl + len &&
		 data_sum(buf, len) == h.data_hash;
	if (ok)
		futimens(fd, NULL); /* its age for the eviction order */
	free(key);
	close(fd);
	if (!ok)
		unlink(path);
	return ok;
}

/* Over the limit: remove the oldest block files until 90% of it is used.
 * The directory may be shared by other mounts, so it is measured again
 * rather than trusted. One thread at a time (the others go on), which is
 * why blocks written during a pass are added to its measure: overwriting
 * the count with the scan alone lost them, and the directory grew past
 * the limit under concurrent readers. */
static void disk_evict(struct disk_store *s)
{
	pthread_mutex_lock(&s->lock);
	if (s->evicting) {
		pthread_mutex_unlock(&s->lock);
		return;
	}
	s->evicting = 1;
	/* A block written during a scan may be counted twice, which only
	 * makes the next pass remove more; a few passes end it. */
	for (int pass = 0; pass < 4 && s->used > s->base.max; pass++) {
		uint64_t written = s->written;
		pthread_mutex_unlock(&s->lock);
		uint64_t measured = tfs_cachedir_trim(s->dir, 3, s->base.max / 10 * 9);
		pthread_mutex_lock(&s->lock);
		s->used = measured + (s->written - written);
	}
	s->evicting = 0;
	pthread_mutex_unlock(&s->lock);
}

/* Writes the block's file atomically: a temporary name, then rename. It
 * is never synced: a crash may leave it torn or empty under its name, and
 * the read that checks it drops it (an fdatasync per block, and a thread
 * that synced the rest later, bought reads that skipped the check). */
static void disk_put(struct tfs_bfile *bf, uint64_t idx, const void *data, uint32_t len)
{
	struct disk_file *f = (struct disk_file *)bf;
	struct disk_store *s = f->s;
	char path[4096], tmp[4200];
	size_t kl = f->kl;
	if (!f->dir_made) {
		snprintf(path, sizeof path, "%s/%.2s/%s", s->dir, f->hex, f->hex);
		if (mkdirs(path) != 0)
			return;
		f->dir_made = 1;
	}
	blk_path(f, idx, path, sizeof path);
	snprintf(tmp, sizeof tmp, "%s.%d.%lx.tmp", path, (int)getpid(), (unsigned long)pthread_self());
	struct disk_hdr h;
	memset(&h, 0, sizeof h);
	memcpy(h.magic, "TFSBLK02", 8);
	h.key_len = (uint32_t)kl;
	h.data_len = len;
	h.idx = idx;
	h.data_hash = data_sum(data, len);
	h.hdr_hash = hdr_hash(&h, f->key);
	/* A leftover of a crash may hold the name (same pid and thread). */
	unlink(tmp);
	int fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
	if (fd < 0)
		return;
	int ok = write(fd, &h, sizeof h) == (ssize_t)sizeof h && write(fd, f->key, kl) == (ssize_t)kl &&
		 write(fd, data, len) == (ssize_t)len;
	ok = close(fd) == 0 && ok;
	if (!ok || rename(tmp, path) != 0) {
		unlink(tmp);
		return;
	}
	pthread_mutex_lock(&s->lock);
	s->used += sizeof h + kl + len;
	s->written += sizeof h + kl + len;
	int over = s->used > s->base.max;
	pthread_mutex_unlock(&s->lock);
	if (over)
		disk_evict(s);
}

/* ---- the memo ---- */

/* One file per cached file, "KEY\tVALUE\n" lines appended (a line written
 * by one write(2) with O_APPEND lands whole, whoever else appends), the
 * last line of a key winning; read once per mount, then kept in memory
 * with an index by key (a lookup per tensor must not scan the file).
 * A memo is at most this large (a hash line per tensor of a large model
 * is a few megabytes). */
#define MEMO_MAX (64u << 20)

static void memo_path(const struct disk_file *f, char *out, size_t n)
{
	snprintf(out, n, "%s/%.2s/%s/memo", f->s->dir, f->hex, f->hex);
}

/* The slot of `key` in the index: its line's, or the empty one where it
 * would go. */
static size_t memo_find(const struct disk_file *f, const char *key, size_t kl)
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
static void memo_index(struct disk_file *f, size_t from)
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

static void memo_read(struct disk_file *f)
{
	char path[4096];
	f->memo_read = 1;
	memo_path(f, path, sizeof path);
	int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK); /* (a FIFO never blocks) */
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

static int disk_memo_get(struct tfs_bfile *bf, const char *key, char *val, size_t cap)
{
	struct disk_file *f = (struct disk_file *)bf;
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

static void disk_memo_put(struct tfs_bfile *bf, const char *key, const char *val)
{
	struct disk_file *f = (struct disk_file *)bf;
	if (strpbrk(key, "\t\n") || strchr(val, '\n'))
		return;
	char path[4096], line[1024];
	int n = snprintf(line, sizeof line, "%s\t%s\n", key, val);
	if (n < 0 || (size_t)n >= sizeof line)
		return;
	pthread_mutex_lock(&f->memo_lock);
	if (!f->memo_read)
		memo_read(f);
	if (!f->dir_made) {
		snprintf(path, sizeof path, "%s/%.2s/%s", f->s->dir, f->hex, f->hex);
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

/* ---- the store ---- */

static struct tfs_bfile *disk_open(struct tfs_bstore *bs, const char *key)
{
	struct disk_file *f = calloc(1, sizeof *f);
	if (!f || !(f->key = strdup(key))) {
		free(f);
		return NULL;
	}
	f->s = (struct disk_store *)bs;
	f->kl = strlen(key);
	pthread_mutex_init(&f->memo_lock, NULL);
	uint64_t h1 = tfs_hash(key, f->kl, DISK_SEED), h2 = tfs_hash(key, f->kl, ~DISK_SEED);
	snprintf(f->hex, sizeof f->hex, "%016llx%016llx", (unsigned long long)h1, (unsigned long long)h2);
	return (struct tfs_bfile *)f;
}

static void disk_close(struct tfs_bfile *bf)
{
	struct disk_file *f = (struct disk_file *)bf;
	if (!f)
		return;
	free(f->key);
	free(f->memo);
	free(f->memo_slot);
	pthread_mutex_destroy(&f->memo_lock);
	free(f);
}

static int disk_has(struct tfs_bfile *bf, uint64_t idx, uint32_t len)
{
	const struct disk_file *f = (const struct disk_file *)bf;
	char path[4096];
	struct stat st;
	blk_path(f, idx, path, sizeof path);
	return lstat(path, &st) == 0 && S_ISREG(st.st_mode) &&
	       (uint64_t)st.st_size == sizeof(struct disk_hdr) + f->kl + len;
}

static int disk_scratch(struct tfs_bstore *bs)
{
	return open(((struct disk_store *)bs)->dir, O_TMPFILE | O_RDWR | O_CLOEXEC, 0600);
}

static void disk_free(struct tfs_bstore *bs)
{
	struct disk_store *s = (struct disk_store *)bs;
	if (!s)
		return;
	pthread_mutex_destroy(&s->lock);
	free(s->dir);
	free(s);
}

static const struct tfs_bstore_ops disk_ops = {
	.open = disk_open,
	.close = disk_close,
	.get = disk_get,
	.put = disk_put,
	.has = disk_has,
	.memo_get = disk_memo_get,
	.memo_put = disk_memo_put,
	.scratch = disk_scratch,
	.free = disk_free,
};

/* DIR/tensorfs-v1, made and checked, and measured. */
tfs_err tfs_disk_store_open(const char *dir, uint64_t max, struct tfs_bstore **out, struct tfs_diag *d)
{
	size_t n = strlen(dir) + 32;
	struct disk_store *s = calloc(1, sizeof *s);
	if (!s || !(s->dir = malloc(n))) {
		free(s);
		return tfs_fail(d, TFS_ERR_NOMEM, "out of memory");
	}
	s->base.ops = &disk_ops;
	s->base.where = s->dir;
	s->base.max = max;
	pthread_mutex_init(&s->lock, NULL);
	snprintf(s->dir, n, "%s/tensorfs-v1", dir);
	/* Nothing is made in a directory that is refused. */
	const char *why = untrusted_parent(dir);
	if (why || mkdirs(s->dir) != 0 || access(s->dir, R_OK | W_OK | X_OK) != 0 ||
	    (why = untrusted_dir(dir, s->dir))) {
		char q[TFS_QPATH_MAX];
		tfs_quote_path(q, sizeof q, dir);
		tfs_err e =
			why ? tfs_fail(
				      d, TFS_ERR_INVAL,
				      "-o cache_dir=%s: refused: %s; a cache directory must be writable by its user only",
				      q, why)
			    : tfs_fail(d, TFS_ERR_INVAL, "-o cache_dir=%s: cannot use it: %s", q,
				       strerror(errno));
		disk_free(&s->base);
		return e;
	}
	s->used = tfs_cachedir_used(s->dir, 3);
	*out = &s->base;
	return TFS_OK;
}
