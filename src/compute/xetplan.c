#include "compute/xetplan.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "compute/xetchunk.h"
#include "core/jscan.h"
#include "core/utf8.h"

#define NESTING 8

struct parse {
	struct tfs_jscan s;
	struct tfs_xet_plan *p;
	uint32_t cterm, cfetch, curl;
	int seen_skip, seen_terms, seen_fetch;
};

/* ---- values ---- */

static tfs_err want_object(struct parse *x, const char *what)
{
	tfs_js_ws(&x->s);
	if (tfs_js_peek(&x->s) != '{') {
		char m[96];
		snprintf(m, sizeof m, "%s must be an object", what);
		return tfs_js_err(&x->s, m);
	}
	return tfs_js_enter(&x->s);
}

static tfs_err want_array(struct parse *x, const char *what)
{
	tfs_js_ws(&x->s);
	if (tfs_js_peek(&x->s) != '[') {
		char m[96];
		snprintf(m, sizeof m, "%s must be an array", what);
		return tfs_js_err(&x->s, m);
	}
	return tfs_js_enter(&x->s);
}

static tfs_err read_uint(struct parse *x, uint64_t max, uint64_t *v, const char *what)
{
	enum tfs_jnum k;
	char m[96];
	tfs_js_ws(&x->s);
	int c = tfs_js_peek(&x->s);
	if (c != '-' && !tfs_js_isdigit(c)) {
		snprintf(m, sizeof m, "%s must be a number", what);
		return tfs_js_err(&x->s, m);
	}
	const unsigned char *at = x->s.p;
	tfs_err e = tfs_js_number(&x->s, &k, v);
	if (e)
		return e;
	if (k != TFS_JNUM_UINT || *v > max) {
		x->s.p = at;
		snprintf(m, sizeof m, "%s must be a whole number from 0 to %llu", what,
			 (unsigned long long)max);
		return tfs_js_err(&x->s, m);
	}
	return TFS_OK;
}

/* The next key of an object being read, or 0 at its end (r < 0: *e). */
static int next_key(struct parse *x, struct tfs_jstr *key, int first, tfs_err *e)
{
	if (first) {
		if (tfs_js_close_if_empty(&x->s, '}'))
			return 0;
	} else {
		int r = tfs_js_next(&x->s, '}', e);
		if (r <= 0)
			return r;
	}
	tfs_js_ws(&x->s);
	if (tfs_js_peek(&x->s) != '"') {
		*e = tfs_js_err(&x->s, "expected a string key");
		return -1;
	}
	if ((*e = tfs_js_string(&x->s, key)) || (*e = tfs_js_expect(&x->s, ':', "expected ':'")))
		return -1;
	return 1;
}

/* {"start": A, "end": B} (other keys skipped), each once. */
static tfs_err read_pair(struct parse *x, uint64_t max, uint64_t *a, uint64_t *b, const char *what)
{
	struct tfs_jstr k;
	tfs_err e = want_object(x, what);
	int r, seen = 0;
	for (int first = 1; !e && (r = next_key(x, &k, first, &e)) > 0; first = 0) {
		int bit = TFS_JS_IS(&k, "start") ? 1 : TFS_JS_IS(&k, "end") ? 2 : 0;
		if (bit & seen)
			return tfs_js_err(&x->s, "a key given twice");
		seen |= bit;
		e = bit ? read_uint(x, max, bit == 1 ? a : b, what) : tfs_js_skip(&x->s);
	}
	if (e)
		return e;
	if (seen != 3) {
		char m[96];
		snprintf(m, sizeof m, "%s needs both \"start\" and \"end\"", what);
		return tfs_js_err(&x->s, m);
	}
	return TFS_OK;
}

static tfs_err read_hash(struct parse *x, const struct tfs_jstr *s, uint8_t out[TFS_XET_HASH_LEN])
{
	if (tfs_xet_hash_parse(s->p, s->len, out))
		return tfs_js_err(&x->s, "a xorb hash must be 64 hex digits");
	return TFS_OK;
}

