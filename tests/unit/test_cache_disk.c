/* Unit tests of the disk cache (sources/cache_disk.c, -o cache_dir=)
 * under the block cache, through the fetch seam (cache_double.h), with no
 * network: what a second cache over the same directory serves, that a
 * failed or short answer leaves nothing there, that a damaged, truncated
 * or foreign block file is never served (dropped and fetched again), a
 * directory that fills (oldest first out), the memo, the directories it
 * refuses, a file downloaded whole into it, the warm-up, and teardown
 * with the warm-up running. */
#include <dirent.h>
#include <fcntl.h>
#include <pthread.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "sources/bstore.h"
#include "sources/cache.h"

#include "cache_double.h"

static char root[64] = "/tmp/tfs-test-cache-XXXXXX";

/* A directory under root, named once per test (not made). */
static const char *dir_named(const char *name)
{
	static char dirs[16][128];
	static int n;
	char *p = dirs[n++ % 16];
	snprintf(p, sizeof dirs[0], "%s/%s", root, name);
	return p;
}

static struct tfs_bstore *store(const char *dir, uint64_t max)
{
	struct tfs_bstore *s = NULL;
	struct tfs_diag d;
	if (tfs_disk_store_open(dir, max, &s, &d) != TFS_OK)
		fprintf(stderr, "%s\n", d.msg);
	return s;
}

/* What is under a directory (never following a link): regular files and
 * their bytes (the store's own measure), and the path of one block file:
 * block idx of the file of `key` (its key is in its header). */
struct walk {
	unsigned files;
	uint64_t bytes;
	const char *key;
	uint64_t idx;
	char found[512];
};

static void walk(const char *dir, struct walk *w)
{
	DIR *dd = opendir(dir);
	struct dirent *de;
	char name[32];
	snprintf(name, sizeof name, "%016" PRIx64 ".blk", w->idx);
	while (dd && (de = readdir(dd))) {
		char p[512];
		struct stat st;
		if (de->d_name[0] == '.' ||
		    (size_t)snprintf(p, sizeof p, "%s/%s", dir, de->d_name) >= sizeof p || lstat(p, &st) != 0)
			continue;
		if (S_ISDIR(st.st_mode)) {
			walk(p, w);
			continue;
		}
		w->files += S_ISREG(st.st_mode);
		w->bytes += (uint64_t)st.st_size;
		char head[512];
		int fd = w->key && strcmp(de->d_name, name) == 0 ? open(p, O_RDONLY) : -1;
		ssize_t k = fd >= 0 ? read(fd, head, sizeof head) : -1;
		if (k > 0 && memmem(head, (size_t)k, w->key, strlen(w->key)))
			snprintf(w->found, sizeof w->found, "%s", p);
		if (fd >= 0)
			close(fd);
	}
	if (dd)
		closedir(dd);
}

static struct walk measure(const char *dir)
{
	struct walk w = {0};
	walk(dir, &w);
	return w;
}

/* The path of block idx of key's file under dir, or "" when none. */
static const char *block_file(const char *dir, const char *key, uint64_t idx)
{
	static struct walk w;
	memset(&w, 0, sizeof w);
	w.key = key;
	w.idx = idx;
	walk(dir, &w);
	return w.found;
}

static off_t size_of(const char *path)
{
	struct stat st;
	return path[0] && stat(path, &st) == 0 ? st.st_size : -1;
}

/* One read of [off, off + len) of key's file, t's bytes, by a cache of
 * its own over dir: 1 when they are right. */
static int read_in_new_cache(const char *dir, const char *key, struct tf *t, uint64_t off, size_t len)
{
	struct tfs_cache *c = cache_of(8 * MiB, 2, MiB, store(dir, 64 * MiB), 0);
	struct tfs_cfile *f = c ? tfs_cfile_new(c, key, t->size, tf_fetch, t) : NULL;
	int ok = f && read_ok(f, t, off, len);
	tfs_cfile_free(f);
	tfs_cache_free(c);
	return ok;
}

static int read_all(struct tfs_cfile *f, struct tf *t, uint64_t step)
{
	int ok = 1;
	for (uint64_t off = 0; off < t->size; off += step)
		ok &= read_ok(f, t, off, step < t->size - off ? step : t->size - off);
	return ok;
}

/* ---- a second cache over the directory serves from it ---- */

