#include "sources/xet.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/uio.h>
#include <time.h>

#include "compute/xetchunk.h"
#include "compute/xethash.h"
#include "compute/xetmap.h"
#include "compute/xetplan.h"
#include "sources/cache.h"
#include "sources/httpc.h"
#include "sources/readahead.h"
#include "sources/rlayer.h"
#include "sources/xetcas.h"
#include "sources/xorbcache.h"

struct xfile {
	struct tfs_source base;
	struct tfs_rlayer *l;
	struct tfs_xet_cas *cas;
	char hex[TFS_XET_HEX_LEN + 1];
	uint8_t hash[TFS_XET_HASH_LEN];
	struct tfs_xet_plan whole; /* the whole file's terms (its URLs unused: they expire) */
	pthread_mutex_t lock;      /* map, checked */
	struct tfs_xet_map *map;
	int checked; /* its Xet hash was compared */
	/* A fetch of its chunks came damaged: what came before it by the same
	 * way may be too (a stored chunk's flipped byte shows nowhere), so its
	 * chunks left the chunk cache then, and none enter it again during
	 * this mount. Atomic. */
	int distrust;
	struct tfs_cfile *cache;
};

static void count(uint64_t *n, uint64_t by)
{
	__atomic_fetch_add(n, by, __ATOMIC_RELAXED);
}

int tfs_xet_hash_ok(const char *hash)
{
	uint8_t h[TFS_XET_HASH_LEN];
	return hash && tfs_xet_hash_parse(hash, strlen(hash), h) == TFS_OK;
}

static int bad(struct xfile *x)
{
	return __atomic_load_n(&x->base.changed, __ATOMIC_RELAXED);
}

/* A read that failed, said once in the log (the reader gets EIO). */
static void log_failed(const struct xfile *x, uint64_t off, uint64_t len, const char *why)
{
	char q[TFS_QPATH_MAX];
	tfs_log("%s: bytes %llu-%llu over Xet: %s", tfs_quote_path(q, sizeof q, x->base.location),
		(unsigned long long)off, (unsigned long long)(off + len - 1), why);
}

/* ---- where the bytes go: the cache's buffers, in file order ---- */

struct sink {
	const struct tfs_iov *iov;
	unsigned n, i;
	size_t in;    /* bytes of iov[i] written */
	uint64_t pos; /* the file's next byte */
};

/* The part of [at, at + n) (bytes p) in [s->pos, end), written. */
static void emit(struct sink *s, uint64_t at, const uint8_t *p, uint64_t n, uint64_t end)
{
	if (at + n <= s->pos || at > s->pos)
		return;
	uint64_t from = s->pos - at, to = at + n < end ? n : end - at;
	while (from < to && s->i < s->n) {
		size_t room = s->iov[s->i].len - s->in;
		size_t k = to - from < room ? (size_t)(to - from) : room;
		memcpy((char *)s->iov[s->i].p + s->in, p + from, k);
		from += k;
		s->in += k;
		s->pos += k;
		if (s->in == s->iov[s->i].len) {
			s->i++;
			s->in = 0;
		}
	}
}

/* The next n bytes of the sink as at most max pieces of its buffers
 * (how many), or 0 when they do not fit them; and past them. */
static int view(const struct sink *s, uint64_t n, struct iovec *v, int max)
{
	unsigned i = s->i;
	size_t in = s->in;
	int k = 0;
	while (n && i < s->n && k < max) {
		size_t room = s->iov[i].len - in, take = n < room ? (size_t)n : room;
		v[k].iov_base = (char *)s->iov[i].p + in;
		v[k++].iov_len = take;
		n -= take;
		in = 0;
		i++;
	}
	return n ? 0 : k;
}

static void skip(struct sink *s, uint64_t n)
{
	while (n && s->i < s->n) {
		size_t room = s->iov[s->i].len - s->in, take = n < room ? (size_t)n : room;
		s->in += take;
		s->pos += take;
		n -= take;
		if (s->in == s->iov[s->i].len) {
			s->i++;
			s->in = 0;
		}
	}
}

/* ---- what the file's chunks are ---- */

