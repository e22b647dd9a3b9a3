#include "compute/xetmap.h"

#include <stdlib.h>
#include <string.h>

#include "core/table.h"

tfs_err tfs_xet_map_new(const struct tfs_xet_plan *plan, uint64_t size, struct tfs_xet_map **out,
			struct tfs_diag *d)
{
	uint64_t n = 0;
	for (uint32_t k = 0; k < plan->nterm; k++) {
		const struct tfs_xet_term *t = &plan->term[k];
		if (t->unpacked < t->end - t->start)
			return tfs_fail(d, TFS_ERR_FORMAT,
					"a reconstruction's term %u has %u chunks for %u bytes", k,
					t->end - t->start, t->unpacked);
		n += t->end - t->start;
	}
	/* Xet cuts chunks of 8 KiB at least but for a file's last: one per
	 * 4 KiB, one more per term and a few over, is room for any real file,
	 * and bounds what a hostile plan can make us allocate. */
	if (n > plan->nterm + size / 4096 + 64)
		return tfs_fail(
			d, TFS_ERR_FORMAT,
			"a reconstruction of %llu chunks for a file of %llu bytes (chunks are 8 KiB or more)",
			(unsigned long long)n, (unsigned long long)size);
	struct tfs_xet_map *m = calloc(1, sizeof *m);
	if (m) {
		m->plan = plan;
		m->size = size;
		m->nchunk = n;
		m->first = malloc((plan->nterm + 1) * sizeof *m->first);
		m->len = calloc(n ? n : 1, sizeof *m->len);
		m->at = malloc((n ? n : 1) * sizeof *m->at);
		m->hash = malloc((n ? n : 1) * sizeof *m->hash);
		m->hashed = calloc(n ? n : 1, 1);
	}
	if (!m || !m->first || !m->len || !m->at || !m->hash || !m->hashed) {
		tfs_xet_map_free(m);
		return tfs_fail(d, TFS_ERR_NOMEM, "out of memory for a reconstruction of %llu chunks",
				(unsigned long long)n);
	}
	for (uint64_t g = 0; g < n; g++)
		m->at[g] = TFS_XET_AT_UNKNOWN;
	uint64_t g = 0;
	for (uint32_t k = 0; k < plan->nterm; k++) {
		m->first[k] = g;
		m->at[g] = plan->term[k].at; /* a term's first chunk starts where it does */
		g += plan->term[k].end - plan->term[k].start;
	}
	m->first[plan->nterm] = g;
	*out = m;
	return TFS_OK;
}

void tfs_xet_map_free(struct tfs_xet_map *m)
{
	if (!m)
		return;
	free(m->first);
	free(m->len);
	free(m->at);
	free(m->hash);
	free(m->hashed);
	free(m->was);
	free(m);
}

uint32_t tfs_xet_map_term_of(const struct tfs_xet_map *m, uint64_t g)
{
	uint32_t lo = 0, hi = m->plan->nterm; /* the last term whose first chunk is <= g */
	while (hi - lo > 1) {
		uint32_t mid = lo + (hi - lo) / 2;
		if (m->first[mid] <= g)
			lo = mid;
		else
			hi = mid;
	}
	return lo;
}

void tfs_xet_map_begin(struct tfs_xet_map *m)
{
	m->nwas = 0;
	m->journal = 1;
}

void tfs_xet_map_end(struct tfs_xet_map *m)
{
	m->nwas = 0;
	m->journal = 0;
}

/* Puts back what changed since the journal held `mark` facts. */
static void undo_to(struct tfs_xet_map *m, size_t mark)
{
	while (m->nwas > mark) {
		const struct tfs_xet_was *w = &m->was[--m->nwas];
		m->len[w->g] = w->len;
		m->at[w->g] = w->at;
		if (m->hashed[w->g] && !w->hashed)
			m->nhashed--;
		m->hashed[w->g] = w->hashed;
	}
}

void tfs_xet_map_undo(struct tfs_xet_map *m)
{
	undo_to(m, 0);
	m->journal = 0;
}

/* Chunk g as it is, before a change (when journaling). 0, or -1 when
 * there is no memory to keep it: the change is then refused. */
static int keep(struct tfs_xet_map *m, uint64_t g)
{
	if (!m->journal)
		return 0;
	if (m->nwas == m->cwas && tfs_grow((void **)&m->was, &m->cwas, m->nwas + 1, sizeof *m->was))
		return -1;
	m->was[m->nwas++] = (struct tfs_xet_was){g, m->at[g], m->len[g], m->hashed[g]};
	return 0;
}

static tfs_err disagree(struct tfs_diag *d, uint64_t g, const char *what)
{
	return tfs_fail(d, TFS_ERR_FORMAT, "chunk %llu of the file: %s (an answer for another range?)",
			(unsigned long long)g, what);
}

/* Chunk g's length and place are both known: it must lie in its term,
 * and the next chunk starts where it ends (the term's end for the last). */