static int url_ok(const char *u, size_t n)
{
	if (!((n > 7 && memcmp(u, "http://", 7) == 0) || (n > 8 && memcmp(u, "https://", 8) == 0)))
		return 0;
	for (size_t i = 0; i < n; i++)
		if ((unsigned char)u[i] <= ' ' || u[i] == 0x7f)
			return 0;
	return 1;
}

static tfs_err read_url(struct parse *x, uint32_t *idx)
{
	struct tfs_jstr u;
	struct tfs_xet_plan *p = x->p;
	tfs_js_ws(&x->s);
	if (tfs_js_peek(&x->s) != '"')
		return tfs_js_err(&x->s, "a url must be a string");
	tfs_err e = tfs_js_string(&x->s, &u);
	if (e)
		return e;
	if (u.len > TFS_XET_URL_MAX || !url_ok(u.p, u.len))
		return tfs_js_err(&x->s,
				  "a url must be http or https, without spaces, of at most 16384 bytes");
	if (p->nurl == x->curl) {
		uint32_t c = x->curl ? 2 * x->curl : 16;
		char **v = c <= TFS_XET_TERMS_MAX ? realloc(p->url, c * sizeof *v) : NULL;
		if (!v)
			return c <= TFS_XET_TERMS_MAX ? tfs_js_nomem(&x->s)
						      : tfs_js_err(&x->s, "too many urls");
		p->url = v;
		x->curl = c;
	}
	if (!(p->url[p->nurl] = strndup(u.p, u.len)))
		return tfs_js_nomem(&x->s);
	*idx = p->nurl++;
	return TFS_OK;
}

/* Room for one more term or fetch. */
static void *grow(struct parse *x, void *v, uint32_t n, uint32_t *cap, size_t size, const char *what)
{
	if (n < *cap)
		return v;
	uint32_t c = *cap ? 2 * *cap : 64;
	if (n >= TFS_XET_TERMS_MAX) {
		char m[96];
		snprintf(m, sizeof m, "more than %u %s", TFS_XET_TERMS_MAX, what);
		tfs_js_err(&x->s, m);
		return NULL;
	}
	void *nv = realloc(v, (size_t)c * size);
	if (!nv) {
		tfs_js_nomem(&x->s);
		return NULL;
	}
	*cap = c;
	return nv;
}

/* ---- terms ---- */

static tfs_err read_term(struct parse *x)
{
	struct tfs_xet_plan *p = x->p;
	struct tfs_xet_term *v = grow(x, p->term, p->nterm, &x->cterm, sizeof *v, "terms");
	if (!v)
		return TFS_ERR_FORMAT;
	p->term = v;
	struct tfs_xet_term *t = memset(&v[p->nterm], 0, sizeof *t);
	struct tfs_jstr k;
	uint64_t a = 0, b = 0, len = 0;
	int r, seen = 0;
	tfs_err e = want_object(x, "a term");
	for (int first = 1; !e && (r = next_key(x, &k, first, &e)) > 0; first = 0) {
		int bit = TFS_JS_IS(&k, "hash")              ? 1
			  : TFS_JS_IS(&k, "range")           ? 2
			  : TFS_JS_IS(&k, "unpacked_length") ? 4
							     : 0;
		if (bit & seen)
			return tfs_js_err(&x->s, "a term has a key twice");
		seen |= bit;
		if (bit == 1) {
			struct tfs_jstr h;
			tfs_js_ws(&x->s);
			if (tfs_js_peek(&x->s) != '"')
				return tfs_js_err(&x->s, "a term's hash must be a string");
			e = tfs_js_string(&x->s, &h);
			if (!e)
				e = read_hash(x, &h, t->xorb);
		} else if (bit == 2) {
			e = read_pair(x, TFS_XET_XORB_CHUNKS_MAX, &a, &b, "a term's range");
		} else if (bit == 4) {
			e = read_uint(x, UINT32_MAX, &len, "unpacked_length");
		} else {
			e = tfs_js_skip(&x->s);
		}
	}
	if (e)
		return e;
	if (seen != 7)
		return tfs_js_err(&x->s, "a term needs \"hash\", \"range\" and \"unpacked_length\"");
	if (a >= b || len == 0 || len > (b - a) * TFS_XET_CHUNK_MAX)
		return tfs_js_err(&x->s, "a term's chunk range is empty, or cannot hold its unpacked_length");
	t->start = (uint32_t)a;
	t->end = (uint32_t)b;
	t->unpacked = (uint32_t)len;
	p->nterm++;
	return TFS_OK;
}