static void test_served_from_disk(void)
{
	current = "disk: served";
	const char *dir = dir_named("served");
	struct tf t, u, v;
	tf_init(&t, 60, 3 * MiB + 99);
	tf_init(&u, 60, t.size); /* the same file, counted afresh */
	tf_init(&v, 61, t.size); /* its next version */
	struct tfs_cache *c = cache_of(2 * MiB, 2, MiB, store(dir, 64 * MiB), 0);
	struct tfs_cfile *f = tfs_cfile_new(c, "http://h/a.bin v1", t.size, tf_fetch, &t);
	CHECK(c && f && read_all(f, &t, 100000), "read through a cache over a directory");
	tfs_cfile_free(f);
	tfs_cache_free(c);
	c = cache_of(2 * MiB, 2, MiB, store(dir, 64 * MiB), 0);
	f = tfs_cfile_new(c, "http://h/a.bin v1", u.size, tf_fetch, &u);
	int ok = read_all(f, &u, 70000);
	for (int i = 0; i < 300; i++) {
		uint64_t off = rnd(u.size - 1);
		ok &= read_ok(f, &u, off, 1 + rnd(u.size - off < 400000 ? u.size - off : 400000));
	}
	tfs_cache_start(c);
	ok &= read_all(f, &u, 128 << 10);
	CHECK(ok && TF_GET(&u, calls) == 0 && c_disk_hits(c) >= u.nblocks,
	      "a second cache serves it from there, with no fetch (%u; %" PRIu64 " disk hits)",
	      TF_GET(&u, calls), c_disk_hits(c));
	struct tfs_cfile *g = tfs_cfile_new(c, "http://h/a.bin v2", v.size, tf_fetch, &v);
	CHECK(read_all(g, &v, 100000) && tf_bytes(&v) == v.size,
	      "a new version (a new key) is fetched whole");
	tfs_cfile_free(f);
	tfs_cfile_free(g);
	tfs_cache_free(c);
	tf_fini(&t);
	tf_fini(&u);
	tf_fini(&v);
}

/* ---- a failed or short answer leaves nothing there ---- */

static void test_failed_not_kept(void)
{
	current = "disk: failed answers";
	const char *dir = dir_named("failed");
	struct tf t, u;
	tf_init(&t, 62, 2 * MiB);
	tf_init(&u, 62, 2 * MiB);
	struct tfs_cache *c = cache_of(8 * MiB, 2, MiB, store(dir, 64 * MiB), 0);
	struct tfs_cfile *f = tfs_cfile_new(c, "failed", t.size, tf_fetch, &t);
	TF_SET(&t, cut, 2 * BLK + 10);
	TF_SET(&t, fail, 1);
	CHECK(read_at(f, &t, 0, 4 * BLK, NULL) == TFS_ERR_IO, "an answer cut in its third block");
	TF_SET(&t, cut, 0);
	CHECK(read_ok(f, &t, 100, 100) && read_ok(f, &t, BLK + 100, 100) && TF_GET(&t, calls) == 1,
	      "its first two blocks are served from memory");
	TF_SET(&t, half, 1);
	CHECK(read_at(f, &t, 5 * BLK, 100, NULL) == TFS_ERR_SHORT, "an answer of half its bytes");
	TF_SET(&t, half, 0);
	CHECK(measure(dir).files == 0, "none of their blocks is on disk (%u files)", measure(dir).files);
	CHECK(read_ok(f, &t, 6 * BLK, 100) && measure(dir).files == 1,
	      "a block of an answer that ended well is");
	tfs_cfile_free(f);
	tfs_cache_free(c);
	c = cache_of(8 * MiB, 2, MiB, store(dir, 64 * MiB), 0);
	f = tfs_cfile_new(c, "failed", u.size, tf_fetch, &u);
	CHECK(read_ok(f, &u, 100, 100) && read_ok(f, &u, 5 * BLK, 100) && TF_GET(&u, calls) == 2,
	      "a second cache fetches them");
	CHECK(read_ok(f, &u, 6 * BLK, 100) && TF_GET(&u, calls) == 2, "and serves the good one from disk");
	tfs_cfile_free(f);
	tfs_cache_free(c);
	tf_fini(&t);
	tf_fini(&u);
}

/* ---- block files that do not check out ---- */

