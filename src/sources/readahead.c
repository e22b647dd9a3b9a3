/* The read-ahead across files (sources/readahead.h): the orders a model's
 * objects can be read in, the readers seen going through them, and what
 * each is predicted to read next. */
#include "sources/readahead.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

/* The orders a reader is matched against; each is followed forward or
 * backward, a relation being an order and a direction (bit 2 * k + back). */
enum { ORD_TABLE, ORD_FILE, ORD_NAME, NORD };
#define NREL (2 * NORD)
#define REL_FILE_FWD (1u << (2 * ORD_FILE))
#define NONE UINT32_MAX
/* Readers told apart at once; a new one takes the place of the one idle
 * longest. */
#define CHAINS 8
/* A read this close to the start of an object opens it (the kernel's
 * readahead sends several reads at once, out of order by up to its
 * window), and this close to where a reader stopped continues it. */
#define SLACK (4ull << 20)
/* A reader counts as active for the sharing this long after its last read. */
#define ACTIVE_NS 500000000ll
/* Objects looked at past the reader's, at most, in one read. */
#define WALK_MAX 64

struct obj {
	const void *file;
	uint64_t begin, end;
	uint32_t fileno;
	uint32_t pos[NORD]; /* its place in each order */
	const char *name;   /* until sealed */
};

struct chain {
	uint64_t used; /* 0: free */
	int64_t last_ns;
	uint32_t obj;  /* the object it reads */
	uint64_t next; /* where its last read ended */
	unsigned rels; /* relations every transition so far agreed with */
	unsigned conf; /* transitions in a row that agreed */
	/* What was predicted already, along its first relation: successors
	 * before the iss_k-th wholly, the iss_k-th up to iss_off bytes. */
	unsigned iss_rel;
	uint32_t iss_k;
	uint64_t iss_off;
	int amb_done; /* the parts for an ambiguous successor were named */
};

struct tfs_ra {
	pthread_mutex_t lock;
	uint64_t ahead, part;
	struct obj *o;
	uint32_t n, cap;
	const void **files;
	uint32_t nfiles, files_cap;
	uint32_t *seq[NORD]; /* seq[k][i]: the i-th object in order k */
	uint32_t *byend;     /* objects by (file, end): a read's object */
	int closed;          /* sealed: no more objects */
	int sealed;          /* the orders are worked out */
	struct chain ch[CHAINS];
	uint64_t clock;
};

struct tfs_ra *tfs_ra_new(uint64_t ahead, uint64_t part)
{
	struct tfs_ra *ra = calloc(1, sizeof *ra);
	if (!ra)
		return NULL;
	pthread_mutex_init(&ra->lock, NULL);
	ra->ahead = ahead;
	ra->part = part ? part : 1;
	return ra;
}

static void clear(struct tfs_ra *ra)
{
	free(ra->o);
	free(ra->files);
	free(ra->byend);
	for (int k = 0; k < NORD; k++)
		free(ra->seq[k]);
	ra->o = NULL;
	ra->files = NULL;
	ra->byend = NULL;
	memset(ra->seq, 0, sizeof ra->seq);
	ra->n = ra->cap = ra->nfiles = ra->files_cap = 0;
	ra->sealed = ra->closed = 0;
	memset(ra->ch, 0, sizeof ra->ch);
}

void tfs_ra_free(struct tfs_ra *ra)
{
	if (!ra)
		return;
	clear(ra);
	pthread_mutex_destroy(&ra->lock);
	free(ra);
}

void tfs_ra_reset(struct tfs_ra *ra)
{
	pthread_mutex_lock(&ra->lock);
	clear(ra);
	pthread_mutex_unlock(&ra->lock);
}

tfs_err tfs_ra_add(struct tfs_ra *ra, const void *file, uint64_t begin, uint64_t end, const char *name)
{
	if (end <= begin)
		return TFS_OK; /* nothing to read in it */
	tfs_err e = TFS_OK;
	pthread_mutex_lock(&ra->lock);
	uint32_t fno = ra->nfiles;
	/* Files come shard by shard: the last one is nearly always it. */
	for (uint32_t i = ra->nfiles; i-- > 0;)
		if (ra->files[i] == file) {
			fno = i;
			break;
		}
	if (ra->closed) {
		e = TFS_ERR_INVAL;
	} else if (fno == ra->nfiles && ra->nfiles == ra->files_cap) {
		uint32_t c = ra->files_cap ? 2 * ra->files_cap : 8;
		const void **f = realloc(ra->files, c * sizeof *f);
		if (!f)
			e = TFS_ERR_NOMEM;
		else {
			ra->files = f;
			ra->files_cap = c;
		}
	}
	if (!e && ra->n == ra->cap) {
		uint32_t c = ra->cap ? 2 * ra->cap : 64;
		struct obj *o = c > ra->cap ? realloc(ra->o, c * sizeof *o) : NULL;
		if (!o)
			e = TFS_ERR_NOMEM;
		else {
			ra->o = o;
			ra->cap = c;
		}
	}
	if (!e) {
		if (fno == ra->nfiles)
			ra->files[ra->nfiles++] = file;
		ra->o[ra->n] =
			(struct obj){.file = file, .begin = begin, .end = end, .fileno = fno, .name = name};
		ra->o[ra->n].pos[ORD_TABLE] = ra->n;
		ra->n++;
	}
	pthread_mutex_unlock(&ra->lock);
	return e;
}