static tfs_err read_terms(struct parse *x)
{
	tfs_err e = want_array(x, "terms");
	int r = 0;
	if (e || tfs_js_close_if_empty(&x->s, ']'))
		return e;
	do {
		if ((e = read_term(x)))
			return e;
	} while ((r = tfs_js_next(&x->s, ']', &e)) > 0);
	return r < 0 ? e : TFS_OK;
}

/* ---- fetches ---- */

static struct tfs_xet_fetch *new_fetch(struct parse *x, const uint8_t xorb[TFS_XET_HASH_LEN])
{
	struct tfs_xet_plan *p = x->p;
	struct tfs_xet_fetch *v = grow(x, p->fetch, p->nfetch, &x->cfetch, sizeof *v, "fetches");
	if (!v)
		return NULL;
	p->fetch = v;
	struct tfs_xet_fetch *f = memset(&v[p->nfetch], 0, sizeof *f);
	memcpy(f->xorb, xorb, TFS_XET_HASH_LEN);
	return f;
}

/* The chunks [a, b) and their bytes [first, last], as one fetch. */
static tfs_err set_fetch(struct parse *x, struct tfs_xet_fetch *f, uint64_t a, uint64_t b, uint64_t first,
			 uint64_t last)
{
	uint64_t n = b - a, bytes = last - first + 1;
	if (a >= b || first > last)
		return tfs_js_err(&x->s, "a fetch's chunk or byte range is empty or backwards");
	if (bytes < n * (TFS_XET_CHUNK_HEADER + 1) ||
	    bytes > n * (TFS_XET_CHUNK_HEADER + TFS_XET_CHUNK_COMP_MAX))
		return tfs_js_err(&x->s, "a fetch's byte range cannot hold its chunks");
	if (bytes > TFS_XET_XORB_BYTES_MAX)
		return tfs_js_err(&x->s, "a fetch's byte range is larger than a xorb");
	f->start = (uint32_t)a;
	f->end = (uint32_t)b;
	f->first = first;
	f->last = last;
	x->p->nfetch++;
	return TFS_OK;
}

/* v1: {"range": {...}, "url": "...", "url_range": {...}} */
static tfs_err read_fetch_v1(struct parse *x, const uint8_t xorb[TFS_XET_HASH_LEN])
{
	struct tfs_xet_fetch *f = new_fetch(x, xorb);
	struct tfs_jstr k;
	uint64_t a = 0, b = 0, first = 0, last = 0;
	int r, seen = 0;
	if (!f)
		return TFS_ERR_FORMAT;
	tfs_err e = want_object(x, "a fetch_info entry");
	for (int fst = 1; !e && (r = next_key(x, &k, fst, &e)) > 0; fst = 0) {
		int bit = TFS_JS_IS(&k, "range")       ? 1
			  : TFS_JS_IS(&k, "url")       ? 2
			  : TFS_JS_IS(&k, "url_range") ? 4
						       : 0;
		if (bit & seen)
			return tfs_js_err(&x->s, "a fetch_info entry has a key twice");
		seen |= bit;
		if (bit == 1)
			e = read_pair(x, TFS_XET_XORB_CHUNKS_MAX, &a, &b, "a fetch_info range");
		else if (bit == 2)
			e = read_url(x, &f->url);
		else if (bit == 4)
			e = read_pair(x, UINT32_MAX, &first, &last, "a url_range");
		else
			e = tfs_js_skip(&x->s);
	}
	if (e)
		return e;
	if (seen != 7)
		return tfs_js_err(&x->s, "a fetch_info entry needs \"range\", \"url\" and \"url_range\"");
	return set_fetch(x, f, a, b, first, last);
}