static int copy_file(const char *from, const char *to)
{
	char buf[4096];
	int in = open(from, O_RDONLY), out = open(to, O_WRONLY | O_CREAT | O_TRUNC, 0600);
	ssize_t k;
	int ok = in >= 0 && out >= 0;
	while (ok && (k = read(in, buf, sizeof buf)) > 0)
		ok = write(out, buf, (size_t)k) == k;
	if (in >= 0)
		close(in);
	if (out >= 0)
		close(out);
	return ok;
}

static void test_checksums(void)
{
	current = "disk: checksums";
	const char *dir = dir_named("sums"), *k1 = "sums one", *k2 = "sums two";
	struct tf t, u;
	tf_init(&t, 63, 4 * BLK);
	tf_init(&u, 64, 4 * BLK);
	CHECK(read_in_new_cache(dir, k1, &t, 0, t.size) && measure(dir).files == 4, "4 blocks on disk");
	char p1[512];
	snprintf(p1, sizeof p1, "%s", block_file(dir, k1, 1));
	off_t whole = size_of(p1);
	CHECK(whole > (off_t)BLK, "block 1's file (%s)", p1);

	/* One flipped byte of its data: not served, and dropped. */
	int fd = open(p1, O_RDWR);
	char byte = 0;
	int ok = fd >= 0 && pread(fd, &byte, 1, whole - 1000) == 1;
	byte ^= 0x10;
	ok = ok && pwrite(fd, &byte, 1, whole - 1000) == 1;
	if (fd >= 0)
		close(fd);
	CHECK(ok, "a byte flipped");
	TF_SET(&t, fail, -1);
	unsigned calls = TF_GET(&t, calls);
	CHECK(!read_in_new_cache(dir, k1, &t, BLK, 100) && TF_GET(&t, calls) == calls + 1,
	      "the damaged block is not served: it is fetched (and that fails)");
	CHECK(size_of(p1) < 0, "its file was dropped");
	CHECK(read_in_new_cache(dir, k1, &t, 2 * BLK, 100) && TF_GET(&t, calls) == calls + 1,
	      "the good blocks beside it are served");
	TF_SET(&t, fail, 0);
	CHECK(read_in_new_cache(dir, k1, &t, BLK, 100) && TF_GET(&t, calls) == calls + 2 &&
		      size_of(p1) == whole,
	      "fetched again, and its file written anew");
	TF_SET(&t, fail, -1);
	CHECK(read_in_new_cache(dir, k1, &t, BLK, BLK) && TF_GET(&t, calls) == calls + 2,
	      "which is served from then on");

	/* Cut short (as a crash may leave it: block files are not synced). */
	char p2[512];
	snprintf(p2, sizeof p2, "%s", block_file(dir, k1, 2));
	CHECK(truncate(p2, 1000) == 0, "block 2's file truncated");
	TF_SET(&t, fail, 0);
	CHECK(read_in_new_cache(dir, k1, &t, 2 * BLK + 5, 100) && TF_GET(&t, calls) == calls + 3 &&
		      size_of(p2) == whole,
	      "a truncated block file is fetched again, and replaced");

	/* Another file's block, and another block of the same file, under
	 * its name. */
	CHECK(read_in_new_cache(dir, k2, &u, BLK, 100), "a second file");
	char p3[512], p0[512];
	snprintf(p3, sizeof p3, "%s", block_file(dir, k2, 1));
	char *slash = strrchr(p3, '/');
	if (slash)
		snprintf(slash + 1, sizeof p3 - (size_t)(slash + 1 - p3), "%016x.blk", 0);
	snprintf(p0, sizeof p0, "%s", block_file(dir, k1, 0));
	CHECK(slash && copy_file(p0, p3), "the first file's block 0 put as the second's");
	CHECK(read_in_new_cache(dir, k2, &u, 10, 100) && TF_GET(&u, calls) == 2,
	      "a block file of another key is not served");
	CHECK(copy_file(block_file(dir, k1, 3), p0), "the first file's block 3 put as its block 0");
	CHECK(read_in_new_cache(dir, k1, &t, 10, 100) && TF_GET(&t, calls) == calls + 4,
	      "a block file of another index is not served");
	tf_fini(&t);
	tf_fini(&u);
}

/* ---- a directory that fills ---- */

static void age(const char *dir, const char *key, uint64_t idx, time_t when)
{
	struct timespec ts[2] = {{when, 0}, {when, 0}};
	CHECK(utimensat(AT_FDCWD, block_file(dir, key, idx), ts, 0) == 0, "block %" PRIu64 " made older",
	      idx);
}

