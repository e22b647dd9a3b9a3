#include "sources/xetcas.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#include "compute/xettoken.h"
#include "sources/httpc.h"
#include "sources/rlayer.h"

/* A reconstruction is a few hundred bytes per term: 64 MiB is room for a
 * file of hundreds of thousands of terms, and bounds a server that never
 * stops. */
#define PLAN_BODY_MAX (64u << 20)

/* Buffers kept for the next fetch: as many as fetches run at once (32
 * by default), of at most POOL_MAX bytes each and POOL_BYTES in all. */
#define POOL_KEEP 64
#define POOL_MAX (32u << 20)
#define POOL_BYTES (160u << 20)

struct tfs_xet_cas {
	struct tfs_http *http;
	struct tfs_xet_counts *counts;
	char *what;
	tfs_xet_token_fn token_fn;
	void *ctx;
	pthread_mutex_t lock; /* all below */
	pthread_cond_t done;  /* a renewal ended */
	int renewing;
	unsigned gen; /* tokens held so far: 0, none yet */
	struct tfs_xet_token tok;
	int64_t issued; /* when it came (the wall clock, as exp) */
	long status;    /* the last renewal's failure */
	char why[TFS_DIAG_MAX];
	pthread_mutex_t pool_lock; /* the buffers given back */
	void *pool[POOL_KEEP];
	size_t pool_cap[POOL_KEEP];
	unsigned npool;
	size_t pool_bytes;
};

static int64_t now_s(void)
{
	return (int64_t)time(NULL);
}

tfs_err tfs_xet_cas_new(struct tfs_http *http, struct tfs_xet_counts *counts, const char *what,
			tfs_xet_token_fn token, void *ctx, struct tfs_xet_cas **out)
{
	struct tfs_xet_cas *c = calloc(1, sizeof *c);
	if (!c || !(c->what = strdup(what))) {
		free(c);
		return TFS_ERR_NOMEM;
	}
	c->http = http;
	c->counts = counts;
	c->token_fn = token;
	c->ctx = ctx;
	pthread_mutex_init(&c->lock, NULL);
	pthread_mutex_init(&c->pool_lock, NULL);
	pthread_cond_init(&c->done, NULL);
	*out = c;
	return TFS_OK;
}

void tfs_xet_cas_free(struct tfs_xet_cas *c)
{
	if (!c)
		return;
	explicit_bzero(&c->tok, sizeof c->tok);
	for (unsigned i = 0; i < c->npool; i++)
		free(c->pool[i]);
	pthread_mutex_destroy(&c->pool_lock);
	pthread_mutex_destroy(&c->lock);
	pthread_cond_destroy(&c->done);
	free(c->what);
	free(c);
}

static void count(uint64_t *n, uint64_t by)
{
	__atomic_fetch_add(n, by, __ATOMIC_RELAXED);
}

/* A new token, unless another one came since generation `seen` (then that
 * one is used): one renewal in flight, the others wait for it. */
static tfs_err renew(struct tfs_xet_cas *c, unsigned seen, long *status, struct tfs_diag *d)
{
	pthread_mutex_lock(&c->lock);
	while (c->renewing)
		pthread_cond_wait(&c->done, &c->lock);
	if (c->gen != seen) {
		pthread_mutex_unlock(&c->lock);
		return TFS_OK;
	}
	c->renewing = 1;
	pthread_mutex_unlock(&c->lock);
	char *body = NULL;
	size_t len = 0;
	struct tfs_xet_token *t = malloc(sizeof *t);
	long st = 0;
	count(&c->counts->cas_requests, 1);
	tfs_err e =
		!t ? tfs_fail(d, TFS_ERR_NOMEM, "out of memory") : c->token_fn(c->ctx, &body, &len, &st, d);
	if (!e && (e = tfs_xet_token_parse(body, len, t, d))) {
		char why[TFS_DIAG_MAX];
		snprintf(why, sizeof why, "%s", d->msg);
		tfs_fail(d, e, "the Hub's Xet token for %s: %.900s", c->what, why);
	}
	if (body)
		explicit_bzero(body, len);
	free(body);
	pthread_mutex_lock(&c->lock);
	if (!e) {
		c->tok = *t;
		c->issued = now_s();
		c->gen++;
	} else {
		c->status = st;
		snprintf(c->why, sizeof c->why, "%s", d->msg);
	}
	c->renewing = 0;
	pthread_cond_broadcast(&c->done);
	pthread_mutex_unlock(&c->lock);
	if (t)
		explicit_bzero(t, sizeof *t);
	free(t);
	*status = st;
	return e;
}