/* v2: {"chunks": {...}, "bytes": {...}}, one range of a URL. */
static tfs_err read_range_v2(struct parse *x, const uint8_t xorb[TFS_XET_HASH_LEN], uint32_t url)
{
	struct tfs_xet_fetch *f = new_fetch(x, xorb);
	struct tfs_jstr k;
	uint64_t a = 0, b = 0, first = 0, last = 0;
	int r, seen = 0;
	if (!f)
		return TFS_ERR_FORMAT;
	f->url = url;
	tfs_err e = want_object(x, "a range");
	for (int fst = 1; !e && (r = next_key(x, &k, fst, &e)) > 0; fst = 0) {
		int bit = TFS_JS_IS(&k, "chunks") ? 1 : TFS_JS_IS(&k, "bytes") ? 2 : 0;
		if (bit & seen)
			return tfs_js_err(&x->s, "a range has a key twice");
		seen |= bit;
		if (bit == 1)
			e = read_pair(x, TFS_XET_XORB_CHUNKS_MAX, &a, &b, "a range's chunks");
		else if (bit == 2)
			e = read_pair(x, UINT32_MAX, &first, &last, "a range's bytes");
		else
			e = tfs_js_skip(&x->s);
	}
	if (e)
		return e;
	if (seen != 3)
		return tfs_js_err(&x->s, "a range needs \"chunks\" and \"bytes\"");
	return set_fetch(x, f, a, b, first, last);
}

/* v2: {"url": "...", "ranges": [...]}; the url comes first or last. */
static tfs_err read_fetch_v2(struct parse *x, const uint8_t xorb[TFS_XET_HASH_LEN])
{
	struct tfs_jstr k;
	uint32_t url = UINT32_MAX, before = x->p->nfetch;
	int r, seen = 0;
	tfs_err e = want_object(x, "a xorbs entry");
	for (int fst = 1; !e && (r = next_key(x, &k, fst, &e)) > 0; fst = 0) {
		int bit = TFS_JS_IS(&k, "url") ? 1 : TFS_JS_IS(&k, "ranges") ? 2 : 0;
		if (bit & seen)
			return tfs_js_err(&x->s, "a xorbs entry has a key twice");
		seen |= bit;
		if (bit == 1) {
			e = read_url(x, &url);
		} else if (bit == 2) {
			if ((e = want_array(x, "ranges")) || tfs_js_close_if_empty(&x->s, ']'))
				continue;
			do
				e = read_range_v2(x, xorb, UINT32_MAX);
			while (!e && tfs_js_next(&x->s, ']', &e) > 0);
		} else {
			e = tfs_js_skip(&x->s);
		}
	}
	if (e)
		return e;
	if (seen != 3 || x->p->nfetch == before)
		return tfs_js_err(&x->s, "a xorbs entry needs \"url\" and at least one range");
	for (uint32_t i = before; i < x->p->nfetch; i++)
		x->p->fetch[i].url = url;
	return TFS_OK;
}

/* {"HASH": [entry, ...], ...} */
static tfs_err read_fetches(struct parse *x, int v2)
{
	struct tfs_jstr k;
	int r;
	tfs_err e = want_object(x, v2 ? "xorbs" : "fetch_info");
	for (int first = 1; !e && (r = next_key(x, &k, first, &e)) > 0; first = 0) {
		uint8_t xorb[TFS_XET_HASH_LEN];
		if ((e = read_hash(x, &k, xorb)) || (e = want_array(x, "a xorb's fetches")))
			return e;
		if (tfs_js_close_if_empty(&x->s, ']'))
			continue;
		do
			e = v2 ? read_fetch_v2(x, xorb) : read_fetch_v1(x, xorb);
		while (!e && tfs_js_next(&x->s, ']', &e) > 0);
	}
	return e;
}

