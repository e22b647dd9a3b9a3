/* Unit tests of the block cache (sources/cache.h) in memory, through its
 * fetch seam, with no network: files of pattern bytes behind a fetch of
 * the test's own (cache_double.h) that counts what it is asked, fails,
 * delivers short or holds a call on demand. The disk cache below it is
 * test_cache_disk.c's. Every wait is bounded; no timing is asserted. */
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sources/cache.h"

#include "cache_double.h"

/* A hold of a failure longer than any test waits (tfs_cache_set_hold). */
#define LONG_HOLD_NS (600ll * 1000000000ll)

static unsigned asked(struct tf *t, uint64_t b)
{
	pthread_mutex_lock(&t->lock);
	unsigned n = t->asked[b];
	pthread_mutex_unlock(&t->lock);
	return n;
}

/* ---- every read returns the file's bytes ---- */

static void test_bytes(void)
{
	current = "bytes";
	const uint64_t size = 5 * MiB + 4321, nb = (size + BLK - 1) / BLK;
	struct tf t, u;
	tf_init(&t, 1, size);
	tf_init(&u, 2, 4 * MiB);
	struct tfs_cache *c = cache_of(4 * MiB, 4, MiB, NULL, 0);
	struct tfs_cfile *f = tfs_cfile_new(c, "bytes", size, tf_fetch, &t);
	struct tfs_cfile *g = tfs_cfile_new(c, "direct", u.size, tf_fetch, &u);
	struct tfs_diag d;
	unsigned reads = 0, wrong = 0, maps = 0, badmap = 0;
	for (unsigned i = 0; i < 3000; i++) {
		uint64_t off = rnd(size), len;
		if (i % 3 == 1) { /* across a block's end */
			off = (1 + rnd(nb - 1)) * BLK - 1 - rnd(9000);
			len = 2 + rnd(20000);
		} else if (i % 3 == 2) { /* at the file's end */
			len = 1 + rnd(400000);
			off = size - len;
		} else {
			len = 1 + rnd(600000);
		}
		len = len < size - off ? len : size - off;
		if (i % 2) {
			reads++;
			wrong += !read_ok(f, &t, off, len);
			continue;
		}
		/* Mapped: the pieces of each block, in order, pinned. */
		struct tfs_iov iov[8];
		unsigned n = 0;
		struct tfs_cmap *m = NULL;
		char *buf = malloc(len);
		size_t at = 0;
		int ok = tfs_cfile_map(f, off, len, size, iov, &n, &m, &d) == TFS_OK &&
			 n == (off + len - 1) / BLK - off / BLK + 1;
		for (unsigned k = 0; ok && k < n; k++) {
			ok = at + iov[k].len <= len;
			if (ok)
				memcpy(buf + at, iov[k].p, iov[k].len);
			at += iov[k].len;
		}
		badmap += !(ok && at == len && is_pattern(t.seed, off, buf, len));
		maps++;
		free(buf);
		tfs_cfile_unmap(m);
	}
	CHECK(wrong == 0, "%u of %u reads (anywhere, across blocks, at the end) were not the file's bytes",
	      wrong, reads);
	CHECK(badmap == 0, "%u of %u maps were not the file's bytes, one piece per block", badmap, maps);
	CHECK(TF_GET(&t, worker_calls) == 0, "before the mount is up, only readers fetch");
	unsigned unaligned = 0;
	for (unsigned k = 0; k < t.nlog; k++)
		unaligned +=
			t.log[k].off % BLK || (t.log[k].len % BLK && t.log[k].off + t.log[k].len != size);
	CHECK(t.nlog > 0 && unaligned == 0, "every fetch is of whole blocks (%u of %u not)", unaligned,
	      t.nlog);
	CHECK(c_hits(c) > 0 && tf_bytes(&t) > size,
	      "some reads hit, some blocks were evicted and fetched again");

	char b[16];
	CHECK(tfs_cfile_read(f, b, 0, size, size, &d) == TFS_OK, "an empty read at the end");
	CHECK(tfs_cfile_read(f, b, 1, size, size, &d) == TFS_ERR_SHORT, "a byte past the end");
	CHECK(tfs_cfile_read(f, b, 11, size - 10, size, &d) == TFS_ERR_SHORT, "a read running past the end");
	CHECK(tfs_cfile_read(f, b, 10, UINT64_MAX - 5, size, &d) == TFS_ERR_SHORT, "an offset near 2^64");
	struct tfs_iov iov[4];
	unsigned n = 9;
	struct tfs_cmap *m = NULL;
	CHECK(tfs_cfile_map(f, size - 1, 2, size, iov, &n, &m, &d) == TFS_ERR_SHORT && n == 0 && !m,
	      "a map past the end");

	/* A range over a quarter of the budget goes straight to the reader. */
	unsigned before = TF_GET(&u, calls);
	uint64_t misses = c_misses(c);
	CHECK(read_ok(g, &u, 100, MiB + 1) && TF_GET(&u, calls) == before + 1 && u.log[before].off == 100 &&
		      u.log[before].len == MiB + 1,
	      "a large read is one fetch of its range");
	CHECK(read_ok(g, &u, 300000, 10) && c_misses(c) == misses + 1 && asked(&u, 1) == 2,
	      "... and none of its blocks are kept");
	tfs_cfile_free(f);
	tfs_cfile_free(g);
	tfs_cache_free(c);
	tf_fini(&t);
	tf_fini(&u);
}

