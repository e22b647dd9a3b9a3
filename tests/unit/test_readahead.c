/* Unit tests of the read-ahead across files (sources/readahead.h), alone:
 * a checkpoint of 4 shards of 16 tensors of 16 MiB whose names cross the
 * shards in name order (layers.0, layers.1, layers.10 ...), read through
 * in each order by simulated readers; what the predictor names is checked
 * against what those readers go on to read. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sources/readahead.h"

#include "check.h"

#define MiB (1ull << 20)
#define NSH 4
#define PER 16
#define NOBJ (NSH * PER)
#define TLEN (16 * MiB)
#define HDR 4096ull
#define PART (4 * MiB)
#define AHEAD (64 * MiB)
#define READ (1 * MiB)

static char files[NSH]; /* their addresses are the file handles */
static char names[NOBJ][32];

struct o {
	const void *file;
	uint64_t begin, end;
};
static struct o objs[NOBJ];

static struct tfs_ra *model(void)
{
	struct tfs_ra *ra = tfs_ra_new(AHEAD, PART);
	for (int i = 0; i < NOBJ; i++) {
		int s = i / PER, t = i % PER;
		objs[i] = (struct o){&files[s], HDR + (uint64_t)t * TLEN, HDR + (uint64_t)(t + 1) * TLEN};
		CHECK(tfs_ra_add(ra, objs[i].file, objs[i].begin, objs[i].end, names[i]) == TFS_OK, "add %d",
		      i);
	}
	CHECK(tfs_ra_seal(ra) == TFS_OK, "seal");
	return ra;
}

static int by_name(const void *a, const void *b)
{
	return strcmp(names[*(const int *)a], names[*(const int *)b]);
}

/* Which object a predicted range lies in, or -1. */
static int owner(const struct tfs_ra_range *r)
{
	for (int i = 0; i < NOBJ; i++)
		if (objs[i].file == r->file && r->off >= objs[i].begin && r->off + r->len <= objs[i].end)
			return i;
	return -1;
}

struct tally {
	uint64_t predicted;   /* bytes named */
	uint64_t good;        /* of those, in one of the next 5 objects the reader reads */
	uint64_t stray;       /* in no object, or across two */
	uint64_t max_per_obj; /* most bytes named while one object was read */
	int opened_ready;     /* objects whose first part was named, or fenced in, before they were opened */
	uint64_t first_fence; /* at the first read of the object checked by fence_at */
	int fence_at;         /* an object index in seq, or -1 */
	unsigned fence_none;  /* reads told "no fence" */
	int64_t now;
};

/* One reader going through seq[0..n) whole, READ bytes at a time. */
static void read_through(struct tfs_ra *ra, const int *seq, int n, struct tally *t)
{
	static uint8_t named[NOBJ];
	memset(named, 0, sizeof named);
	uint64_t last_fence = 0;
	int last = -1;
	for (int i = 0; i < n; i++) {
		const struct o *x = &objs[seq[i]];
		if (named[seq[i]] || (last >= 0 && objs[last].file == x->file && x->begin == objs[last].end &&
				      last_fence >= x->end))
			t->opened_ready++;
		uint64_t here = 0;
		for (uint64_t off = x->begin; off < x->end; off += READ) {
			struct tfs_ra_range out[16];
			uint64_t fence;
			unsigned k = tfs_ra_read(ra, x->file, off, READ, x->end, t->now, out, 16, &fence);
			t->now += 1000000;
			if (fence == UINT64_MAX)
				t->fence_none++;
			if (off == x->begin && i == t->fence_at)
				t->first_fence = fence;
			last_fence = fence;
			for (unsigned j = 0; j < k; j++) {
				int w = owner(&out[j]);
				t->predicted += out[j].len;
				here += out[j].len;
				if (w < 0) {
					t->stray += out[j].len;
					continue;
				}
				if (out[j].off == objs[w].begin)
					named[w] = 1;
				for (int a = i + 1; a < n && a <= i + 5; a++)
					if (seq[a] == w)
						t->good += out[j].len;
			}
		}
		if (here > t->max_per_obj)
			t->max_per_obj = here;
		last = seq[i];
	}
}

/* The objects read in `order` through a new model: nearly all are ready
 * when opened, and 98% of the bytes named are read next (named: some
 * must be). */
static void check_order(const char *what, const int *order, int named)
{
	struct tfs_ra *ra = model();
	struct tally t = {.fence_at = -1};
	read_through(ra, order, NOBJ, &t);
	CHECK(t.opened_ready >= NOBJ - 4, "%s: %d of %d ready", what, t.opened_ready, NOBJ);
	CHECK((!named || t.predicted > 0) && t.good * 100 >= t.predicted * 98,
	      "%s: %" PRIu64 " of %" PRIu64 " read next", what, t.good, t.predicted);
	tfs_ra_free(ra);
}