static void test_fills(void)
{
	current = "disk: a directory that fills";
	const char *dir = dir_named("fills"), *key = "fills";
	struct tf t;
	tf_init(&t, 65, 48 * BLK);
	CHECK(read_in_new_cache(dir, key, &t, 0, 100), "one block");
	uint64_t one = measure(dir).bytes, max = 8 * one + one / 2;
	for (uint64_t k = 1; k < 6; k++)
		read_in_new_cache(dir, key, &t, k * BLK, 100);
	CHECK(measure(dir).files == 6, "six blocks");
	time_t now = time(NULL);
	for (uint64_t k = 0; k < 6; k++)
		age(dir, key, k, now - 100 + (time_t)k);
	struct tfs_cache *c = cache_of(8 * MiB, 2, MiB, store(dir, max), 0);
	struct tfs_cfile *f = tfs_cfile_new(c, key, t.size, tf_fetch, &t);
	unsigned calls = TF_GET(&t, calls);
	CHECK(read_ok(f, &t, 50, 100) && TF_GET(&t, calls) == calls,
	      "block 0 read from disk (it is young again)");
	int ok = 1;
	for (uint64_t k = 6; k < 10; k++)
		ok &= read_ok(f, &t, k * BLK, 100);
	unsigned there = 0;
	for (uint64_t k = 0; k < 10; k++)
		there |= (block_file(dir, key, k)[0] != 0) << k;
	CHECK(ok && there == (0x3ffu & ~0x6u), "past the limit, the oldest blocks (1 and 2) went (left: %#x)",
	      there);
	CHECK(measure(dir).bytes <= max, "within the limit");
	for (uint64_t k = 10; k < 48; k++)
		ok &= read_ok(f, &t, k * BLK, 100);
	struct walk w = measure(dir);
	CHECK(ok && w.bytes <= max && w.files >= 7 && block_file(dir, key, 47)[0],
	      "after writing 4 times the limit: %" PRIu64 " bytes of %" PRIu64
	      " in %u files, the newest kept",
	      w.bytes, max, w.files);
	tfs_cfile_free(f);
	tfs_cache_free(c);
	tf_fini(&t);
}

/* ---- the memo ---- */

static void test_memo(void)
{
	current = "disk: memo";
	const char *dir = dir_named("memo");
	struct tf t;
	tf_init(&t, 66, MiB);
	char v[64];
	struct tfs_cache *c = cache_of(4 * MiB, 1, MiB, store(dir, 64 * MiB), 0);
	struct tfs_cfile *f = tfs_cfile_new(c, "memo one", t.size, tf_fetch, &t);
	tfs_cfile_memo_put(f, "sha256", "abc");
	CHECK(tfs_cfile_memo_get(f, "sha256", v, sizeof v) && strcmp(v, "abc") == 0, "a value kept");
	tfs_cfile_memo_put(f, "sha256", "defg");
	tfs_cfile_memo_put(f, "bad\tkey", "x");
	CHECK(tfs_cfile_memo_get(f, "sha256", v, sizeof v) && strcmp(v, "defg") == 0, "the last one wins");
	CHECK(!tfs_cfile_memo_get(f, "sha256", v, 4), "a value with no room is not given");
	CHECK(!tfs_cfile_memo_get(f, "bad\tkey", v, sizeof v), "a key with a tab is not kept");
	tfs_cfile_free(f);
	tfs_cache_free(c);
	c = cache_of(4 * MiB, 1, MiB, store(dir, 64 * MiB), 0);
	f = tfs_cfile_new(c, "memo one", t.size, tf_fetch, &t);
	struct tfs_cfile *g = tfs_cfile_new(c, "memo two", t.size, tf_fetch, &t);
	CHECK(tfs_cfile_memo_get(f, "sha256", v, sizeof v) && strcmp(v, "defg") == 0,
	      "another cache reads it");
	CHECK(!tfs_cfile_memo_get(f, "other", v, sizeof v) && !tfs_cfile_memo_get(g, "sha256", v, sizeof v),
	      "no other key's, no other file's");
	tfs_cfile_free(f);
	tfs_cfile_free(g);
	tfs_cache_free(c);
	c = cache_of(4 * MiB, 1, MiB, NULL, 0);
	f = tfs_cfile_new(c, "memo one", t.size, tf_fetch, &t);
	tfs_cfile_memo_put(f, "sha256", "abc");
	CHECK(!tfs_cfile_memo_get(f, "sha256", v, sizeof v), "with no cache directory, nothing is kept");
	tfs_cfile_free(f);
	tfs_cache_free(c);
	tf_fini(&t);
}