/* ---- many readers of one block ---- */

/* Eight readers of one block: one fetch, held at the gate until the
 * seven others wait for it; they all get its bytes, or all its failure. */
static void many_readers(int failing)
{
	current = failing ? "many readers, failed fetch" : "many readers";
	struct tf t;
	tf_init(&t, 3 + (unsigned)failing, 2 * MiB);
	struct tfs_cache *c = cache_of(4 * MiB, 4, MiB, NULL, 0);
	tfs_cache_set_hold(c, LONG_HOLD_NS); /* the re-read below comes within it, however slow the machine */
	struct tfs_cfile *f = tfs_cfile_new(c, failing ? "fail" : "ok", t.size, tf_fetch, &t);
	struct reader r[8];
	TF_SET(&t, gate, 1);
	TF_SET(&t, fail, failing);
	for (int i = 0; i < 8; i++)
		reader_start(&r[i], f, &t, 3 * BLK + (uint64_t)i * 9000, 4000 + (size_t)i * 500, 0);
	int ok;
	UNTIL(ok, TF_GET(&t, held) == 1 && c_hits(c) == 7);
	CHECK(ok, "one fetch held, 7 readers waiting for it (held %u, hits %" PRIu64 ")", TF_GET(&t, held),
	      c_hits(c));
	TF_SET(&t, gate, 0);
	UNTIL(ok, readers_done(r, 8));
	CHECK(ok, "the readers returned");
	int right = 0, io = 0;
	for (int i = 0; i < 8; i++) {
		reader_join(&r[i]);
		right += r[i].right;
		io += r[i].e == TFS_ERR_IO;
	}
	CHECK(TF_GET(&t, calls) == 1, "one fetch of the block, not %u", TF_GET(&t, calls));
	if (!failing)
		CHECK(right == 8, "every reader got the bytes (%d of 8)", right);
	else
		CHECK(io == 8, "every reader got the failure (%d of 8)", io);
	if (failing) {
		/* The kernel asks again at once for the page a failed read
		 * needed: that one ask is answered from the failure. */
		tfs_err e = read_at(f, &t, 3 * BLK, 10, NULL);
		CHECK(e == TFS_ERR_IO && TF_GET(&t, calls) == 1,
		      "the immediate re-read gets the failure, with no fetch");
		CHECK(read_ok(f, &t, 3 * BLK, 10) && TF_GET(&t, calls) == 2,
		      "the next read fetches it again");
	}
	tfs_cfile_free(f);
	tfs_cache_free(c);
	tf_fini(&t);
}

/* ---- failed and short fetches ---- */

/* A failed read's block is answered once from its failure if asked at
 * once: a second read of it fetches it. 1 when that read is right. */
static int reread_ok(struct tfs_cfile *f, struct tf *t, uint64_t off, size_t len)
{
	return read_ok(f, t, off, len) || read_ok(f, t, off, len);
}

static void test_failures(void)
{
	current = "failed fetch";
	struct tf t, p;
	tf_init(&t, 5, 2 * MiB);
	tf_init(&p, 6, 2 * MiB);
	struct tfs_cache *c = cache_of(4 * MiB, 1, BLK, NULL, 0);
	struct tfs_cfile *f = tfs_cfile_new(c, "f", t.size, tf_fetch, &t);
	struct tfs_cfile *g = tfs_cfile_new(c, "g", p.size, tf_fetch, &p);
	TF_SET(&t, fail, 1);
	CHECK(read_at(f, &t, 0, 100, NULL) == TFS_ERR_IO && TF_GET(&t, calls) == 1,
	      "the reader gets the failure");
	tfs_cache_set_hold(c, 0); /* the hold is over */
	CHECK(read_ok(f, &t, 0, 100) && TF_GET(&t, calls) == 2, "past the hold, the block is fetched again");

	/* A prefetch that failed with no reader waiting is not held. With one
	 * worker, the second prefetch's call starts once the first is done. */
	tfs_cache_start(c);
	TF_SET(&p, fail, 1);
	tfs_cfile_prefetch(g, 4 * BLK, BLK);
	tfs_cfile_prefetch(g, 6 * BLK, BLK);
	int ok;
	UNTIL(ok, TF_GET(&p, ended) == 2);
	CHECK(ok && TF_GET(&p, worker_calls) == 2, "two prefetches, by the worker");
	CHECK(read_ok(g, &p, 4 * BLK, 100) && asked(&p, 4) == 2,
	      "a block whose prefetch failed unseen is fetched anew by its reader");
	CHECK(read_ok(g, &p, 6 * BLK, 100) && asked(&p, 6) == 1, "one prefetched is served");
	tfs_cfile_free(f);
	tfs_cfile_free(g);
	tfs_cache_free(c);
	tf_fini(&t);
	tf_fini(&p);
}