static void drop_all(struct xfile *x)
{
	for (uint32_t k = 0; x->l->xcache && k < x->whole.nterm; k++)
		tfs_xorbcache_drop(x->l->xcache, x->whole.term[k].xorb);
}

/* Under x->lock, once every chunk's hash is known: the file's hash
 * against its name, once. Non-zero: it differs (said, and every read of
 * the file fails from now on). */
static int hash_differs(struct xfile *x, struct tfs_diag *d)
{
	uint8_t h[TFS_XET_HASH_LEN];
	if (x->checked || !tfs_xet_map_complete(x->map))
		return 0;
	if (tfs_xet_map_file_hash(x->map, h, d))
		return 0; /* (no memory: checked another time) */
	x->checked = 1;
	if (memcmp(h, x->hash, TFS_XET_HASH_LEN) == 0)
		return 0;
	char got[TFS_XET_HEX_LEN + 1], q[TFS_QPATH_MAX];
	tfs_xet_hash_hex(h, got);
	__atomic_store_n(&x->base.changed, 1, __ATOMIC_RELAXED);
	tfs_log("%s: its chunks hash to %.16s..., not to its Xet hash %.16s...: a xorb damaged on the way or in the cache; its reads now fail with EIO and its chunks are dropped from the cache (remount to fetch them again)",
		tfs_quote_path(q, sizeof q, x->base.location), got, x->hex);
	tfs_xet_map_forget_hashes(x->map);
	tfs_fail(d, TFS_ERR_IO, "its chunks do not give its Xet hash");
	return 1;
}

/* What the chunk cache's index says of term k's chunks, learnt (all, or
 * none when it disagrees with what is known: then the xorb's file is
 * dropped). */
static void learn_index(struct xfile *x, uint32_t k, struct tfs_diag *d)
{
	const struct tfs_xet_term *t = &x->whole.term[k];
	uint32_t n = t->end - t->start;
	uint32_t *lens = malloc(n * sizeof *lens);
	uint8_t(*hashes)[TFS_XET_HASH_LEN] = malloc(n * sizeof *hashes);
	uint8_t *has = malloc(n);
	int wrong = 0, differs = 0;
	if (lens && hashes && has &&
	    tfs_xorbcache_index(x->l->xcache, t->xorb, t->start, t->end, lens, hashes, has)) {
		pthread_mutex_lock(&x->lock);
		tfs_xet_map_begin(x->map);
		uint64_t g0 = tfs_xet_map_chunk(x->map, k, t->start);
		for (uint32_t j = 0; j < n && !wrong; j++)
			wrong = lens[j] && tfs_xet_map_learn(x->map, g0 + j, lens[j], TFS_XET_AT_UNKNOWN,
							     has[j] ? hashes[j] : NULL, d) != TFS_OK;
		if (wrong)
			tfs_xet_map_undo(x->map);
		else
			tfs_xet_map_end(x->map);
		differs = !wrong && hash_differs(x, d);
		pthread_mutex_unlock(&x->lock);
	}
	if (wrong)
		tfs_xorbcache_drop(x->l->xcache, t->xorb);
	if (differs) {
		__atomic_store_n(&x->distrust, 1, __ATOMIC_SEQ_CST);
		drop_all(x);
	}
	free(lens);
	free(hashes);
	free(has);
}

/* ---- from the chunk cache ---- */

/* Chunk g of term k: its length and place, when both are known. */
static int known(struct xfile *x, uint32_t k, uint64_t g, uint32_t *len, uint64_t *at)
{
	pthread_mutex_lock(&x->lock);
	int ok = g < x->map->first[k + 1] && x->map->len[g] && x->map->at[g] != TFS_XET_AT_UNKNOWN;
	*len = ok ? x->map->len[g] : 0;
	*at = ok ? x->map->at[g] : 0;
	pthread_mutex_unlock(&x->lock);
	return ok;
}

static int64_t find(struct xfile *x, uint32_t k, uint64_t pos)
{
	pthread_mutex_lock(&x->lock);
	int64_t g = tfs_xet_map_find(x->map, k, pos);
	pthread_mutex_unlock(&x->lock);
	return g;
}