/* ---- directories refused ---- */

static void refused(const char *dir, const char *why)
{
	struct tfs_bstore *s = NULL;
	struct tfs_diag d;
	char own[256];
	snprintf(own, sizeof own, "%s/tensorfs-v1", dir);
	struct stat st;
	int had = lstat(own, &st) == 0;
	CHECK(tfs_disk_store_open(dir, 64 * MiB, &s, &d) == TFS_ERR_INVAL && !s && strstr(d.msg, "refused") &&
		      strstr(d.msg, why),
	      "%s: refused, %s (%s)", dir, why, d.msg);
	CHECK(had || lstat(own, &st) != 0, "nothing made in %s", dir);
}

static const char *made(const char *name, mode_t mode)
{
	const char *p = dir_named(name);
	CHECK(mkdir(p, 0700) == 0 && chmod(p, mode) == 0, "%s made", p);
	return p;
}

static void test_refused(void)
{
	current = "disk: refused";
	refused(made("group", 0770), "others may write it");
	refused(made("world", 0707), "others may write it");
	struct tfs_bstore *s = store(made("sticky", 01777), MiB);
	CHECK(s, "a sticky directory others may write, as /tmp, is taken");
	if (s)
		s->ops->free(s);
	const char *p = made("v1group", 0700);
	char own[256];
	snprintf(own, sizeof own, "%s/tensorfs-v1", p);
	CHECK(mkdir(own, 0700) == 0 && chmod(own, 0770) == 0, "its tensorfs-v1 group-writable");
	refused(p, "others may write its tensorfs-v1");
	p = made("v1link", 0700);
	snprintf(own, sizeof own, "%s/tensorfs-v1", p);
	CHECK(symlink(dir_named("sticky/tensorfs-v1"), own) == 0, "its tensorfs-v1 a link");
	refused(p, "not a directory");
	const char *fresh = dir_named("new/deeper");
	struct stat st;
	char mine[256];
	snprintf(mine, sizeof mine, "%s/tensorfs-v1", fresh);
	s = store(fresh, MiB);
	CHECK(s && stat(mine, &st) == 0 && (st.st_mode & 0777) == 0700,
	      "a new one is made for its user alone");
	if (s)
		s->ops->free(s);
	if (geteuid() != 0) {
		printf("skipped: directories of another user (needs root to make them)\n");
		return;
	}
	p = made("others", 0700);
	CHECK(chown(p, 65534, 65534) == 0, "given to nobody");
	refused(p, "belongs to another user");
	p = made("v1others", 0700);
	snprintf(own, sizeof own, "%s/tensorfs-v1", p);
	CHECK(mkdir(own, 0700) == 0 && chown(own, 65534, 65534) == 0, "its tensorfs-v1 given to nobody");
	refused(p, "its tensorfs-v1 belongs to another user");
}

/* ---- a file downloaded whole, into the directory ---- */

static void test_whole_on_disk(void)
{
	current = "disk: whole file";
	const char *dir = dir_named("whole");
	struct tf t, u;
	tf_init(&t, 67, 3 * MiB);
	tf_init(&u, 68, 70 * MiB);
	struct tfs_cache *c = cache_of(MiB, 2, MiB, store(dir, 64 * MiB), 0);
	struct tfs_cwhole *w = NULL, *w2 = NULL;
	struct tfs_diag d;
	unsigned nmem, ndisk;
	uint64_t mem, disk;
	const void *p;
	CHECK(tfs_cwhole_new(c, "whole", t.size, tf_whole, &t, &w, &d) == TFS_OK, "room on disk (%s)", d.msg);
	tfs_cwhole_totals(c, &nmem, &mem, &ndisk, &disk);
	CHECK(nmem == 0 && ndisk == 1 && disk == t.size, "counted on disk");
	tfs_cache_start(c);
	CHECK(w && tfs_cwhole_at(w, t.size - MiB, MiB, &p, &d) == TFS_OK &&
		      is_pattern(t.seed, t.size - MiB, p, MiB),
	      "its bytes, downloaded once");
	CHECK(w && tfs_cwhole_at(w, 0, MiB, &p, &d) == TFS_OK && is_pattern(t.seed, 0, p, MiB) &&
		      TF_GET(&t, calls) == 1,
	      "all of them");
	CHECK(measure(dir).files == 0, "in a file with no name");
	CHECK(tfs_cwhole_new(c, "large", u.size, tf_whole, &u, &w2, &d) == TFS_ERR_OPEN &&
		      strstr(d.msg, "cache_max"),
	      "a file larger than cache_max is refused (%s)", d.msg);
	tfs_cwhole_free(w);
	tfs_cwhole_totals(c, &nmem, &mem, &ndisk, &disk);
	CHECK(ndisk == 0 && disk == 0, "freed, uncounted");
	tfs_cache_free(c);
	tf_fini(&t);
	tf_fini(&u);
}