/* A read of blocks [first, first + 4) whose one fetch delivers `cut`
 * bytes (telling them landed) and fails: the blocks published before
 * the failure (all of whose bytes and one more had come) are served from
 * memory, the others are fetched again. */
static void cut_run(struct tfs_cfile *f, struct tf *t, uint64_t first, uint64_t cut, unsigned published)
{
	TF_SET(t, cut, cut);
	TF_SET(t, fail, 1);
	CHECK(read_at(f, t, first * BLK, 4 * BLK, NULL) == TFS_ERR_IO, "cut at %" PRIu64 ": the read fails",
	      cut);
	TF_SET(t, cut, 0);
	unsigned served = 0, again = 0;
	for (uint64_t b = first; b < first + 4; b++) {
		int right = reread_ok(f, t, b * BLK + 7, 1000);
		served += right && asked(t, b) == 1;
		again += right && asked(t, b) == 2;
	}
	CHECK(served == published && again == 4 - published,
	      "cut at %" PRIu64 ": %u blocks served from memory (want %u), %u fetched again", cut, served,
	      published, again);
}

static void test_short(void)
{
	current = "short fetch";
	struct tf t;
	tf_init(&t, 7, 5 * MiB);
	struct tfs_cache *c = cache_of(8 * MiB, 4, MiB, NULL, 0);
	struct tfs_cfile *f = tfs_cfile_new(c, "short", t.size, tf_fetch, &t);
	TF_SET(&t, half, 1);
	CHECK(read_at(f, &t, BLK + 5, 100, NULL) == TFS_ERR_SHORT,
	      "a fetch that delivers half: the read fails");
	TF_SET(&t, half, 0);
	CHECK(reread_ok(f, &t, BLK + 5, 100) && asked(&t, 1) == 2, "... and its bytes are never served");
	cut_run(f, &t, 4, 2 * BLK + 10, 2);
	cut_run(f, &t, 8, 2 * BLK, 1);  /* a byte past a block must have come */
	cut_run(f, &t, 12, 4 * BLK, 3); /* the last block waits for the end */

	/* The failure held for the re-read is the block the reader got it
	 * from; the blocks after it, whose failure reached no one, are
	 * fetched again at once. */
	TF_SET(&t, cut, BLK + 1);
	TF_SET(&t, fail, 1);
	tfs_cache_set_hold(c, LONG_HOLD_NS);
	CHECK(read_at(f, &t, 16 * BLK, 3 * BLK, NULL) == TFS_ERR_IO, "a read cut in its second block");
	TF_SET(&t, cut, 0);
	CHECK(read_ok(f, &t, 18 * BLK, 100) && asked(&t, 18) == 2,
	      "its third block, unseen, is fetched at once");
	tfs_err e = read_at(f, &t, 17 * BLK, 100, NULL);
	CHECK(e == TFS_ERR_IO && asked(&t, 17) == 1, "its second block answers the re-read with the failure");
	CHECK(read_ok(f, &t, 17 * BLK, 100) && asked(&t, 17) == 2, "... then is fetched again");
	tfs_cfile_free(f);
	tfs_cache_free(c);
	tf_fini(&t);
}

/* A block is served as soon as its bytes have landed, before the rest
 * of its part. */
static void test_landing(void)
{
	current = "landing";
	struct tf t;
	tf_init(&t, 8, 2 * MiB);
	struct tfs_cache *c = cache_of(8 * MiB, 2, MiB, NULL, 0);
	struct tfs_cfile *f = tfs_cfile_new(c, "landing", t.size, tf_fetch, &t);
	tfs_cache_start(c);
	TF_SET(&t, cut, BLK + 1);
	TF_SET(&t, gate, 1);
	tfs_cfile_prefetch(f, 0, 4 * BLK);
	int ok;
	UNTIL(ok, TF_GET(&t, held) == 1);
	CHECK(ok && t.log[0].len == 4 * BLK, "a part of 4 blocks is one fetch");
	struct reader r[2];
	reader_start(&r[0], f, &t, 1000, 5000, 0);
	UNTIL(ok, readers_done(r, 1));
	CHECK(ok && r[0].right && TF_GET(&t, held) == 1, "its first block is read while the rest is coming");
	reader_start(&r[1], f, &t, BLK + 1000, 5000, 0);
	TF_SET(&t, gate, 0);
	UNTIL(ok, readers_done(r + 1, 1));
	CHECK(ok && r[1].right && TF_GET(&t, calls) == 1, "its second once it came, with no other fetch");
	reader_join(&r[0]);
	reader_join(&r[1]);
	tfs_cfile_free(f);
	tfs_cache_free(c);
	tf_fini(&t);
}