static tfs_err read_top(struct parse *x)
{
	struct tfs_jstr k;
	int r;
	tfs_err e = want_object(x, "a reconstruction");
	for (int first = 1; !e && (r = next_key(x, &k, first, &e)) > 0; first = 0) {
		int *seen = TFS_JS_IS(&k, "offset_into_first_range")                ? &x->seen_skip
			    : TFS_JS_IS(&k, "terms")                                ? &x->seen_terms
			    : TFS_JS_IS(&k, "fetch_info") || TFS_JS_IS(&k, "xorbs") ? &x->seen_fetch
										    : NULL;
		if (seen && (*seen)++)
			return tfs_js_err(&x->s, "a key given twice (or both fetch_info and xorbs)");
		if (seen == &x->seen_skip)
			e = read_uint(x, UINT64_MAX >> 1, &x->p->skip, "offset_into_first_range");
		else if (seen == &x->seen_terms)
			e = read_terms(x);
		else if (seen)
			e = read_fetches(x, x->p->v2 = TFS_JS_IS(&k, "xorbs"));
		else
			e = tfs_js_skip(&x->s);
	}
	if (e)
		return e;
	tfs_js_ws(&x->s);
	if (x->s.p != x->s.end)
		return tfs_js_err(&x->s, "unexpected text after the object");
	if (!x->seen_skip || !x->seen_terms || !x->seen_fetch)
		return tfs_fail(
			x->s.d, TFS_ERR_FORMAT,
			"a reconstruction needs offset_into_first_range, terms and fetch_info (or xorbs)");
	return TFS_OK;
}

/* ---- the checks across members ---- */

static tfs_err check_cover(struct tfs_xet_plan *p, uint64_t first, uint64_t last, uint64_t size,
			   struct tfs_diag *d)
{
	uint64_t total = 0, need = last - first + 1;
	if (p->nterm == 0)
		return tfs_fail(d, TFS_ERR_FORMAT, "a reconstruction without terms");
	if (p->skip >= p->term[0].unpacked || p->skip > first)
		return tfs_fail(d, TFS_ERR_FORMAT,
				"offset_into_first_range %llu is past the first term (%u bytes)",
				(unsigned long long)p->skip, p->term[0].unpacked);
	for (uint32_t i = 0; i < p->nterm; i++) {
		p->term[i].at = first - p->skip + total;
		total += p->term[i].unpacked;
	}
	if (total - p->skip < need)
		return tfs_fail(d, TFS_ERR_FORMAT, "a reconstruction gives %llu bytes of the %llu asked",
				(unsigned long long)(total - p->skip), (unsigned long long)need);
	if (total - p->term[p->nterm - 1].unpacked >= p->skip + need)
		return tfs_fail(d, TFS_ERR_FORMAT, "a reconstruction gives terms past the %llu bytes asked",
				(unsigned long long)need);
	if (first - p->skip + total > size)
		return tfs_fail(d, TFS_ERR_FORMAT, "a reconstruction's terms end past the file's %llu bytes",
				(unsigned long long)size);
	return TFS_OK;
}

static int fetch_cmp(const void *a, const void *b)
{
	const struct tfs_xet_fetch *x = a, *y = b;
	int c = memcmp(x->xorb, y->xorb, TFS_XET_HASH_LEN);
	return c ? c : (x->start > y->start) - (x->start < y->start);
}

/* The last fetch of xorb h starting at or before chunk c, or -1. */
static long last_at_or_before(const struct tfs_xet_plan *p, const uint8_t *h, uint32_t c)
{
	long lo = 0, hi = (long)p->nfetch; /* first index with (xorb, start) > (h, c) */
	while (lo < hi) {
		long mid = lo + (hi - lo) / 2;
		int k = memcmp(p->fetch[mid].xorb, h, TFS_XET_HASH_LEN);
		if (k < 0 || (k == 0 && p->fetch[mid].start <= c))
			lo = mid + 1;
		else
			hi = mid;
	}
	if (lo == 0 || memcmp(p->fetch[lo - 1].xorb, h, TFS_XET_HASH_LEN) != 0)
		return -1;
	return lo - 1;
}

/* Every term inside one fetch of its xorb: after sorting, best[i] is the
 * fetch reaching furthest among those of its xorb up to i. */