/* ---- the warm-up ---- */

static unsigned warm_done_said;
static void log_line(const char *line)
{
	if (strncmp(line, "warm-up: done", 13) == 0)
		__atomic_fetch_add(&warm_done_said, 1, __ATOMIC_RELEASE);
}

static void test_warm(void)
{
	current = "disk: warm-up";
	const char *dir = dir_named("warm");
	struct tf t[2], u[2];
	tf_init(&t[0], 69, 2 * MiB);
	tf_init(&t[1], 70, MiB + 5);
	tf_init(&u[0], 69, 2 * MiB);
	tf_init(&u[1], 70, MiB + 5);
	struct tfs_cache *c = cache_of(MiB, 2, 2 * BLK, store(dir, 64 * MiB), 1);
	struct tfs_cfile *f0 = tfs_cfile_new(c, "warm 0", t[0].size, tf_fetch, &t[0]);
	struct tfs_cfile *f1 = tfs_cfile_new(c, "warm 1", t[1].size, tf_fetch, &t[1]);
	tfs_cfile_chain(f0, f1);
	uint64_t done, total;
	int on, ok;
	tfs_cache_warm_status(c, &done, &total, &on);
	CHECK(on && done == 0 && total == t[0].size + t[1].size,
	      "asked for, not begun before the mount is up");
	tfs_cache_start(c);
	UNTIL(ok, (tfs_cache_warm_status(c, &done, &total, &on), done == total));
	CHECK(ok, "done (%" PRIu64 " of %" PRIu64 ")", done, total);
	UNTIL(ok, __atomic_load_n(&warm_done_said, __ATOMIC_ACQUIRE) == 1);
	CHECK(ok, "and said so, once");
	CHECK(tf_bytes(&t[0]) == t[0].size && tf_most_asked(&t[0]) == 1 && tf_bytes(&t[1]) == t[1].size &&
		      tf_most_asked(&t[1]) == 1,
	      "every block fetched once");
	tfs_cfile_free(f0);
	tfs_cfile_free(f1);
	tfs_cache_free(c);
	c = cache_of(MiB, 2, MiB, store(dir, 64 * MiB), 0);
	f0 = tfs_cfile_new(c, "warm 0", u[0].size, tf_fetch, &u[0]);
	f1 = tfs_cfile_new(c, "warm 1", u[1].size, tf_fetch, &u[1]);
	CHECK(read_all(f0, &u[0], 100000) && read_all(f1, &u[1], 100000) && TF_GET(&u[0], calls) == 0 &&
		      TF_GET(&u[1], calls) == 0,
	      "all of it on disk");
	tfs_cfile_free(f0);
	tfs_cfile_free(f1);
	tfs_cache_free(c);
	c = cache_of(MiB, 2, MiB, NULL, 1);
	tfs_cache_warm_status(c, &done, &total, &on);
	CHECK(!on, "no warm-up without a cache directory");
	tfs_cache_free(c);
	for (int i = 0; i < 2; i++) {
		tf_fini(&t[i]);
		tf_fini(&u[i]);
	}
}

/* The mount goes while the warm-up runs: stopped first (the fetches
 * fail fast), or its files freed under it (each waits for its blocks). */