/* ---- eviction under pressure ---- */

/* Every block buffer a map showed: buffers are never given back, so
 * their number is the memory the cache took. */
struct bases {
	const char *p[4096];
	unsigned n;
};

static void note_base(struct bases *s, const void *p)
{
	for (unsigned i = 0; i < s->n; i++)
		if (s->p[i] == p)
			return;
	if (s->n < 4096)
		s->p[s->n++] = p;
}

static int map_note(struct tfs_cfile *f, struct tf *t, uint64_t off, size_t len, struct bases *s)
{
	struct tfs_iov iov[8];
	unsigned n = 0;
	struct tfs_cmap *m = NULL;
	struct tfs_diag d;
	int ok = tfs_cfile_map(f, off, len, t->size, iov, &n, &m, &d) == TFS_OK;
	for (unsigned k = 0; ok && k < n; k++) {
		ok = is_pattern(t->seed, off, iov[k].p, iov[k].len);
		note_base(s, (const char *)iov[k].p - (k ? 0 : off % BLK));
		off += iov[k].len;
	}
	tfs_cfile_unmap(m);
	return ok;
}

static void test_bounded(void)
{
	current = "eviction: memory bounded";
	struct tf t;
	tf_init(&t, 9, 16 * MiB);
	struct tfs_cache *c = cache_of(MiB, 2, MiB, NULL, 0); /* 4 blocks */
	struct tfs_cfile *f = tfs_cfile_new(c, "bounded", t.size, tf_fetch, &t);
	struct bases s = {.n = 0};
	unsigned wrong = 0;
	for (uint64_t off = 0; off < t.size; off += 64 << 10)
		wrong += !map_note(f, &t, off, 64 << 10, &s);
	for (int i = 0; i < 1000; i++) {
		uint64_t off = rnd(t.size - 100000);
		wrong += !map_note(f, &t, off, 1 + rnd(100000), &s);
	}
	tfs_cache_start(c); /* and a sequential reader with read-ahead */
	for (uint64_t off = 0; off < t.size; off += 128 << 10)
		wrong += !map_note(f, &t, off, 128 << 10, &s);
	CHECK(wrong == 0, "%u reads were not the file's bytes", wrong);
	CHECK(s.n <= 4 + 2, "%u block buffers for a budget of 4 (and a read's 2 over it)", s.n);
	CHECK(tf_bytes(&t) > 2 * t.size, "blocks were evicted and fetched again (%" PRIu64 " bytes)",
	      tf_bytes(&t));
	tfs_cfile_free(f);
	tfs_cache_free(c);
	tf_fini(&t);
}

/* A block read through (whose bytes the page cache holds now) gives its
 * buffer first, before older blocks not read whole; unless its file's
 * readers keep no copy (tfs_cfile_keep): least recently used first. */
static void recycle_order(int keep)
{
	current = keep ? "eviction: keep" : "eviction: read through first";
	struct tf t;
	tf_init(&t, 10, 8 * BLK);
	struct tfs_cache *c = cache_of(4 * BLK, 1, BLK, NULL, 0);
	struct tfs_cfile *f = tfs_cfile_new(c, "order", t.size, tf_fetch, &t);
	if (keep)
		tfs_cfile_keep(f);
	int ok = read_ok(f, &t, 0, 100) && read_ok(f, &t, 2 * BLK, 100) && read_ok(f, &t, 3 * BLK, 100) &&
		 read_ok(f, &t, BLK, BLK) && read_ok(f, &t, 4 * BLK, 100);
	uint64_t stays = keep ? 1 : 0, goes = keep ? 0 : 1;
	CHECK(ok && read_ok(f, &t, stays * BLK, 100) && asked(&t, stays) == 1, "block %" PRIu64 " stayed",
	      stays);
	CHECK(read_ok(f, &t, goes * BLK, 100) && asked(&t, goes) == 2, "block %" PRIu64 " made room", goes);
	tfs_cfile_free(f);
	tfs_cache_free(c);
	tf_fini(&t);
}

/* Once over the budget (a reader always gets its blocks: here while four
 * others are mapped), a block needs only one buffer: the least recently
 * used block gives its, not every block in memory; and prefetching goes
 * on, with the buffers there are. */