/* Serves what the chunk cache holds from s->pos on, in order, up to the
 * first byte it lacks. */
static void from_cache(struct xfile *x, struct sink *s, uint64_t end, uint8_t *buf)
{
	struct tfs_xorbcache *xc = x->l->xcache;
	struct tfs_diag d;
	while (xc && s->pos < end && !bad(x)) {
		long k = tfs_xet_plan_term_at(&x->whole, s->pos);
		if (k < 0)
			return;
		const struct tfs_xet_term *t = &x->whole.term[k];
		int64_t g = find(x, (uint32_t)k, s->pos);
		if (g < 0) {
			learn_index(x, (uint32_t)k, &d);
			if ((g = find(x, (uint32_t)k, s->pos)) < 0)
				return;
		}
		int fd = tfs_xorbcache_open_xorb(xc, t->xorb);
		uint64_t stop = end < t->at + t->unpacked ? end : t->at + t->unpacked;
		uint32_t len;
		uint64_t at;
		while (fd >= 0 && s->pos < stop && known(x, (uint32_t)k, (uint64_t)g, &len, &at)) {
			uint32_t c = t->start + (uint32_t)((uint64_t)g - x->map->first[k]);
			struct iovec v[4];
			int nv = at == s->pos && at + len <= end ? view(s, len, v, 4) : 0;
			/* Whole in the range: read where it is served from. */
			if (nv && !tfs_xorbcache_getv(xc, fd, t->xorb, c, len, v, nv))
				break;
			if (nv)
				skip(s, len);
			else if (!tfs_xorbcache_get(xc, fd, t->xorb, c, len, buf))
				break;
			else
				emit(s, at, buf, len, end);
			count(&x->l->xet.chunk_cached, len);
			g++;
		}
		tfs_xorbcache_close_xorb(fd);
		if (s->pos < stop)
			return;
	}
}

/* ---- from the network ---- */

/* One fetch of an answer, decoded: where each chunk's bytes are (a
 * stored chunk's in the body as it came, the others' decoded into raw),
 * its length and hash. body and raw are the CAS client's buffers. */
struct got {
	uint8_t *body, *raw;
	size_t body_cap, raw_cap;
	/* The chunks of the fetch (from its start) that the answer's terms
	 * use, all within [lo, hi): only those are decoded, hashed and kept
	 * (the others' headers are walked, their bytes checked by nothing,
	 * and a fetch may name far more chunks than its terms). */
	uint8_t *use;
	uint32_t lo, hi;
	const uint8_t **ptr;
	uint32_t *lens;
	uint8_t (*hash)[TFS_XET_HASH_LEN];
};

static void got_free(struct tfs_xet_cas *cas, struct got *g)
{
	tfs_xet_cas_unbuffer(cas, g->body, g->body_cap);
	tfs_xet_cas_unbuffer(cas, g->raw, g->raw_cap);
	free(g->ptr);
	free(g->lens);
	free(g->hash);
	free(g->use);
	memset(g, 0, sizeof *g);
}

/* The bytes n chunks serialized in buf decode to, but for the stored
 * ones (read in place), from their headers, each checked; and that they
 * fill buf exactly. */
static tfs_err raw_size(const uint8_t *buf, size_t len, uint32_t n, const uint8_t *use, size_t *out,
			struct tfs_diag *d)
{
	size_t at = 0;
	*out = 0;
	for (uint32_t i = 0; i < n; i++) {
		struct tfs_xet_chunk_hdr h;
		tfs_err e = tfs_xet_chunk_header(buf + at, len - at, &h, d);
		if (e) {
			char why[TFS_DIAG_MAX];
			snprintf(why, sizeof why, "%s", d->msg);
			return tfs_fail(d, e, "chunk %u of %u: %.900s", i, n, why);
		}
		at += TFS_XET_CHUNK_HEADER + h.comp_len;
		if (use[i])
			*out += h.type == TFS_XET_STORED ? 0 : h.raw_len;
	}
	if (at != len)
		return tfs_fail(d, TFS_ERR_FORMAT, "%zu bytes follow the %u chunks of a fetch", len - at, n);
	return TFS_OK;
}