static void test_orders(void)
{
	int seq[NOBJ], rev[NOBJ];
	for (int i = 0; i < NOBJ; i++)
		seq[i] = i;
	qsort(seq, NOBJ, sizeof seq[0], by_name);
	for (int i = 0; i < NOBJ; i++)
		rev[i] = seq[NOBJ - 1 - i];

	/* Name order crosses the shards (layers.19 in shard 1, then layers.2
	 * in shard 0): nearly every object is named before it is opened, and
	 * nearly all that is named is read next. */
	struct tfs_ra *ra = model();
	struct tally t = {.fence_at = -1};
	for (int i = 0; i < NOBJ; i++)
		if (seq[i] == 19)
			t.fence_at = i;
	read_through(ra, seq, NOBJ, &t);
	CHECK(t.opened_ready >= NOBJ - 4, "name order: %d of %d objects ready when opened", t.opened_ready,
	      NOBJ);
	CHECK(t.stray == 0, "name order: %" PRIu64 " bytes named outside any object", t.stray);
	CHECK(t.predicted > 0 && t.good * 100 >= t.predicted * 98,
	      "name order: %" PRIu64 " of %" PRIu64 " bytes named were read next", t.good, t.predicted);
	/* At layers.19 the reader goes on to layers.2 in another shard: the
	 * file's read-ahead stops at layers.19's end. */
	CHECK(t.first_fence == objs[19].end,
	      "name order: fence at layers.19 is %" PRIu64 ", not its end %" PRIu64, t.first_fence,
	      objs[19].end);
	tfs_ra_free(ra);

	/* Backwards in name order. */
	struct tfs_ra_range out[4];
	uint64_t fence;
	check_order("reverse", rev, 1);

	/* The file's own order: the file's read-ahead runs on through the
	 * file (the fence moves ahead of the reader), and the start of the
	 * next shard is named before the reader gets there. */
	int fileord[NOBJ];
	for (int i = 0; i < NOBJ; i++)
		fileord[i] = i;
	check_order("file order", fileord, 1);

	/* The table (index) order, here shard by shard backwards within
	 * each: an order neither file nor name order. */
	int tab[NOBJ];
	for (int i = 0; i < NOBJ; i++)
		tab[i] = NOBJ - 1 - i;
	check_order("table order backwards", tab, 0);

	/* At random: never more than one part named while one object is
	 * read (a chance match of two objects in some order), and nothing
	 * for most. */
	int rnd[NOBJ];
	for (int i = 0; i < NOBJ; i++)
		rnd[i] = i;
	srand(7);
	for (int round = 0; round < 20; round++) {
		for (int i = NOBJ - 1; i > 0; i--) {
			int j = rand() % (i + 1), s = rnd[i];
			rnd[i] = rnd[j];
			rnd[j] = s;
		}
		ra = model();
		t = (struct tally){.fence_at = -1};
		read_through(ra, rnd, NOBJ, &t);
		CHECK(t.max_per_obj <= PART, "random round %d: %" PRIu64 " bytes named during one object",
		      round, t.max_per_obj);
		CHECK(t.predicted <= (uint64_t)NOBJ * PART / 8,
		      "random round %d: %" PRIu64 " bytes named in all", round, t.predicted);
		tfs_ra_free(ra);
	}

	/* Reads that are not of an object (a header; an original file read
	 * whole) are left alone. */
	ra = model();
	CHECK(tfs_ra_read(ra, &files[0], 0, 4096, HDR + PER * TLEN, 0, out, 4, &fence) == 0 &&
		      fence == UINT64_MAX,
	      "a header read");
	CHECK(tfs_ra_read(ra, &files[0], HDR + TLEN, 4096, HDR + PER * TLEN, 0, out, 4, &fence) == 0 &&
		      fence == UINT64_MAX,
	      "an original file read");
	static char other;
	CHECK(tfs_ra_read(ra, &other, 0, 4096, 8192, 0, out, 4, &fence) == 0, "a file of no model");
	tfs_ra_free(ra);
}

/* Two readers at once, one in name order and one backwards in name order,
 * read by turns: each is told of its own next objects, and each is given
 * about half the look-ahead. */
static void test_two_readers(void)
{
	int seq[NOBJ];
	for (int i = 0; i < NOBJ; i++)
		seq[i] = i;
	qsort(seq, NOBJ, sizeof seq[0], by_name);
	struct tfs_ra *ra = model();
	int64_t now = 0;
	uint64_t named[2] = {0, 0}, good[2] = {0, 0}, most[2] = {0, 0};
	/* reader 0: seq[0..32) forward; reader 1: seq[63..32] backward */
	for (int i = 0; i < NOBJ / 2; i++) {
		int ob[2] = {seq[i], seq[NOBJ - 1 - i]};
		uint64_t here[2] = {0, 0};
		for (uint64_t d = 0; d < TLEN; d += READ)
			for (int r = 0; r < 2; r++) {
				const struct o *x = &objs[ob[r]];
				struct tfs_ra_range out[16];
				uint64_t fence;
				unsigned k = tfs_ra_read(ra, x->file, x->begin + d, READ, x->end, now, out,
							 16, &fence);
				now += 1000000;
				for (unsigned j = 0; j < k; j++) {
					int w = owner(&out[j]);
					named[r] += out[j].len;
					here[r] += out[j].len;
					for (int a = 1; a <= 5 && w >= 0; a++) {
						int next = r == 0 ? i + a : NOBJ - 1 - i - a;
						if (next >= 0 && next < NOBJ && seq[next] == w)
							good[r] += out[j].len;
					}
				}
			}
		for (int r = 0; r < 2; r++)
			if (i > 4 && here[r] > most[r])
				most[r] = here[r];
	}
	for (int r = 0; r < 2; r++) {
		CHECK(named[r] > 0 && good[r] * 100 >= named[r] * 95,
		      "two readers: reader %d: %" PRIu64 " of %" PRIu64 " named bytes its own next", r,
		      good[r], named[r]);
		/* Once past its start, what a reader is told per object is its
		 * share (half the look-ahead), never the whole. */
		CHECK(most[r] <= AHEAD / 2 + PART,
		      "two readers: reader %d told %" PRIu64 " bytes in one object", r, most[r]);
	}
	tfs_ra_free(ra);
}

int main(int argc, char **argv)
{
	check_args(argc, argv);
	for (int i = 0; i < NOBJ; i++)
		snprintf(names[i], sizeof names[i], "layers.%d", i);
	RUN(test_orders);
	RUN(test_two_readers);
	return check_report();
}