static void test_over_budget(void)
{
	current = "eviction: over budget once";
	struct tf t;
	tf_init(&t, 16, 8 * BLK);
	struct tfs_cache *c = cache_of(4 * BLK, 1, BLK, NULL, 0);
	struct tfs_cfile *f = tfs_cfile_new(c, "over", t.size, tf_fetch, &t);
	struct tfs_cmap *m[4] = {NULL};
	struct tfs_iov iov[4];
	struct tfs_diag d;
	unsigned n, mapped = 0;
	for (uint64_t k = 0; k < 4; k++)
		mapped += tfs_cfile_map(f, k * BLK, 100, t.size, iov, &n, &m[k], &d) == TFS_OK;
	int ok = mapped == 4 && read_ok(f, &t, 4 * BLK, 100);
	for (int k = 0; k < 4; k++)
		tfs_cfile_unmap(m[k]);
	CHECK(ok && read_ok(f, &t, 5 * BLK, 100), "a fifth block while four are mapped, then a sixth");
	unsigned kept = 0;
	for (uint64_t k = 1; k < 5; k++)
		kept += read_ok(f, &t, k * BLK + 200, 100) && asked(&t, k) == 1;
	CHECK(kept == 4, "only the least recently used block made room (%u of blocks 1-4 kept)", kept);
	CHECK(read_ok(f, &t, 0, 100) && asked(&t, 0) == 2, "block 0 did");
	tfs_cache_start(c);
	tfs_cfile_prefetch(f, 7 * BLK, BLK);
	UNTIL(ok, TF_GET(&t, worker_calls) == 1);
	CHECK(ok, "a prefetch still finds room");
	tfs_cfile_free(f);
	tfs_cache_free(c);
	tf_fini(&t);
}

/* Blocks one reader's prefetch brought and nobody read yet are not pushed
 * out by another's prefetch: that one gets the room left. */
static void test_unread_kept(void)
{
	current = "eviction: unread prefetch kept";
	struct tf a, b;
	tf_init(&a, 11, 9 * BLK);
	tf_init(&b, 12, 32 * BLK);
	struct tfs_cache *c = cache_of(16 * BLK, 1, 4 * BLK, NULL, 0);
	struct tfs_cfile *fa = tfs_cfile_new(c, "a", a.size, tf_fetch, &a);
	struct tfs_cfile *fb = tfs_cfile_new(c, "b", b.size, tf_fetch, &b);
	tfs_cache_start(c);
	tfs_cfile_prefetch(fa, 0, a.size); /* parts 0-3, 4-7, 8 */
	int ok;
	UNTIL(ok, TF_GET(&a, calls) == 3); /* one worker: the first two parts are in */
	CHECK(ok, "a's prefetch ran");
	tfs_cfile_prefetch(fb, 0, b.size);
	uint64_t hits = c_hits(c);
	unsigned wrong = 0;
	for (uint64_t k = 0; k < 8; k++)
		wrong += !read_ok(fa, &a, k * BLK + 50, 100);
	CHECK(wrong == 0 && c_hits(c) == hits + 8 && TF_GET(&a, calls) == 3 && tf_most_asked(&a) == 1,
	      "a's 8 prefetched blocks are all still there (hits %" PRIu64 ")", c_hits(c) - hits);
	hits = c_hits(c);
	CHECK(read_ok(fb, &b, 6 * BLK, 100) && c_hits(c) == hits + 1, "b's prefetch got the 7 blocks left");
	uint64_t misses = c_misses(c);
	CHECK(read_ok(fb, &b, 7 * BLK, 100) && c_misses(c) == misses + 1, "... and no more");
	tfs_cfile_free(fa);
	tfs_cfile_free(fb);
	tfs_cache_free(c);
	tf_fini(&a);
	tf_fini(&b);
}

/* ---- read-ahead ---- */

/* Reads [from, to) of f in steps, checking the bytes; 1 when all right. */
static int read_seq(struct tfs_cfile *f, struct tf *t, uint64_t from, uint64_t to, uint64_t step)
{
	int ok = 1;
	for (uint64_t off = from; off < to; off += step)
		ok &= read_ok(f, t, off, step < to - off ? step : to - off);
	return ok;
}