/* Each of g's chunks [lo, hi) in place: a stored one where it is in the
 * body, the others decoded into raw (room checked by raw_size), then
 * hashed. */
static tfs_err decode(struct got *g, size_t n, struct tfs_diag *d)
{
	struct tfs_xet_dec *dec = tfs_xet_dec_new();
	size_t at = 0, ro = 0;
	tfs_err e = dec ? TFS_OK : tfs_fail(d, TFS_ERR_NOMEM, "out of memory");
	for (uint32_t i = 0; !e && i < g->hi; i++) {
		struct tfs_xet_chunk_hdr h;
		size_t used = 0, got = 0;
		if ((e = tfs_xet_chunk_header(g->body + at, n - at, &h, d)))
			break;
		if (!g->use[i]) {
			g->ptr[i] = NULL;
			g->lens[i] = 0;
			at += TFS_XET_CHUNK_HEADER + h.comp_len;
			continue;
		}
		if (h.type == TFS_XET_STORED) {
			g->ptr[i] = g->body + at + TFS_XET_CHUNK_HEADER;
			used = TFS_XET_CHUNK_HEADER + h.comp_len;
			got = h.raw_len;
		} else {
			g->ptr[i] = g->raw + ro;
			e = tfs_xet_chunk_decode(dec, g->body + at, n - at, g->raw + ro, g->raw_cap - ro,
						 &used, &got, d);
			ro += got;
		}
		g->lens[i] = (uint32_t)got;
		at += used;
	}
	tfs_xet_dec_free(dec);
	for (uint32_t i = g->lo; !e && i < g->hi; i++)
		if (g->use[i])
			tfs_xet_chunk_hash(g->ptr[i], g->lens[i], g->hash[i]);
	return e;
}

/* Fetch f of answer r, fetched and decoded into g; *expired when its URL
 * no longer works, *damaged when its bytes came and are not chunks. */
static tfs_err fetch_run(struct xfile *x, const struct tfs_xet_plan *r, uint32_t f, struct got *g,
			 int *expired, int *damaged, struct tfs_diag *d)
{
	const struct tfs_xet_fetch *fe = &r->fetch[f];
	uint64_t n = fe->last - fe->first + 1;
	uint32_t nc = fe->end - fe->start;
	size_t raw = 0;
	g->body = tfs_xet_cas_buffer(x->cas, n, &g->body_cap);
	g->ptr = malloc(nc * sizeof *g->ptr);
	g->lens = malloc(nc * sizeof *g->lens);
	g->hash = malloc(nc * sizeof *g->hash);
	tfs_err e = g->body && g->ptr && g->lens && g->hash ? TFS_OK
							    : tfs_fail(d, TFS_ERR_NOMEM, "out of memory");
	if (!e)
		e = tfs_xet_cas_xorb(x->cas, r->url[fe->url], fe->first, fe->last, g->body, expired, d);
	if (!e)
		*damaged = (e = raw_size(g->body, n, nc, g->use, &raw, d)) != TFS_OK;
	if (!e && raw && !(g->raw = tfs_xet_cas_buffer(x->cas, raw, &g->raw_cap)))
		e = tfs_fail(d, TFS_ERR_NOMEM, "out of memory");
	if (!e)
		*damaged = (e = decode(g, n, d)) != TFS_OK;
	for (uint32_t i = g->lo; !e && i < g->hi; i++)
		count(&x->l->xet.chunk_fetched, g->lens[i]);
	return e;
}

/* Where a term of an answer comes from: each chunk's bytes, length and
 * hash (NULL: not computed here), from a fetch of the answer or read from
 * the chunk cache (own, freed after). */
struct part {
	const uint8_t *const *ptr;
	const uint32_t *lens;
	const uint8_t (*hash)[TFS_XET_HASH_LEN];
	uint8_t *own;
	const uint8_t **own_ptr;
	uint32_t *own_lens;
};

/* Term t of an answer from the chunk cache, when it holds every chunk of
 * it (their lengths known, adding up to the term's, each checking out). */