static tfs_err check_fetches(struct tfs_xet_plan *p, struct tfs_diag *d)
{
	uint32_t *best = p->nfetch ? malloc(p->nfetch * sizeof *best) : NULL;
	if (p->nfetch && !best)
		return tfs_fail(d, TFS_ERR_NOMEM, "out of memory while reading a reconstruction");
	if (p->nfetch)
		qsort(p->fetch, p->nfetch, sizeof *p->fetch, fetch_cmp);
	for (uint32_t i = 0; i < p->nfetch; i++) {
		int same = i && memcmp(p->fetch[i - 1].xorb, p->fetch[i].xorb, TFS_XET_HASH_LEN) == 0;
		best[i] = same && p->fetch[best[i - 1]].end >= p->fetch[i].end ? best[i - 1] : i;
	}
	for (uint32_t i = 0; i < p->nterm; i++) {
		struct tfs_xet_term *t = &p->term[i];
		long j = last_at_or_before(p, t->xorb, t->start);
		if (j < 0 || p->fetch[best[j]].end < t->end) {
			char hex[TFS_XET_HEX_LEN + 1];
			tfs_xet_hash_hex(t->xorb, hex);
			free(best);
			return tfs_fail(d, TFS_ERR_FORMAT,
					"no fetch holds chunks %u-%u of xorb %.16s... (term %u)", t->start,
					t->end, hex, i);
		}
		t->fetch = best[j];
	}
	free(best);
	return TFS_OK;
}

tfs_err tfs_xet_plan_parse(const char *json, size_t n, uint64_t first, uint64_t last, uint64_t size,
			   struct tfs_xet_plan *p, struct tfs_diag *d)
{
	struct parse x = {.p = p};
	memset(p, 0, sizeof *p);
	if (first > last || last >= size)
		return tfs_fail(d, TFS_ERR_INVAL, "bytes %llu-%llu asked of a file of %llu bytes",
				(unsigned long long)first, (unsigned long long)last,
				(unsigned long long)size);
	size_t bad = tfs_utf8_check((const unsigned char *)json, n);
	if (bad != n)
		return tfs_fail(d, TFS_ERR_FORMAT, "a reconstruction that is not valid UTF-8 (at byte %zu)",
				bad);
	tfs_js_init(&x.s, "reconstruction", json, n, NESTING, d);
	tfs_err e = read_top(&x);
	tfs_js_done(&x.s);
	if (!e)
		e = check_cover(p, first, last, size, d);
	if (!e)
		e = check_fetches(p, d);
	if (e)
		tfs_xet_plan_free(p);
	return e;
}

void tfs_xet_plan_free(struct tfs_xet_plan *p)
{
	for (uint32_t i = 0; i < p->nurl; i++)
		free(p->url[i]);
	free(p->url);
	free(p->term);
	free(p->fetch);
	memset(p, 0, sizeof *p);
}

long tfs_xet_plan_term_at(const struct tfs_xet_plan *p, uint64_t off)
{
	long lo = 0, hi = (long)p->nterm;
	while (lo < hi) {
		long mid = lo + (hi - lo) / 2;
		if (p->term[mid].at + p->term[mid].unpacked <= off)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo < (long)p->nterm && p->term[lo].at <= off ? lo : -1;
}

tfs_err tfs_xet_plan_within(const struct tfs_xet_plan *whole, const struct tfs_xet_plan *r,
			    struct tfs_diag *d)
{
	for (uint32_t i = 0; i < r->nterm; i++) {
		const struct tfs_xet_term *t = &r->term[i];
		long j = tfs_xet_plan_term_at(whole, t->at);
		const struct tfs_xet_term *w = j < 0 ? NULL : &whole->term[j];
		if (!w || memcmp(w->xorb, t->xorb, TFS_XET_HASH_LEN) != 0 || t->start < w->start ||
		    t->end > w->end || t->at + t->unpacked > w->at + w->unpacked ||
		    (t->start == w->start) != (t->at == w->at) ||
		    (t->end == w->end) != (t->at + t->unpacked == w->at + w->unpacked))
			return tfs_fail(
				d, TFS_ERR_FORMAT,
				"the reconstruction of a range disagrees with the file's at byte %llu (term %u): "
				"an answer for another range",
				(unsigned long long)t->at, i);
	}
	return TFS_OK;
}