static void test_readahead(void)
{
	current = "read-ahead";
	struct tf t, u, r;
	tf_init(&t, 13, 8 * MiB);
	tf_init(&u, 14, 8 * MiB);
	tf_init(&r, 15, 128 * MiB);
	struct tfs_cache *c = cache_of(16 * MiB, 2, MiB, NULL, 0);
	struct tfs_cfile *f = tfs_cfile_new(c, "before", t.size, tf_fetch, &t);
	struct tfs_cfile *g = tfs_cfile_new(c, "after", u.size, tf_fetch, &u);
	struct tfs_cfile *h = tfs_cfile_new(c, "random", r.size, tf_fetch, &r);
	CHECK(read_seq(f, &t, 0, 4 * MiB, 128 << 10), "a sequential reader's bytes");
	CHECK(TF_GET(&t, worker_calls) == 0 && tf_bytes(&t) == 4 * MiB && tf_most_asked(&t) == 1,
	      "before the mount is up: no read-ahead, only the blocks read");
	tfs_cfile_prefetch(f, 6 * MiB, MiB);
	uint64_t misses = c_misses(c);
	CHECK(read_ok(f, &t, 4 * MiB, 100) && read_ok(f, &t, 6 * MiB, 100) && c_misses(c) == misses + 2,
	      "... nor any prefetch");

	tfs_cache_start(c);
	CHECK(read_seq(g, &u, 0, MiB, 128 << 10), "after: a sequential reader's bytes");
	uint64_t hits = c_hits(c);
	CHECK(read_ok(g, &u, MiB, 128 << 10) && c_hits(c) == hits + 1, "its next block was fetched ahead");
	CHECK(read_seq(g, &u, MiB + (128 << 10), u.size, 128 << 10), "to the end");
	uint64_t most = 0;
	for (unsigned k = 0; k < u.nlog; k++)
		most = u.log[k].worker && u.log[k].len > most ? u.log[k].len : most;
	CHECK(TF_GET(&u, worker_calls) > 0 && most >= 2 * BLK && most <= MiB,
	      "by the workers, in parts of up to 1 MiB (largest %" PRIu64 ")", most);
	CHECK(tf_bytes(&u) == u.size && tf_most_asked(&u) == 1,
	      "every block fetched once (%" PRIu64 " bytes)", tf_bytes(&u));

	/* A reader at random, 8 MiB apart: only its blocks. */
	static const int slots[16] = {7, 2, 12, 0, 9, 14, 4, 11, 1, 15, 6, 3, 10, 5, 13, 8};
	misses = c_misses(c);
	hits = c_hits(c);
	int ok = 1;
	for (int i = 0; i < 16; i++)
		ok &= read_ok(h, &r, (uint64_t)slots[i] * 8 * MiB + 1000 + rnd(1000), 5000);
	CHECK(ok && c_misses(c) == misses + 16 && c_hits(c) == hits, "a random reader misses every read");
	misses = c_misses(c);
	for (int i = 0; i < 4; i++)
		ok &= read_ok(h, &r, (uint64_t)slots[i] * 8 * MiB + BLK, 10);
	CHECK(ok && c_misses(c) == misses + 4 && TF_GET(&r, worker_calls) == 0,
	      "... and nothing was fetched ahead of it");
	tfs_cfile_free(f);
	tfs_cfile_free(g);
	tfs_cfile_free(h);
	tfs_cache_free(c);
	tf_fini(&t);
	tf_fini(&u);
	tf_fini(&r);
}

/* A stream's read-ahead goes on into the file chained after its file, and
 * stops at a fence (where the reader goes elsewhere). */
static void test_chain(void)
{
	current = "read-ahead: chained files";
	struct tf t[6];
	struct tfs_cfile *f[6];
	struct tfs_cache *c = cache_of(16 * MiB, 2, MiB, NULL, 0);
	for (int i = 0; i < 6; i++) {
		char key[16];
		snprintf(key, sizeof key, "s%d", i);
		tf_init(&t[i], 20 + (unsigned)i, (i % 2 ? 2 : 1) * MiB);
		f[i] = tfs_cfile_new(c, key, t[i].size, tf_fetch, &t[i]);
	}
	tfs_cfile_chain(f[0], f[1]); /* f[2] -> f[3] are not */
	tfs_cfile_chain(f[4], f[5]);
	tfs_cache_start(c);
	CHECK(read_seq(f[0], &t[0], 0, MiB, 64 << 10), "a shard read through");
	uint64_t hits = c_hits(c);
	CHECK(read_ok(f[1], &t[1], 0, 1000) && c_hits(c) == hits + 1 && asked(&t[1], 0) == 1,
	      "the next shard's first block was fetched ahead");
	CHECK(read_seq(f[2], &t[2], 0, MiB, 64 << 10), "a file read through");
	uint64_t misses = c_misses(c);
	CHECK(read_ok(f[3], &t[3], 0, 1000) && c_misses(c) == misses + 1, "a file not chained to it was not");
	struct tfs_diag d;
	char *buf = malloc(64 << 10);
	int ok = 1;
	for (uint64_t off = 0; off < MiB; off += 64 << 10)
		ok &= tfs_cfile_read_fenced(f[4], buf, 64 << 10, off, MiB, 2 * BLK, &d) == TFS_OK &&
		      is_pattern(t[4].seed, off, buf, 64 << 10);
	misses = c_misses(c);
	CHECK(ok && read_ok(f[5], &t[5], 0, 1000) && c_misses(c) == misses + 1,
	      "a fenced stream stays out of the chained file");
	free(buf);
	for (int i = 0; i < 6; i++) {
		tfs_cfile_free(f[i]);
		tf_fini(&t[i]);
	}
	tfs_cache_free(c);
}