static int cached_term(struct xfile *x, const struct tfs_xet_term *t, struct part *p)
{
	struct tfs_xorbcache *xc = x->l->xcache;
	long k = tfs_xet_plan_term_at(&x->whole, t->at);
	uint32_t n = t->end - t->start;
	uint64_t total = 0;
	struct tfs_diag d;
	if (!xc || k < 0 || !(p->own_lens = malloc(n * sizeof *p->own_lens)) ||
	    !(p->own_ptr = malloc(n * sizeof *p->own_ptr)))
		return 0;
	uint64_t g0 = tfs_xet_map_chunk(x->map, (uint32_t)k, t->start);
	for (int pass = 0; pass < 2; pass++) {
		int all = 1;
		total = 0;
		pthread_mutex_lock(&x->lock);
		for (uint32_t j = 0; j < n; j++) {
			p->own_lens[j] = x->map->len[g0 + j];
			all &= p->own_lens[j] != 0;
			total += p->own_lens[j];
		}
		pthread_mutex_unlock(&x->lock);
		if (all)
			break;
		if (pass)
			return 0;
		learn_index(x, (uint32_t)k, &d);
	}
	if (total != t->unpacked || !(p->own = malloc(total)))
		return 0;
	int fd = tfs_xorbcache_open_xorb(xc, t->xorb), ok = fd >= 0;
	for (uint32_t j = 0, off = 0; ok && j < n; off += p->own_lens[j], j++) {
		p->own_ptr[j] = p->own + off;
		ok = tfs_xorbcache_get(xc, fd, t->xorb, t->start + j, p->own_lens[j], p->own + off);
	}
	tfs_xorbcache_close_xorb(fd);
	if (!ok)
		return 0;
	p->ptr = p->own_ptr;
	p->lens = p->own_lens;
	count(&x->l->xet.chunk_cached, total);
	return 1;
}

/* Term t's part from fetch g of the answer (chunks [fe->start, ...)). */
static void fetched_term(const struct tfs_xet_term *t, const struct tfs_xet_fetch *fe, const struct got *g,
			 struct part *p)
{
	uint32_t skip = t->start - fe->start;
	p->ptr = g->ptr + skip;
	p->lens = g->lens + skip;
	p->hash = (const uint8_t(*)[TFS_XET_HASH_LEN])g->hash + skip;
}

/* Term t of an answer learnt from its chunks: their lengths add up to the
 * term's, and agree with what is known of the file (under x->lock,
 * journaled). */
static tfs_err learn_term(struct xfile *x, const struct tfs_xet_term *t, const struct part *p,
			  struct tfs_diag *d)
{
	long k = tfs_xet_plan_term_at(&x->whole, t->at);
	uint64_t sum = 0, at = t->at;
	for (uint32_t j = 0; j < t->end - t->start; j++)
		sum += p->lens[j];
	if (k < 0 || sum != t->unpacked)
		return tfs_fail(d, TFS_ERR_FORMAT,
				"a term's chunks give %llu bytes, the reconstruction says %u",
				(unsigned long long)sum, t->unpacked);
	uint64_t g0 = tfs_xet_map_chunk(x->map, (uint32_t)k, t->start);
	for (uint32_t j = 0; j < t->end - t->start; j++) {
		tfs_err e = tfs_xet_map_learn(x->map, g0 + j, p->lens[j], at, p->hash ? p->hash[j] : NULL, d);
		if (e)
			return e;
		at += p->lens[j];
	}
	return TFS_OK;
}

/* Everything answer r's terms say, learnt whole or not at all, and the
 * file's hash once complete. */
static tfs_err learn_answer(struct xfile *x, const struct tfs_xet_plan *r, const struct part *parts,
			    int *wrong_file, struct tfs_diag *d)
{
	tfs_err e = TFS_OK;
	pthread_mutex_lock(&x->lock);
	tfs_xet_map_begin(x->map);
	for (uint32_t i = 0; !e && i < r->nterm; i++)
		e = learn_term(x, &r->term[i], &parts[i], d);
	if (e)
		tfs_xet_map_undo(x->map);
	else
		tfs_xet_map_end(x->map);
	*wrong_file = !e && hash_differs(x, d);
	pthread_mutex_unlock(&x->lock);
	return *wrong_file ? TFS_ERR_IO : e;
}