tfs_err tfs_xet_cas_ready(struct tfs_xet_cas *c, long *status, struct tfs_diag *d)
{
	pthread_mutex_lock(&c->lock);
	unsigned gen = c->gen;
	pthread_mutex_unlock(&c->lock);
	*status = 0;
	if (gen)
		return TFS_OK;
	tfs_err e = renew(c, 0, status, d);
	pthread_mutex_lock(&c->lock);
	if (!e && !c->gen) {
		/* Another's renewal ran instead of ours, and failed. */
		*status = c->status;
		e = tfs_fail(d, TFS_ERR_OPEN, "%s", c->why);
	}
	pthread_mutex_unlock(&c->lock);
	return e;
}

static int same_origin(const char *origin, const char *url)
{
	size_t n = strlen(origin);
	return n && strncasecmp(url, origin, n) == 0 && (url[n] == '/' || url[n] == 0);
}

/* The CAS's credentials (a tfs_authorize_fn): the token, to the CAS's
 * origin only, renewed first when it is about to expire (a tenth of its
 * life or a minute before, whichever is sooner; and not again within a
 * second of the last one, for a server that hands out expired tokens). */
static tfs_err cas_authorize(void *ctx, const char *url, struct tfs_http_creds *cr, struct tfs_diag *d)
{
	struct tfs_xet_cas *c = ctx;
	long st;
	(void)d;
	pthread_mutex_lock(&c->lock);
	int64_t life = c->tok.exp - c->issued, margin = life / 10 < 60 ? life / 10 : 60, now = now_s();
	int expiring = c->gen && now >= c->tok.exp - (margin > 0 ? margin : 0) && now > c->issued;
	unsigned gen = c->gen;
	pthread_mutex_unlock(&c->lock);
	if (expiring) {
		struct tfs_diag rd;
		renew(c, gen, &st, &rd); /* (failing, the old one is sent: the CAS decides) */
	}
	pthread_mutex_lock(&c->lock);
	if (c->gen && same_origin(c->tok.origin, url))
		snprintf(cr->auth, sizeof cr->auth, "Authorization: Bearer %s", c->tok.token);
	pthread_mutex_unlock(&c->lock);
	return TFS_OK;
}

static tfs_err plan_failed(struct tfs_xet_cas *c, const struct tfs_http_resp *rs, enum tfs_http_fail f,
			   int renewed, struct tfs_diag *d)
{
	char why[TFS_DIAG_MAX];
	snprintf(why, sizeof why, "%s", d->msg);
	if (f == TFS_HTTP_STATUS && rs->status == 401)
		return tfs_fail(d, TFS_ERR_IO, "the Xet CAS refuses the token of %s (HTTP 401)%s", c->what,
				renewed ? ", a new one too" : "");
	return tfs_fail(d, TFS_ERR_IO, "the Xet CAS's reconstruction: %.900s", why);
}