/* Comparisons for qsort_r, whose context is the objects being sorted. */
static int by_file_offset(const void *a, const void *b, void *ctx)
{
	const struct obj *sorting = ctx;
	const struct obj *x = &sorting[*(const uint32_t *)a], *y = &sorting[*(const uint32_t *)b];
	if (x->fileno != y->fileno)
		return x->fileno < y->fileno ? -1 : 1;
	if (x->begin != y->begin)
		return x->begin < y->begin ? -1 : 1;
	return *(const uint32_t *)a < *(const uint32_t *)b ? -1 : 1;
}

static int by_name(const void *a, const void *b, void *ctx)
{
	const struct obj *sorting = ctx;
	const struct obj *x = &sorting[*(const uint32_t *)a], *y = &sorting[*(const uint32_t *)b];
	int c = strcmp(x->name ? x->name : "", y->name ? y->name : "");
	if (c)
		return c;
	return *(const uint32_t *)a < *(const uint32_t *)b ? -1 : 1;
}

static int by_file_end(const void *a, const void *b, void *ctx)
{
	const struct obj *sorting = ctx;
	const struct obj *x = &sorting[*(const uint32_t *)a], *y = &sorting[*(const uint32_t *)b];
	if (x->fileno != y->fileno)
		return x->fileno < y->fileno ? -1 : 1;
	if (x->end != y->end)
		return x->end < y->end ? -1 : 1;
	return x->begin < y->begin ? -1 : x->begin > y->begin;
}

/* The orders worked out, under the lock, at the first read after sealing:
 * a mount whose reads never ask (a local one) never pays for sorting half
 * a million names. On failure, nothing is predicted. */
static void work_out(struct tfs_ra *ra)
{
	tfs_err e = TFS_OK;
	for (int k = 0; k < NORD && !e; k++)
		if (!(ra->seq[k] = malloc((ra->n ? ra->n : 1) * sizeof(uint32_t))))
			e = TFS_ERR_NOMEM;
	if (!e && !(ra->byend = malloc((ra->n ? ra->n : 1) * sizeof(uint32_t))))
		e = TFS_ERR_NOMEM;
	if (!e) {
		for (uint32_t i = 0; i < ra->n; i++)
			ra->seq[ORD_TABLE][i] = ra->seq[ORD_FILE][i] = ra->seq[ORD_NAME][i] = ra->byend[i] =
				i;
		qsort_r(ra->seq[ORD_FILE], ra->n, sizeof(uint32_t), by_file_offset, ra->o);
		qsort_r(ra->seq[ORD_NAME], ra->n, sizeof(uint32_t), by_name, ra->o);
		qsort_r(ra->byend, ra->n, sizeof(uint32_t), by_file_end, ra->o);
		for (uint32_t i = 0; i < ra->n; i++) {
			ra->o[ra->seq[ORD_FILE][i]].pos[ORD_FILE] = i;
			ra->o[ra->seq[ORD_NAME][i]].pos[ORD_NAME] = i;
		}
		for (uint32_t i = 0; i < ra->n; i++)
			ra->o[i].name = NULL; /* the caller's memory */
		ra->sealed = 1;
	}
	if (e)
		clear(ra);
}

tfs_err tfs_ra_seal(struct tfs_ra *ra)
{
	pthread_mutex_lock(&ra->lock);
	ra->closed = 1;
	pthread_mutex_unlock(&ra->lock);
	return TFS_OK;
}

/* The object a read of `file` at off, within an object ending at limit,
 * falls in; NONE for a read that is not of a registered object (a header,
 * an original file read whole). */