/* ---- files downloaded whole ---- */

static unsigned logged;
static void count_log(const char *line)
{
	(void)line;
	logged++;
}

static void test_whole(void)
{
	current = "whole files";
	struct tf t, u, v;
	tf_init(&t, 30, MiB + 77);
	tf_init(&u, 31, 2 * MiB);
	tf_init(&v, 32, 8 * MiB);
	struct tfs_cache *c = cache_of(4 * MiB, 2, MiB, NULL, 0);
	tfs_cache_set_hold(c, LONG_HOLD_NS);
	struct tfs_cwhole *w = NULL, *w2 = NULL, *w3 = NULL;
	struct tfs_diag d;
	unsigned nmem, ndisk;
	uint64_t mem, disk;
	const void *p = NULL;
	char *buf = malloc(MiB);
	CHECK(tfs_cwhole_new(c, "w", t.size, tf_whole, &t, &w, &d) == TFS_OK, "room in memory");
	tfs_cwhole_totals(c, &nmem, &mem, &ndisk, &disk);
	CHECK(nmem == 1 && mem == t.size && ndisk == 0, "counted in memory");
	CHECK(tfs_cwhole_at(w, 0, 10, &p, &d) == TFS_ERR_UNHANDLED, "before the mount is up, no download");
	CHECK(tfs_cwhole_read(w, buf, 1000, 5000, &d) == TFS_OK && is_pattern(t.seed, 5000, buf, 1000) &&
		      t.nlog == 1 && t.log[0].off == 5000 && t.log[0].len == 1000,
	      "... but a range from the start of an answer");
	tfs_cache_start(c);
	CHECK(tfs_cwhole_read(w, buf, 1000, t.size - 1000, &d) == TFS_OK &&
		      is_pattern(t.seed, t.size - 1000, buf, 1000) && t.nlog == 2 && t.log[1].off == 0 &&
		      t.log[1].len == t.size,
	      "then one download of the whole file");
	CHECK(tfs_cwhole_at(w, 0, MiB, &p, &d) == TFS_OK && is_pattern(t.seed, 0, p, MiB) &&
		      TF_GET(&t, calls) == 2,
	      "served in place from then on");
	CHECK(tfs_cwhole_read(w, buf, 2, t.size - 1, &d) == TFS_ERR_SHORT, "a read past the end");

	/* A download cut short: what landed is served, the rest fails (held
	 * for the re-read), and a download after it goes on from there. */
	tfs_log_set(count_log);
	CHECK(tfs_cwhole_new(c, "w2", u.size, tf_whole, &u, &w2, &d) == TFS_OK, "a second one");
	TF_SET(&u, cut, 600000);
	TF_SET(&u, fail, 1);
	CHECK(tfs_cwhole_read(w2, buf, 1000, 0, &d) == TFS_OK && is_pattern(u.seed, 0, buf, 1000),
	      "its start, as it lands");
	CHECK(tfs_cwhole_read(w2, buf, 1000, 700000, &d) == TFS_ERR_IO && strstr(d.msg, "cut"),
	      "past the cut: the failure (%s)", d.msg);
	CHECK(tfs_cwhole_read(w2, buf, 1000, 700000, &d) == TFS_ERR_IO && TF_GET(&u, calls) == 1,
	      "again at once: the same, with no download");
	CHECK(tfs_cwhole_read(w2, buf, 1000, 500000, &d) == TFS_OK && is_pattern(u.seed, 500000, buf, 1000),
	      "what landed is served");
	tfs_cache_set_hold(c, 0); /* the hold is over */
	CHECK(tfs_cwhole_read(w2, buf, 1000, 700000, &d) == TFS_OK && is_pattern(u.seed, 700000, buf, 1000) &&
		      TF_GET(&u, calls) == 2 && u.resumed_at == 600000 && !u.kept_wrong,
	      "past the hold, a download from the cut on (from %" PRIu64 ")", u.resumed_at);
	CHECK(logged == 1, "the failure was logged once (%u)", logged);
	tfs_log_set(NULL);

	CHECK(tfs_cwhole_new(c, "w3", v.size, tf_whole, &v, &w3, &d) == TFS_ERR_OPEN && !w3 &&
		      strstr(d.msg, "cache_dir"),
	      "too large for memory, with no cache directory: refused (%s)", d.msg);
	CHECK(tfs_cwhole_new(c, "w3", MiB, tf_whole, &v, &w3, &d) == TFS_ERR_OPEN &&
		      strstr(d.msg, "beside the others"),
	      "one more that does not fit beside the others (%s)", d.msg);
	tfs_cwhole_free(w);
	tfs_cwhole_free(w2);
	tfs_cwhole_totals(c, &nmem, &mem, &ndisk, &disk);
	CHECK(nmem == 0 && mem == 0, "freed, uncounted");
	free(buf);
	tfs_cache_free(c);
	tf_fini(&t);
	tf_fini(&u);
	tf_fini(&v);
}