/* Each term of answer r from the chunk cache where it holds it whole,
 * else from its fetch, fetched once and decoded. */
static tfs_err gather(struct xfile *x, const struct tfs_xet_plan *r, struct got *got, struct part *parts,
		      int *damaged, struct tfs_diag *d)
{
	int expired = 0;
	tfs_err e = TFS_OK;
	for (uint32_t f = 0; f < r->nfetch; f++)
		got[f].lo = UINT32_MAX;
	for (uint32_t i = 0; !e && i < r->nterm; i++) {
		const struct tfs_xet_term *t = &r->term[i];
		struct got *g = &got[t->fetch];
		uint32_t a = t->start - r->fetch[t->fetch].start, b = t->end - r->fetch[t->fetch].start;
		if (!g->use && !(g->use = calloc(r->fetch[t->fetch].end - r->fetch[t->fetch].start, 1)))
			e = tfs_fail(d, TFS_ERR_NOMEM, "out of memory");
		for (uint32_t c = a; !e && c < b; c++)
			g->use[c] = 1;
		g->lo = a < g->lo ? a : g->lo;
		g->hi = b > g->hi ? b : g->hi;
	}
	for (uint32_t i = 0; !e && i < r->nterm; i++) {
		const struct tfs_xet_term *t = &r->term[i];
		if (cached_term(x, t, &parts[i]))
			continue;
		if (!got[t->fetch].body)
			e = fetch_run(x, r, t->fetch, &got[t->fetch], &expired, damaged, d);
		if (!e)
			fetched_term(t, &r->fetch[t->fetch], &got[t->fetch], &parts[i]);
	}
	return e;
}

/* The runs of fetch fe's chunks its answer's terms used, into the chunk
 * cache; non-zero when any went in. */
static int keep_used(struct xfile *x, const struct tfs_xet_fetch *fe, const struct got *g)
{
	int put = 0;
	for (uint32_t a = g->lo; g->body && a < g->hi;) {
		uint32_t b = a;
		while (b < g->hi && g->use[b])
			b++;
		if (b > a) {
			tfs_xorbcache_put(x->l->xcache, fe->xorb, fe->start + a, b - a, g->lens + a,
					  g->ptr + a, (const uint8_t(*)[TFS_XET_HASH_LEN])g->hash + a);
			put = 1;
		}
		a = b + 1; /* (past a chunk not used, or the end) */
	}
	return put;
}

/* Bytes [s->pos, end) from the network: the reconstruction of that range
 * (which says where its first chunk starts), its terms from the chunk
 * cache or fetched, everything checked, then what was fetched kept in the
 * chunk cache, and served. Nothing is served or kept unless all of it
 * checks out. *again: a new answer may do better (an expired URL, a
 * range cut short, a damaged chunk, an answer for another range). */
static tfs_err from_network(struct xfile *x, struct sink *s, uint64_t end, int *again, struct tfs_diag *d)
{
	struct tfs_xet_plan r;
	long status;
	int wrong_file = 0, damaged = 0;
	*again = 0;
	tfs_err e = tfs_xet_cas_plan(x->cas, x->hex, s->pos, end - 1, x->base.id.size, 0, &r, &status, d);
	*again = 1;
	if (e) {
		/* An answer that does not fit the range asked (for another
		 * range, past the file) may be followed by a good one; a
		 * failed request was retried already. */
		*again = e == TFS_ERR_FORMAT;
		return e;
	}
	struct got *got = calloc(r.nfetch, sizeof *got);
	struct part *parts = calloc(r.nterm, sizeof *parts);
	if (!got || !parts)
		e = tfs_fail(d, TFS_ERR_NOMEM, "out of memory");
	if (!e)
		e = tfs_xet_plan_within(&x->whole, &r, d);
	if (!e)
		e = gather(x, &r, got, parts, &damaged, d);
	if (!e)
		e = learn_answer(x, &r, parts, &wrong_file, d);
	if (wrong_file)
		*again = 0;
	if ((wrong_file || damaged) && !__atomic_exchange_n(&x->distrust, 1, __ATOMIC_SEQ_CST))
		drop_all(x);
	int keep = !__atomic_load_n(&x->distrust, __ATOMIC_SEQ_CST), put = 0;
	for (uint32_t f = 0; !e && keep && x->l->xcache && f < r.nfetch; f++)
		put |= keep_used(x, &r.fetch[f], &got[f]);
	/* Another reader may have found the file damaged while these went
	 * in, after it dropped the file's chunks: they go too. */
	if (put && __atomic_load_n(&x->distrust, __ATOMIC_SEQ_CST))
		drop_all(x);
	for (uint32_t i = 0; !e && i < r.nterm; i++) {
		uint64_t at = r.term[i].at;
		for (uint32_t j = 0; j < r.term[i].end - r.term[i].start; at += parts[i].lens[j], j++)
			emit(s, at, parts[i].ptr[j], parts[i].lens[j], end);
	}
	for (uint32_t f = 0; got && f < r.nfetch; f++)
		got_free(x->cas, &got[f]);
	for (uint32_t i = 0; parts && i < r.nterm; i++) {
		free(parts[i].own);
		free(parts[i].own_ptr);
		free(parts[i].own_lens);
	}
	free(got);
	free(parts);
	tfs_xet_plan_free(&r);
	return e;
}