static uint32_t find(const struct tfs_ra *ra, const void *file, uint64_t off, uint64_t limit)
{
	uint32_t fno = NONE;
	for (uint32_t i = 0; i < ra->nfiles; i++)
		if (ra->files[i] == file) {
			fno = i;
			break;
		}
	if (fno == NONE)
		return NONE;
	uint32_t lo = 0, hi = ra->n;
	while (lo < hi) {
		uint32_t mid = lo + (hi - lo) / 2;
		const struct obj *m = &ra->o[ra->byend[mid]];
		if (m->fileno < fno || (m->fileno == fno && m->end < limit))
			lo = mid + 1;
		else
			hi = mid;
	}
	for (; lo < ra->n; lo++) {
		const struct obj *m = &ra->o[ra->byend[lo]];
		if (m->fileno != fno || m->end != limit)
			break;
		if (off >= m->begin && off < m->end)
			return ra->byend[lo];
	}
	return NONE;
}

static uint32_t succ(const struct tfs_ra *ra, uint32_t o, unsigned rel)
{
	unsigned k = rel / 2;
	uint32_t p = ra->o[o].pos[k];
	if (rel & 1)
		return p ? ra->seq[k][p - 1] : NONE;
	return p + 1 < ra->n ? ra->seq[k][p + 1] : NONE;
}

/* The relations under which b follows a. */
static unsigned relations(const struct tfs_ra *ra, uint32_t a, uint32_t b)
{
	unsigned m = 0;
	for (unsigned r = 0; r < NREL; r++)
		if (succ(ra, a, r) == b)
			m |= 1u << r;
	return m;
}

static unsigned first_rel(unsigned m)
{
	return (unsigned)__builtin_ctz(m);
}

/* The reader this read belongs to: one reading this object near here, or
 * one whose object this one follows in an order it may be going by; a new
 * one (in the place of the one idle longest) if none. */
static struct chain *reader(struct tfs_ra *ra, uint32_t o, uint64_t off, uint64_t len)
{
	/* Any read of the object a reader reads is that reader's: the
	 * kernel's readahead runs ahead of it by more than any slack, in
	 * reads that several threads hand over out of order (a read taken
	 * for a new reader's lost the order learnt). */
	struct chain *c = NULL, *oldest = &ra->ch[0];
	uint64_t dist = UINT64_MAX;
	for (int i = 0; i < CHAINS; i++) {
		struct chain *t = &ra->ch[i];
		uint64_t dd = off > t->next ? off - t->next : t->next - off;
		if (t->used && t->obj == o && dd < dist) {
			c = t;
			dist = dd;
		}
		if (t->used < oldest->used)
			oldest = t;
	}
	if (c) {
		if (off + len > c->next)
			c->next = off + len;
		return c;
	}
	/* An object opened: whose successor is it? One whose order agrees
	 * first, the most recent next. */
	struct chain *best = NULL, *done = NULL;
	unsigned best_m = 0;
	int best_agrees = 0;
	if (off - ra->o[o].begin < SLACK)
		for (int i = 0; i < CHAINS; i++) {
			struct chain *t = &ra->ch[i];
			/* Only a reader that got to the end of its object goes on
			 * to the next (a random reader matched one of the last
			 * eight objects most of the time). */
			int at_end = t->used && t->next + SLACK >= ra->o[t->obj].end;
			if (at_end && (!done || t->used > done->used))
				done = t;
			unsigned m = at_end ? relations(ra, t->obj, o) : 0;
			int agrees = (m & t->rels) != 0;
			if (m && (!best || agrees > best_agrees ||
				  (agrees == best_agrees && t->used > best->used))) {
				best = t;
				best_m = m;
				best_agrees = agrees;
			}
		}
	if (best) {
		c = best;
		unsigned was = c->rels;
		if (c->rels & best_m) {
			c->rels &= best_m;
			c->conf++;
		} else {
			c->rels = best_m;
			c->conf = 1;
		}
		/* What was predicted is now one object nearer. */
		if (was && c->iss_k > 1 && (c->rels >> c->iss_rel & 1u)) {
			c->iss_k--;
		} else {
			c->iss_k = 1;
			c->iss_off = 0;
		}
		c->iss_rel = first_rel(c->rels);
		c->amb_done = 0;
	} else {
		/* Likely the reader that finished an object last, gone
		 * elsewhere: it keeps one place (a reader going at random
		 * left a trail of finished objects that later ones matched
		 * by chance). */
		c = done ? done : oldest;
		memset(c, 0, sizeof *c);
	}
	c->obj = o;
	c->next = off + len;
	return c;
}

static void emit(struct tfs_ra_range *out, unsigned max, unsigned *n, const struct obj *x, uint64_t from,
		 uint64_t to)
{
	if (*n < max && to > from)
		out[(*n)++] = (struct tfs_ra_range){x->file, x->begin + from, to - from};
}