static tfs_err settle(struct tfs_xet_map *m, uint64_t g, struct tfs_diag *d)
{
	uint32_t k = tfs_xet_map_term_of(m, g);
	const struct tfs_xet_term *t = &m->plan->term[k];
	for (; g < m->first[k + 1] && m->len[g] && m->at[g] != TFS_XET_AT_UNKNOWN; g++) {
		uint64_t end = m->at[g] + m->len[g];
		if (m->at[g] < t->at || end > t->at + t->unpacked)
			return disagree(d, g, "it lies past its term");
		if (g + 1 == m->first[k + 1]) {
			if (end != t->at + t->unpacked)
				return disagree(d, g, "the term's last chunk ends before the term does");
			break;
		}
		if (m->at[g + 1] != TFS_XET_AT_UNKNOWN) {
			if (m->at[g + 1] != end)
				return disagree(d, g, "the next chunk does not start where it ends");
			continue;
		}
		if (keep(m, g + 1))
			return tfs_fail(d, TFS_ERR_NOMEM, "out of memory");
		m->at[g + 1] = end;
	}
	return TFS_OK;
}

static tfs_err learn(struct tfs_xet_map *m, uint64_t g, uint32_t len, uint64_t at, const uint8_t *hash,
		     struct tfs_diag *d)
{
	if (g >= m->nchunk)
		return disagree(d, g, "past the file's chunks");
	if (len && m->len[g] && m->len[g] != len)
		return disagree(d, g, "its length differs from the one known");
	if (at != TFS_XET_AT_UNKNOWN && m->at[g] != TFS_XET_AT_UNKNOWN && m->at[g] != at)
		return disagree(d, g, "its place differs from the one known");
	if (hash && m->hashed[g] && memcmp(m->hash[g], hash, TFS_XET_HASH_LEN) != 0)
		return disagree(d, g, "its hash differs from the one known");
	if (keep(m, g))
		return tfs_fail(d, TFS_ERR_NOMEM, "out of memory");
	if (len)
		m->len[g] = len;
	if (at != TFS_XET_AT_UNKNOWN)
		m->at[g] = at;
	if (hash && !m->hashed[g]) {
		memcpy(m->hash[g], hash, TFS_XET_HASH_LEN);
		m->hashed[g] = 1;
		m->nhashed++;
	}
	/* What this settles: from the chunk before (its end is now known
	 * where g's place is), and from g. */
	uint32_t k = tfs_xet_map_term_of(m, g);
	uint64_t from = g > m->first[k] ? g - 1 : g;
	if (m->at[g] != TFS_XET_AT_UNKNOWN && g > m->first[k] && m->len[g - 1] &&
	    m->at[g - 1] == TFS_XET_AT_UNKNOWN) {
		if (m->at[g] < m->plan->term[k].at + m->len[g - 1])
			return disagree(d, g, "it starts before its term could hold the chunk before it");
		if (keep(m, g - 1))
			return tfs_fail(d, TFS_ERR_NOMEM, "out of memory");
		m->at[g - 1] = m->at[g] - m->len[g - 1];
	}
	return settle(m, m->at[from] != TFS_XET_AT_UNKNOWN && m->len[from] ? from : g, d);
}

/* A fact refused changes nothing, inside an answer's journal or not. */
tfs_err tfs_xet_map_learn(struct tfs_xet_map *m, uint64_t g, uint32_t len, uint64_t at, const uint8_t *hash,
			  struct tfs_diag *d)
{
	int own = !m->journal;
	size_t mark = m->nwas;
	if (own)
		tfs_xet_map_begin(m);
	tfs_err e = learn(m, g, len, at, hash, d);
	if (e)
		undo_to(m, mark);
	if (own)
		tfs_xet_map_end(m);
	return e;
}

int64_t tfs_xet_map_find(const struct tfs_xet_map *m, uint32_t k, uint64_t pos)
{
	for (uint64_t g = m->first[k]; g < m->first[k + 1]; g++) {
		if (m->at[g] == TFS_XET_AT_UNKNOWN || !m->len[g])
			continue;
		if (m->at[g] > pos)
			return -1;
		if (pos < m->at[g] + m->len[g])
			return (int64_t)g;
	}
	return -1;
}

int tfs_xet_map_complete(const struct tfs_xet_map *m)
{
	return m->nhashed == m->nchunk;
}

tfs_err tfs_xet_map_file_hash(const struct tfs_xet_map *m, uint8_t out[TFS_XET_HASH_LEN], struct tfs_diag *d)
{
	struct tfs_xet_node *v = malloc((m->nchunk ? m->nchunk : 1) * sizeof *v);
	if (!v)
		return tfs_fail(d, TFS_ERR_NOMEM, "out of memory");
	for (uint64_t g = 0; g < m->nchunk; g++) {
		memcpy(v[g].hash, m->hash[g], TFS_XET_HASH_LEN);
		v[g].len = m->len[g];
	}
	tfs_xet_file_hash(v, (size_t)m->nchunk, out);
	free(v);
	return TFS_OK;
}

void tfs_xet_map_forget_hashes(struct tfs_xet_map *m)
{
	memset(m->hashed, 0, m->nchunk ? m->nchunk : 1);
	m->nhashed = 0;
}