/* The block cache's tfs_fetch_fn: bytes [off, off + len) into iov, from
 * the chunk cache as far as it goes, the rest from the network (a second
 * answer when the first one's fetch failed in a way a new one may not). */
static tfs_err fetch(void *ctx, const struct tfs_iov *iov, unsigned niov, uint64_t off, uint64_t len,
		     void (*progress)(void *arg, uint64_t n), void *arg)
{
	struct xfile *x = ctx;
	struct sink s = {.iov = iov, .n = niov, .pos = off};
	struct tfs_diag d;
	uint64_t end = off + len;
	if (bad(x))
		return TFS_ERR_IO; /* said once already */
	uint8_t *buf = malloc(TFS_XET_CHUNK_MAX);
	if (buf)
		from_cache(x, &s, end, buf);
	free(buf);
	if (progress && s.pos > off)
		progress(arg, s.pos - off);
	tfs_err e = TFS_OK;
	for (int tries = 0; s.pos < end && tries < 2; tries++) {
		int again;
		if (!(e = from_network(x, &s, end, &again, &d)) || !again || tfs_http_aborted(x->l->http))
			break;
	}
	if (!e && s.pos != end)
		e = tfs_fail(&d, TFS_ERR_IO, "the chunks end before the range does");
	if (e) {
		if (!tfs_http_aborted(x->l->http) && !bad(x))
			log_failed(x, off, len, d.msg);
		return TFS_ERR_IO;
	}
	if (progress)
		progress(arg, len);
	return TFS_OK;
}

/* ---- the source ---- */

static const struct tfs_source_ops xet_ops;

/* Told by the read-ahead across files that the reader will read these
 * bytes next. */
static void xet_prefetch(struct tfs_source *s, uint64_t off, uint64_t len)
{
	tfs_cfile_prefetch(((struct xfile *)s)->cache, off, len);
}

static tfs_err xet_pread_within(struct tfs_source *s, void *buf, size_t len, uint64_t off, uint64_t limit)
{
	struct xfile *x = (struct xfile *)s;
	struct tfs_diag d;
	if (off > s->id.size || len > s->id.size - off)
		return TFS_ERR_SHORT;
	if (!len)
		return TFS_OK;
	return tfs_cfile_read_fenced(x->cache, buf, len, off, limit,
				     tfs_rlayer_follow(x->l, &x->base, off, len, limit), &d);
}

static tfs_err xet_pread(struct tfs_source *s, void *buf, size_t len, uint64_t off)
{
	return xet_pread_within(s, buf, len, off, s->id.size);
}