unsigned tfs_ra_read(struct tfs_ra *ra, const void *file, uint64_t off, uint64_t len, uint64_t limit,
		     int64_t now_ns, struct tfs_ra_range *out, unsigned max, uint64_t *fence)
{
	unsigned n = 0;
	*fence = UINT64_MAX;
	if (!ra)
		return 0;
	pthread_mutex_lock(&ra->lock);
	if (ra->closed && !ra->sealed)
		work_out(ra);
	uint32_t o = ra->sealed ? find(ra, file, off, limit) : NONE;
	if (o == NONE) {
		pthread_mutex_unlock(&ra->lock);
		return 0;
	}
	struct chain *c = reader(ra, o, off, len);
	c->used = ++ra->clock;
	c->last_ns = now_ns;
	const struct obj *cur = &ra->o[o];
	/* No order seen yet: the cache's own rule (one part past the
	 * object's end). */
	if (!c->rels) {
		pthread_mutex_unlock(&ra->lock);
		return 0;
	}
	uint32_t s1 = NONE;
	int ambiguous = 0;
	for (unsigned r = 0; r < NREL; r++)
		if (c->rels >> r & 1u) {
			uint32_t s = succ(ra, o, r);
			if (r != first_rel(c->rels) && s != s1)
				ambiguous = 1;
			if (r == first_rel(c->rels))
				s1 = s;
		}
	*fence = cur->end;
	unsigned active = 0;
	for (int i = 0; i < CHAINS; i++)
		if (ra->ch[i].used && now_ns - ra->ch[i].last_ns < ACTIVE_NS)
			active++;
	uint64_t share = ra->ahead / (active ? active : 1);
	if (share < ra->part)
		share = ra->part;
	if (ambiguous) {
		/* Orders that disagree on what comes next: the first part of
		 * the first one's, once, and no more until the reader shows
		 * which (a reader going at random may match two by chance). */
		if (!c->amb_done && c->conf >= 2 && s1 != NONE) {
			const struct obj *x = &ra->o[s1];
			uint64_t l = x->end - x->begin;
			emit(out, max, &n, x, 0, l < ra->part ? l : ra->part);
		}
		c->amb_done = 1;
		pthread_mutex_unlock(&ra->lock);
		return n;
	}
	/* One order: the objects after this one in it, as far as the share
	 * reaches past the reader. Those that follow it in its own file
	 * without a gap are the file read-ahead's (the fence moves past
	 * them); the others are named here, in whole parts. */
	/* Trust grows with the transitions that agreed: one part after one
	 * or two, doubling with each after (two in a row can be chance; a
	 * reader in name order first looks like one in file order, and the
	 * whole window run ahead in file order was fetched twice). */
	uint64_t trust = c->conf <= 2 ? ra->part : c->conf < 12 ? ra->part << (c->conf - 2) : share;
	/* Three files in a row in the file's own order: a loader, given the
	 * whole window at once as the file's read-ahead always gave it (name
	 * and file order part by the second file, layers.1 -> layers.10). */
	if ((c->rels & REL_FILE_FWD) && c->conf >= 2)
		trust = share;
	if (share > trust)
		share = trust;
	uint64_t pos = off + len > cur->begin ? off + len - cur->begin : 0;
	uint64_t covered = cur->end - cur->begin > pos ? cur->end - cur->begin - pos : 0;
	unsigned rel = c->iss_rel;
	int run = 1;
	uint32_t x = o;
	for (uint32_t k = 1; k <= WALK_MAX && covered < share; k++) {
		x = succ(ra, x, rel);
		if (x == NONE)
			break;
		const struct obj *xo = &ra->o[x];
		uint64_t l = xo->end - xo->begin;
		if (run && xo->file == cur->file && xo->begin == *fence) {
			*fence = xo->end;
			if (k >= c->iss_k) {
				c->iss_k = k + 1;
				c->iss_off = 0;
			}
			covered += l;
			continue;
		}
		run = 0;
		uint64_t want = share - covered < l ? share - covered : l;
		uint64_t done = k < c->iss_k ? l : k == c->iss_k ? c->iss_off : 0;
		if (want > done) {
			if (want - done < ra->part && want < l)
				break; /* later, in a whole part */
			if (n == max)
				break;
			emit(out, max, &n, xo, done, want);
			c->iss_k = want == l ? k + 1 : k;
			c->iss_off = want == l ? 0 : want;
		}
		covered += l;
	}
	pthread_mutex_unlock(&ra->lock);
	return n;
}