tfs_err tfs_xet_cas_plan(struct tfs_xet_cas *c, const char *hex, uint64_t first, uint64_t last, uint64_t size,
			 int whole, struct tfs_xet_plan *p, long *status, struct tfs_diag *d)
{
	char url[TFS_XET_CAS_URL_MAX + 128], range[64];
	snprintf(range, sizeof range, "Range: bytes=%llu-%llu", (unsigned long long)first,
		 (unsigned long long)last);
	char *body = NULL;
	size_t len = 0;
	struct tfs_http_resp rs;
	enum tfs_http_fail f = TFS_HTTP_OK;
	tfs_err e = TFS_OK;
	for (int renewed = 0;; renewed = 1) {
		/* (A renewed token may name another CAS.) */
		pthread_mutex_lock(&c->lock);
		unsigned gen = c->gen;
		snprintf(url, sizeof url, "%s/v1/reconstructions/%s", c->tok.cas, hex);
		pthread_mutex_unlock(&c->lock);
		struct tfs_http_req rq = {.url = url,
					  .body = &body,
					  .bodylen = &len,
					  .body_max = PLAN_BODY_MAX,
					  .authorize = cas_authorize,
					  .auth_ctx = c,
					  .header = whole ? NULL : range};
		count(&c->counts->cas_requests, 1);
		free(body);
		body = NULL;
		e = tfs_http_fetch(c->http, &rq, &rs, &f, d);
		*status = f == TFS_HTTP_STATUS || f == TFS_HTTP_OK ? rs.status : 0;
		if (!e || renewed || f != TFS_HTTP_STATUS || rs.status != 401)
			break;
		long st;
		struct tfs_diag rd;
		if (renew(c, gen, &st, &rd))
			break; /* (its own failure said below as the CAS's refusal) */
	}
	if (!e && (rs.status != 200 || !body))
		e = tfs_fail(d, TFS_ERR_IO, "the Xet CAS answered HTTP %ld to a reconstruction", rs.status);
	else if (e)
		e = plan_failed(c, &rs, f, *status == 401, d);
	if (!e)
		e = tfs_xet_plan_parse(body, len, first, last, size, p, d);
	free(body);
	return e;
}

tfs_err tfs_xet_cas_xorb(struct tfs_xet_cas *c, const char *url, uint64_t first, uint64_t last, void *buf,
			 int *expired, struct tfs_diag *d)
{
	struct tfs_http_req rq = {.url = url,
				  .follow = 1,
				  .has_range = 1,
				  .off = first,
				  .len = last - first + 1,
				  .buf = buf,
				  .buflen = (size_t)(last - first + 1)};
	struct tfs_http_resp rs;
	enum tfs_http_fail f;
	count(&c->counts->xorb_requests, 1);
	tfs_err e = tfs_http_fetch(c->http, &rq, &rs, &f, d);
	*expired = e && f == TFS_HTTP_STATUS && (rs.status == 403 || rs.status == 410);
	if (!e) {
		count(&c->counts->xorb_bytes, last - first + 1);
		return TFS_OK;
	}
	char why[TFS_DIAG_MAX];
	snprintf(why, sizeof why, "%s", d->msg);
	return tfs_fail(d, e, "xorb bytes %llu-%llu: %.900s%s", (unsigned long long)first,
			(unsigned long long)last, why, *expired ? " (its URL expired?)" : "");
}

void *tfs_xet_cas_buffer(struct tfs_xet_cas *c, size_t n, size_t *cap)
{
	void *p = NULL;
	pthread_mutex_lock(&c->pool_lock);
	for (unsigned i = 0; i < c->npool; i++)
		if (c->pool_cap[i] >= n) {
			p = c->pool[i];
			*cap = c->pool_cap[i];
			c->pool_bytes -= *cap;
			c->pool[i] = c->pool[--c->npool];
			c->pool_cap[i] = c->pool_cap[c->npool];
			break;
		}
	pthread_mutex_unlock(&c->pool_lock);
	if (p)
		return p;
	*cap = (n + (1u << 20) - 1) & ~(size_t)((1u << 20) - 1); /* whole MiB: reused for the next sizes */
	return malloc(*cap ? *cap : 1);
}

void tfs_xet_cas_unbuffer(struct tfs_xet_cas *c, void *p, size_t cap)
{
	if (!p)
		return;
	pthread_mutex_lock(&c->pool_lock);
	if (c->npool < POOL_KEEP && cap <= POOL_MAX && c->pool_bytes + cap <= POOL_BYTES) {
		c->pool[c->npool] = p;
		c->pool_cap[c->npool++] = cap;
		c->pool_bytes += cap;
		p = NULL;
	}
	pthread_mutex_unlock(&c->pool_lock);
	free(p);
}