static tfs_err xet_map(struct tfs_source *s, uint64_t off, size_t len, uint64_t limit, struct tfs_iov *iov,
		       unsigned max, unsigned *n, void **token)
{
	struct xfile *x = (struct xfile *)s;
	struct tfs_diag d;
	*token = NULL;
	if (off > s->id.size || len > s->id.size - off || len >= (1u << 20) ||
	    max < len / TFS_CACHE_BLOCK + 2)
		return TFS_ERR_UNHANDLED;
	*n = 0;
	if (!len)
		return TFS_OK;
	return tfs_cfile_map_fenced(x->cache, off, len, limit,
				    tfs_rlayer_follow(x->l, &x->base, off, len, limit), iov, n,
				    (struct tfs_cmap **)token, &d);
}

static void xet_unmap(struct tfs_source *s, void *token)
{
	(void)s;
	tfs_cfile_unmap(token);
}

static tfs_err xet_identity(struct tfs_source *s, struct tfs_identity *id)
{
	*id = s->id; /* pinned: its hash names its bytes */
	return TFS_OK;
}

static void xet_then(struct tfs_source *s, struct tfs_source *next)
{
	if (next->ops == &xet_ops)
		tfs_cfile_chain(((struct xfile *)s)->cache, ((struct xfile *)next)->cache);
}

static void xet_keep(struct tfs_source *s)
{
	tfs_cfile_keep(((struct xfile *)s)->cache);
}

static void xet_close(struct tfs_source *s)
{
	struct xfile *x = (struct xfile *)s;
	tfs_cfile_free(x->cache);
	tfs_xet_map_free(x->map);
	tfs_xet_plan_free(&x->whole);
	pthread_mutex_destroy(&x->lock);
	free(s->location);
	free(s->etag);
	free(s->revision);
	free(x);
}

static const struct tfs_source_ops xet_ops = {
	.then = xet_then,
	.prefetch = xet_prefetch,
	.keep = xet_keep,
	.pread = xet_pread,
	.pread_within = xet_pread_within,
	.map = xet_map,
	.unmap = xet_unmap,
	.identity = xet_identity,
	.close = xet_close,
};

static struct xfile *xfile_new(struct tfs_rlayer *l, const struct tfs_xet_spec *s)
{
	struct xfile *x = calloc(1, sizeof *x);
	if (!x)
		return NULL;
	pthread_mutex_init(&x->lock, NULL);
	x->l = l;
	x->cas = s->cas;
	x->base.ops = &xet_ops;
	x->base.fd = -1;
	x->base.id.size = s->size;
	x->base.location = strdup(s->location);
	x->base.revision = s->revision ? strdup(s->revision) : NULL;
	x->base.etag = s->etag ? strdup(s->etag) : NULL;
	if (!x->base.location || (s->revision && !x->base.revision) || (s->etag && !x->base.etag)) {
		xet_close(&x->base);
		return NULL;
	}
	return x;
}

tfs_err tfs_xet_open(struct tfs_rlayer *l, const struct tfs_xet_spec *s, struct tfs_source **out,
		     int *fallback, struct tfs_diag *d)
{
	long status = 0;
	*fallback = 0;
	struct xfile *x = xfile_new(l, s);
	if (!x)
		return tfs_fail(d, TFS_ERR_NOMEM, "out of memory");
	tfs_err e = tfs_xet_hash_parse(s->hash, strlen(s->hash), x->hash)
			    ? tfs_fail(d, TFS_ERR_OPEN, "the Hub's X-Xet-Hash is not a Xet hash")
			    : TFS_OK;
	tfs_xet_hash_hex(x->hash, x->hex);
	if (!e && (e = tfs_xet_cas_ready(x->cas, &status, d)))
		*fallback = status == 404 || status == 501;
	if (!e && (e = tfs_xet_cas_plan(x->cas, x->hex, 0, s->size - 1, s->size, 1, &x->whole, &status, d)))
		*fallback = status == 404 || status == 501;
	if (!e)
		e = tfs_xet_map_new(&x->whole, s->size, &x->map, d);
	if (!e && !(x->cache = tfs_cfile_new(l->cache, NULL, s->size, fetch, x)))
		e = tfs_fail(d, TFS_ERR_NOMEM, "out of memory");
	if (e) {
		xet_close(&x->base);
		return e;
	}
	count(&l->xet.xet_files, 1);
	*out = &x->base;
	return TFS_OK;
}