static int test_warm_teardown(int stop_first)
{
	current = stop_first ? "disk: teardown, stopped" : "disk: teardown, files freed under the warm-up";
	struct tf t, u;
	tf_init(&t, 71, 16 * MiB);
	tf_init(&u, 72, 4 * MiB);
	struct tfs_cache *c =
		cache_of(2 * MiB, 4, MiB, store(dir_named(stop_first ? "down1" : "down2"), 64 * MiB), 1);
	struct tfs_cfile *f = tfs_cfile_new(c, "down", t.size, tf_fetch, &t);
	struct tfs_cfile *g = tfs_cfile_new(c, "down next", u.size, tf_fetch, &u);
	TF_SET(&t, gate, stop_first);
	tfs_cache_start(c);
	int ok;
	UNTIL(ok, TF_GET(&t, calls) >= 1);
	CHECK(ok, "the warm-up is fetching");
	CHECK(read_ok(g, &u, 1000, 1000), "a reader meanwhile");
	if (stop_first) {
		tfs_cache_stop(c);
		TF_SET(&t, stopped, 1);
		TF_SET(&u, stopped, 1);
	}
	ok = closed(c, f, g, NULL);
	CHECK(ok, "the files and the cache freed");
	if (!ok)
		return 0; /* (still held: leaked) */
	CHECK(!t.timed_out && !u.timed_out, "nothing waited for the gate's timeout");
	tf_fini(&t);
	tf_fini(&u);
	return 1;
}

/* The warm-up waiting for room in the middle of a part when the mount
 * stops: that part will find no worker, so its blocks must not wait for
 * one; a reader waiting for one of them gets an answer. */
static int test_warm_stopped(void)
{
	current = "disk: warm-up stopped while it waits for room";
	struct tf a, b;
	tf_init(&a, 73, 3 * BLK);
	tf_init(&b, 74, 8 * BLK);
	struct tfs_cache *c = cache_of(4 * BLK, 1, 4 * BLK, store(dir_named("stopped"), 64 * MiB), 1);
	struct tfs_cfile *fa = tfs_cfile_new(c, "held", a.size, tf_fetch, &a);
	struct tfs_cfile *fb = tfs_cfile_new(c, "waits", b.size, tf_fetch, &b);
	struct tfs_cmap *m[3] = {NULL};
	struct tfs_iov iov[3];
	struct tfs_diag d;
	unsigned n, mapped = 0;
	for (uint64_t k = 0; k < 3; k++) /* three of the four blocks held */
		mapped += tfs_cfile_map(fa, k * BLK, 100, a.size, iov, &n, &m[k], &d) == TFS_OK;
	tfs_cache_start(c);
	uint64_t done, total;
	int on, ok;
	/* (Seen once the warm-up lets go of the lock: waiting for room for
	 * the second block of the other file's first part.) */
	UNTIL(ok, (tfs_cache_warm_status(c, &done, &total, &on), done == a.size));
	CHECK(mapped == 3 && ok, "the warm-up waits for room");
	struct reader r;
	reader_start(&r, fb, &b, 100, 1000, 0);
	UNTIL(ok, c_hits(c) == 1);
	CHECK(ok && TF_GET(&b, calls) == 0, "a reader waits for the block it made");
	tfs_cache_stop(c);
	UNTIL(ok, readers_done(&r, 1));
	CHECK(ok && (r.e == TFS_OK ? r.right : r.e == TFS_ERR_IO), "the reader gets an answer once stopped");
	for (int k = 0; k < 3; k++)
		tfs_cfile_unmap(m[k]);
	ok = closed(c, fa, fb, &r); /* (wakes the reader, if not) */
	if (ok)
		reader_join(&r);
	CHECK(ok, "the files and the cache freed");
	if (!ok)
		return 0;
	tf_fini(&a);
	tf_fini(&b);
	return 1;
}

static int rm_tree(const char *dir)
{
	char cmd[128];
	snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
	return system(cmd);
}

int main(void)
{
	watchdog_start(300);
	tfs_log_set(log_line);
	if (!mkdtemp(root)) {
		perror("mkdtemp");
		return 1;
	}
	test_served_from_disk();
	test_failed_not_kept();
	test_checksums();
	test_fills();
	test_memo();
	test_refused();
	test_whole_on_disk();
	test_warm();
	if (!test_warm_teardown(1) || !test_warm_teardown(0) || !test_warm_stopped())
		return check_report(); /* (a thread still held) */
	if (rm_tree(root) != 0)
		fprintf(stderr, "could not remove %s\n", root);
	return check_report();
}
