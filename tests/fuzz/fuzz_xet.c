/* libFuzzer target for what a Xet server sends: the first byte picks the
 * reconstruction parser (odd: v1 or v2 JSON, for a range the next bytes
 * name; a plan taken then feeds a chunk map, which learns facts the
 * plan's terms suggest), the chunk decoder (0 mod 4: a run of serialized
 * chunks, as a xorb fetch returns them) or the Hub's token answer (2 mod
 * 4). Besides crashes, leaks and UB it checks what callers rely on: a plan
 * taken covers exactly the range asked with terms in file order, each
 * inside a fetch of its xorb with a URL of at most the bound; a map keeps
 * every chunk it places inside its term, in order; a run decoded gives at
 * most the room it had, each chunk within the spec's sizes; a token taken
 * is printable with an http(s) CAS; a refusal is one line. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "compute/xetchunk.h"
#include "compute/xetmap.h"
#include "compute/xetplan.h"
#include "compute/xettoken.h"

static void one_line(const struct tfs_diag *d)
{
	if (!memchr(d->msg, 0, sizeof d->msg) || !d->msg[0] || strchr(d->msg, '\n'))
		abort();
}

static void check_plan(const struct tfs_xet_plan *p, uint64_t first, uint64_t last, uint64_t size)
{
	uint64_t total = 0;
	if (!p->nterm || p->skip >= p->term[0].unpacked || p->term[0].at + p->skip != first)
		abort();
	for (uint32_t i = 0; i < p->nterm; i++) {
		const struct tfs_xet_term *t = &p->term[i];
		const struct tfs_xet_fetch *f = &p->fetch[t->fetch];
		if (t->at != p->term[0].at + total || t->start >= t->end || !t->unpacked)
			abort();
		if (t->fetch >= p->nfetch || memcmp(f->xorb, t->xorb, TFS_XET_HASH_LEN) ||
		    f->start > t->start || f->end < t->end || f->url >= p->nurl ||
		    strlen(p->url[f->url]) > TFS_XET_URL_MAX || f->first > f->last)
			abort();
		total += t->unpacked;
	}
	if (total - p->skip < last - first + 1 || p->term[0].at + total > size ||
	    total - p->term[p->nterm - 1].unpacked >= p->skip + last - first + 1)
		abort();
}

static uint32_t le32(const uint8_t *p)
{
	return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

/* 12 bytes say the range asked, bytes [first, last] of a file of fsize
 * bytes (little-endian u32 each); the JSON follows. */
/* Every chunk the map places lies inside its term, after the one before. */
static void check_map(const struct tfs_xet_map *m)
{
	for (uint32_t k = 0; k < m->plan->nterm; k++) {
		const struct tfs_xet_term *t = &m->plan->term[k];
		uint64_t last = t->at;
		for (uint64_t g = m->first[k]; g < m->first[k + 1]; g++) {
			if (m->at[g] == TFS_XET_AT_UNKNOWN)
				continue;
			if (m->at[g] < last || m->at[g] + m->len[g] > t->at + t->unpacked)
				abort();
			last = m->at[g] + m->len[g];
		}
	}
	if (m->nhashed > m->nchunk)
		abort();
}

/* Facts the plan's terms suggest (each term's chunks of equal length,
 * a guess the map may refuse), learnt one by one and as an answer. */
static void map(const struct tfs_xet_plan *p, uint64_t fsize, uint8_t salt)
{
	struct tfs_xet_map *m;
	struct tfs_diag d;
	uint8_t h[TFS_XET_HASH_LEN] = {salt};
	if (tfs_xet_map_new(p, fsize, &m, &d)) {
		one_line(&d);
		return;
	}
	for (int round = 0; round < 2; round++) {
		if (round)
			tfs_xet_map_begin(m);
		int bad = 0;
		for (uint32_t k = 0; k < p->nterm && !bad; k++) {
			const struct tfs_xet_term *t = &p->term[k];
			uint32_t n = t->end - t->start, each = t->unpacked / n + (round && (salt & 1));
			uint64_t at = t->at + (salt & 2 ? each : 0);
			for (uint32_t j = 0; j < n && !bad; j++, at += each)
				bad = tfs_xet_map_learn(m, m->first[k] + j, each,
							j % 3 ? TFS_XET_AT_UNKNOWN : at,
							(salt & 4) ? h : NULL, &d) != TFS_OK;
		}
		if (round && bad)
			tfs_xet_map_undo(m);
		else if (round)
			tfs_xet_map_end(m);
		check_map(m);
	}
	if (tfs_xet_map_complete(m) && tfs_xet_map_file_hash(m, h, &d))
		abort();
	tfs_xet_map_free(m);
}

static void token(const uint8_t *data, size_t size)
{
	struct tfs_xet_token t;
	struct tfs_diag d;
	if (tfs_xet_token_parse((const char *)data, size, &t, &d)) {
		one_line(&d);
		if (t.token[0] || t.cas[0])
			abort();
		return;
	}
	size_t n = strlen(t.token);
	if (!n || n > TFS_XET_TOKEN_MAX || strncasecmp(t.cas, "http", 4) != 0 ||
	    strncmp(t.cas, t.origin, strlen(t.origin)) != 0 || strpbrk(t.cas, " ?#@\r\n"))
		abort();
	for (size_t i = 0; i < n; i++)
		if ((unsigned char)t.token[i] <= ' ' || (unsigned char)t.token[i] >= 0x7f)
			abort();
}

static void plan(const uint8_t *data, size_t size)
{
	if (size < 12)
		return;
	uint64_t fsize = le32(data), first = le32(data + 4), last = le32(data + 8);
	struct tfs_xet_plan p;
	struct tfs_diag d;
	tfs_err e = tfs_xet_plan_parse((const char *)data + 12, size - 12, first, last, fsize, &p, &d);
	if (e) {
		one_line(&d);
		return;
	}
	check_plan(&p, first, last, fsize);
	struct tfs_xet_plan q = p;
	if (tfs_xet_plan_within(&p, &q, &d))
		abort(); /* a plan agrees with itself */
	if (first == 0 && last + 1 == fsize)
		map(&p, fsize, data[0]);
	tfs_xet_plan_free(&p);
}

static void chunks(const uint8_t *data, size_t size)
{
	static struct tfs_xet_dec *x;
	static uint8_t out[8 * TFS_XET_CHUNK_MAX];
	if (!x && !(x = tfs_xet_dec_new()))
		abort();
	if (size < 1)
		return;
	/* the first byte: how many chunks (0-7) and the room for them */
	uint32_t n = data[0] % 8, lens[8];
	size_t cap = (size_t)(data[0] >> 3) * (TFS_XET_CHUNK_MAX / 4), raw = 0;
	struct tfs_diag d;
	tfs_err e = tfs_xet_decode_run(x, data + 1, size - 1, n, out, cap, n ? lens : NULL, &raw, &d);
	if (e) {
		one_line(&d);
		return;
	}
	size_t sum = 0;
	for (uint32_t i = 0; i < n; i++) {
		if (!lens[i] || lens[i] > TFS_XET_CHUNK_MAX)
			abort();
		sum += lens[i];
	}
	if (sum != raw || raw > cap)
		abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (size < 1)
		return 0;
	if (data[0] & 1)
		plan(data + 1, size - 1);
	else if (data[0] & 2)
		token(data + 1, size - 1);
	else
		chunks(data + 1, size - 1);
	return 0;
}