/* ---- teardown, two caches ---- */

/* Two caches share nothing: the same key, two files; the counters and
 * the workers of each are its own. */
static void test_two_caches(void)
{
	current = "two caches";
	struct tf t, u;
	tf_init(&t, 40, 2 * MiB);
	tf_init(&u, 41, 2 * MiB);
	struct tfs_cache *c1 = cache_of(4 * MiB, 2, MiB, NULL, 0), *c2 = cache_of(4 * MiB, 2, MiB, NULL, 0);
	struct tfs_cfile *f1 = tfs_cfile_new(c1, "same", t.size, tf_fetch, &t);
	struct tfs_cfile *f2 = tfs_cfile_new(c2, "same", u.size, tf_fetch, &u);
	CHECK(read_ok(f1, &t, 0, 100) && read_ok(f2, &u, 0, 100) && read_ok(f1, &t, 50, 100),
	      "each its own file's bytes");
	CHECK(c_misses(c1) == 1 && c_hits(c1) == 1 && c_misses(c2) == 1 && c_hits(c2) == 0,
	      "each its own counters");
	tfs_cache_start(c1);
	tfs_cache_start(c2);
	tfs_cache_stop(c1);
	tfs_cfile_prefetch(f2, BLK, BLK);
	int ok;
	UNTIL(ok, TF_GET(&u, worker_calls) == 1);
	CHECK(ok, "the other's workers go on when one stops");
	tfs_cfile_free(f1);
	tfs_cache_free(c1);
	CHECK(read_ok(f2, &u, BLK, 1000) && read_ok(f2, &u, MiB, 1000), "and when it is freed");
	tfs_cfile_free(f2);
	tfs_cache_free(c2);
	tf_fini(&t);
	tf_fini(&u);
}

/* The mount goes while prefetches are held in flight: stopped, the
 * fetches fail fast, the files and the cache are freed. */
static void test_teardown(void)
{
	current = "teardown";
	struct tf t;
	tf_init(&t, 50, 16 * MiB);
	struct tfs_cache *c = cache_of(8 * MiB, 4, MiB, NULL, 0);
	struct tfs_cfile *f = tfs_cfile_new(c, "down", t.size, tf_fetch, &t);
	tfs_cache_start(c);
	TF_SET(&t, gate, 1);
	tfs_cfile_prefetch(f, 0, 8 * MiB);
	int ok;
	UNTIL(ok, TF_GET(&t, held) >= 1);
	CHECK(ok, "prefetches in flight");
	tfs_cache_stop(c);
	TF_SET(&t, stopped, 1);
	ok = closed(c, f, NULL, NULL);
	CHECK(ok, "the file and the cache freed");
	if (!ok)
		return; /* (still held: leaked) */
	CHECK(!t.timed_out, "nothing waited for the gate's timeout");
	tf_fini(&t);
}

/* After tfs_cache_stop (the mount going away, its last reads still in
 * flight), a read whose read-ahead queues blocks must not leave them
 * LOADING for no worker: the next read of the same reader would wait for
 * one until the file is freed, and the FUSE loop waits for that reader
 * before anything is freed. */
static void test_read_after_stop(void)
{
	current = "read after stop";
	struct tf t;
	tf_init(&t, 51, 8 * MiB);
	struct tfs_cache *c = cache_of(8 * MiB, 2, MiB, NULL, 0);
	struct tfs_cfile *f = tfs_cfile_new(c, "late", t.size, tf_fetch, &t);
	tfs_cache_start(c);
	tfs_cache_stop(c);
	nap_ms(50); /* (the idle workers leave) */
	struct reader r[2];
	reader_start(&r[0], f, &t, 0, 128 << 10, 2 * MiB);
	int ok;
	UNTIL(ok, readers_done(r, 1));
	CHECK(ok && r[0].right, "a sequential reader after the stop reads on");
	tfs_cfile_prefetch(f, 3 * MiB, MiB);
	reader_start(&r[1], f, &t, 3 * MiB + 100, 1000, 0);
	UNTIL(ok, readers_done(r + 1, 1));
	CHECK(ok && r[1].right, "so does the reader of a block prefetched after it");
	tfs_cfile_free(f); /* (wakes them, if not) */
	reader_join(&r[0]);
	reader_join(&r[1]);
	tfs_cache_free(c);
	tf_fini(&t);
}

int main(void)
{
	watchdog_start(300);
	test_bytes();
	many_readers(0);
	many_readers(1);
	test_failures();
	test_short();
	test_landing();
	test_bounded();
	recycle_order(0);
	recycle_order(1);
	test_over_budget();
	test_unread_kept();
	test_readahead();
	test_chain();
	test_whole();
	test_two_caches();
	test_teardown();
	test_read_after_stop();
	return check_report();
}
