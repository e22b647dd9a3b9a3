#include "sources/remote.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "sources/cache.h"
#include "sources/readahead.h"
#include "sources/rlayer.h"

struct remote {
	struct tfs_source base;
	struct tfs_rlayer *l; /* the mount's remote layer */
	pthread_mutex_t lock; /* url, when it can be relocated */
	char *url;
	tfs_authorize_fn authorize; /* the driver's credentials, or NULL */
	void *auth_ctx;
	/* The ETag of the first answer (the bytes' server, which for the Hub
	 * is the CDN, not the Hub), or NULL: every later 206 must carry the
	 * same, since a server or cache may ignore If-Match. */
	char *served_etag;
	unsigned char *probe; /* bytes [0, nprobe) */
	size_t nprobe;
	struct tfs_cfile *cache;  /* NULL when the server ignores Range: */
	struct tfs_cwhole *whole; /* downloaded whole (NULL if the probe held it) */
	char *last_modified;      /* ... and the version its answers must be */
	tfs_err (*relocate)(void *ctx, char **url, struct tfs_diag *d);
	void *relocate_ctx;
};

/* A weak ETag cannot be used with If-Match (RFC 9110 compares strongly). */
static int usable_etag(const char *e)
{
	return e && *e && strncmp(e, "W/", 2) != 0;
}

static char *url_now(struct remote *r)
{
	pthread_mutex_lock(&r->lock);
	char *u = strdup(r->url);
	pthread_mutex_unlock(&r->lock);
	return u;
}

/* Puts on rq (zeroed, or filled by the caller but for these) what every
 * request of r's to url carries: the pinned version, and the driver's
 * credentials, asked before each try. */
static void fill_req(struct remote *r, struct tfs_http_req *rq, const char *url)
{
	rq->url = url;
	rq->follow = 1;
	rq->if_match = r->base.etag && usable_etag(r->base.etag) ? r->base.etag : NULL;
	rq->authorize = r->authorize;
	rq->auth_ctx = r->auth_ctx;
}

/* Sends rq (fill_req's part added here) to where r's bytes are now. A
 * failure before the request (memory, the credentials) is *f =
 * TFS_HTTP_NET, with d's line. */
static tfs_err remote_send(struct remote *r, struct tfs_http_req *rq, struct tfs_http_resp *rs,
			   enum tfs_http_fail *f, struct tfs_diag *d)
{
	*f = TFS_HTTP_NET;
	char *url = url_now(r);
	if (!url)
		return tfs_fail(d, TFS_ERR_NOMEM, "out of memory");
	fill_req(r, rq, url);
	tfs_err e = tfs_http_fetch(r->l->http, rq, rs, f, d);
	rq->url = NULL;
	free(url);
	return e;
}

/* After a 403 or 410, once per read: the driver may know where the file
 * went (the Hub's CDN addresses expire). 1 when r->url is the new one. */
static int relocated(struct remote *r, enum tfs_http_fail f, const struct tfs_http_resp *rs,
		     struct tfs_diag *d)
{
	if (f != TFS_HTTP_STATUS || (rs->status != 403 && rs->status != 410) || !r->relocate)
		return 0;
	char *nu = NULL;
	if (r->relocate(r->relocate_ctx, &nu, d) != TFS_OK)
		return 0;
	pthread_mutex_lock(&r->lock);
	free(r->url);
	r->url = nu;
	pthread_mutex_unlock(&r->lock);
	return 1;
}

/* A read that failed, said once in the log (the reader gets EIO). */
static void log_failed(const struct remote *r, uint64_t off, uint64_t len, const char *why)
{
	char q[TFS_QPATH_MAX];
	tfs_log("%s: bytes %llu-%llu: %s", tfs_quote_path(q, sizeof q, r->base.location),
		(unsigned long long)off, (unsigned long long)(off + len - 1), why);
}

static void log_changed(struct remote *r)
{
	char q[TFS_QPATH_MAX];
	if (!__atomic_exchange_n(&r->base.changed, 1, __ATOMIC_RELAXED))
		tfs_log("%s: changed since it was mounted (its ETag is no longer %s); its reads now fail with EIO: remount to see the new version",
			tfs_quote_path(q, sizeof q, r->base.location),
			r->base.etag ? r->base.etag : r->served_etag);
}

/* A 206 of another version: a server (or a proxy, a CDN) that ignores
 * If-Match serves the new bytes with their own ETag and size. */
static int other_version(const struct remote *r, const struct tfs_http_resp *rs)
{
	if (rs->range_total != r->base.id.size)
		return 1;
	return r->served_etag && strcmp(rs->etag, r->served_etag) != 0;
}

struct pinned {
	struct remote *r;
	void (*progress)(void *arg, uint64_t n);
	void *arg;
	uint64_t off, len;
	const uint64_t *in_place;
};

static int refuse_other(void *arg, const struct tfs_http_resp *rs)
{
	return other_version(((const struct pinned *)arg)->r, rs);
}

static void progress(void *arg, uint64_t n)
{
	const struct pinned *p = arg;
	if (p->progress)
		p->progress(p->arg, n);
}

static int no_retry(void *arg, const struct tfs_http_resp *rs)
{
	(void)arg;
	(void)rs;
	return 1;
}

/* Before a retry of a read: hopeless once the file is known to have
 * changed (logged once; its reads fail at once from then on), or found
 * to have changed where the try was cut after its 206 began: a cache
 * that keeps a file in slices (nginx's) cuts a range running from a slice
 * of the old version into one of the new, rather than answer 412, and
 * every retry would be cut there again (four tries, ten seconds). One
 * byte at the cut, asked with If-Match, says which. */
static int hopeless(void *arg, const struct tfs_http_resp *rs)
{
	struct pinned *p = arg;
	struct remote *r = p->r;
	if (__atomic_load_n(&r->base.changed, __ATOMIC_RELAXED))
		return 1;
	if (rs->status != 206 || !p->in_place)
		return 0;
	uint64_t at = p->off + (*p->in_place < p->len ? *p->in_place : p->len - 1);
	unsigned char byte;
	struct tfs_http_req rq = {
		.has_range = 1, .off = at, .len = 1, .buf = &byte, .buflen = 1, .hopeless = no_retry};
	struct tfs_http_resp ck;
	enum tfs_http_fail f;
	struct tfs_diag d;
	tfs_err e = remote_send(r, &rq, &ck, &f, &d);
	if ((!e && other_version(r, &ck)) || (e && f == TFS_HTTP_STATUS && ck.status == 412)) {
		log_changed(r);
		return 1;
	}
	return 0;
}

static tfs_err fetch(void *ctx, const struct tfs_iov *iov, unsigned niov, uint64_t off, uint64_t len,
		     void (*on_progress)(void *arg, uint64_t n), void *arg)
{
	struct remote *r = ctx;
	uint64_t in_place = 0; /* across a relocation too */
	struct pinned pin = {r, on_progress, arg, off, len, &in_place};
	if (__atomic_load_n(&r->base.changed, __ATOMIC_RELAXED))
		return TFS_ERR_IO; /* said once already; nothing of it is served now */
	struct tfs_http_resp rs;
	enum tfs_http_fail f;
	struct tfs_diag d;
	for (int tries = 0;; tries++) {
		struct tfs_http_req rq = {
			.has_range = 1,
			.off = off,
			.len = len,
			.iov = iov,
			.niov = niov,
			.accept = refuse_other,
			.progress = progress,
			.arg = &pin,
			.in_place = &in_place,
			.hopeless = hopeless,
		};
		tfs_err e = remote_send(r, &rq, &rs, &f, &d);
		if ((!e && other_version(r, &rs)) || (e && f == TFS_HTTP_REFUSED)) {
			log_changed(r);
			return TFS_ERR_IO;
		}
		if (!e)
			return TFS_OK;
		if (!tries && relocated(r, f, &rs, &d))
			continue;
		if (f == TFS_HTTP_STATUS && rs.status == 412)
			log_changed(r);
		else if (f != TFS_HTTP_ABORTED && !__atomic_load_n(&r->base.changed, __ATOMIC_RELAXED))
			log_failed(r, off, len, d.msg);
		return TFS_ERR_IO;
	}
}

/* ---- a server that ignores Range requests ---- */

/* An answer of another version than the one mounted: another size, ETag
 * or Last-Modified (python3 -m http.server gives no ETag). */
static int other_whole(void *arg, const struct tfs_http_resp *rs)
{
	const struct remote *r = ((const struct pinned *)arg)->r;
	if (rs->status == 206)
		return other_version(r, rs);
	return (rs->has_length && rs->length != r->base.id.size) ||
	       (r->served_etag && strcmp(rs->etag, r->served_etag) != 0) ||
	       (r->last_modified && strcmp(rs->last_modified, r->last_modified) != 0);
}

/* The cache's tfs_whole_fetch_fn: the whole file with no Range asked (the
 * server would ignore it), or a range from the start of an answer. */
static tfs_err whole_fetch(void *ctx, void *buf, uint64_t off, uint64_t len,
			   void (*on_progress)(void *arg, uint64_t n), void *arg, uint64_t *in_place,
			   struct tfs_diag *d)
{
	struct remote *r = ctx;
	struct pinned pin = {.r = r, .progress = on_progress, .arg = arg};
	struct tfs_iov v = {.p = buf, .len = (size_t)len, .fd = -1};
	int all = off == 0 && len == r->base.id.size;
	struct tfs_http_resp rs;
	enum tfs_http_fail f;
	struct tfs_diag rd;
	if (__atomic_load_n(&r->base.changed, __ATOMIC_RELAXED))
		return tfs_fail(d, TFS_ERR_IO, "changed since it was mounted");
	for (int tries = 0;; tries++) {
		struct tfs_http_req rq = {.accept = other_whole, .arg = &pin, .off = off, .len = len};
		if (all) {
			rq.iov = &v;
			rq.niov = 1;
			rq.progress = progress;
			rq.in_place = in_place;
		} else {
			rq.has_range = 1;
			rq.whole_ok = 1;
			rq.buf = buf;
			rq.buflen = (size_t)len;
		}
		tfs_err e = remote_send(r, &rq, &rs, &f, d);
		if ((!e && rs.status == 206 && other_version(r, &rs)) || (e && f == TFS_HTTP_REFUSED) ||
		    (e && f == TFS_HTTP_STATUS && rs.status == 412)) {
			log_changed(r);
			return tfs_fail(d, TFS_ERR_IO, "changed since it was mounted");
		}
		if (!e)
			return TFS_OK;
		if (!tries && relocated(r, f, &rs, &rd))
			continue;
		/* (The whole download's failure is said by its thread.) */
		if (f != TFS_HTTP_ABORTED && !all)
			log_failed(r, off, len, d->msg);
		return e;
	}
}

/* A read of a file downloaded whole: one piece, where it landed. */
static tfs_err whole_map(struct remote *r, uint64_t off, size_t len, struct tfs_iov *iov, unsigned max,
			 unsigned *n)
{
	struct tfs_diag d;
	const void *p;
	if (off < r->nprobe || max < 1)
		return TFS_ERR_UNHANDLED; /* read: the start is in the probe */
	tfs_err e = tfs_cwhole_at(r->whole, off, len, &p, &d);
	if (e)
		return e;
	iov[0] = (struct tfs_iov){.p = (void *)p, .len = len, .fd = -1};
	*n = 1;
	return TFS_OK;
}

/* The probe was answered with the whole file: what it did not hold is
 * downloaded whole when first read (tfs_rlayer_notice says so). */
static tfs_err whole_setup(struct remote *r, const struct tfs_http_resp *rs, struct tfs_diag *d)
{
	if (*rs->last_modified && !(r->last_modified = strdup(rs->last_modified)))
		return tfs_fail(d, TFS_ERR_NOMEM, "out of memory");
	if (r->base.id.size <= r->nprobe)
		return TFS_OK; /* all of it came */
	return tfs_cwhole_new(r->l->cache, r->base.location, r->base.id.size, whole_fetch, r, &r->whole, d);
}

static const struct tfs_source_ops remote_ops;

/* Told by the read-ahead across files that the reader will read these
 * bytes next. */
static void remote_prefetch(struct tfs_source *s, uint64_t off, uint64_t len)
{
	struct remote *r = (struct remote *)s;
	if (r->cache)
		tfs_cfile_prefetch(r->cache, off, len);
}

static tfs_err remote_pread_within(struct tfs_source *s, void *buf, size_t len, uint64_t off, uint64_t limit)
{
	struct remote *r = (struct remote *)s;
	struct tfs_diag d;
	if (off > s->id.size || len > s->id.size - off)
		return TFS_ERR_SHORT;
	if (off < r->nprobe) {
		size_t k = r->nprobe - off < len ? (size_t)(r->nprobe - off) : len;
		memcpy(buf, r->probe + off, k);
		buf = (char *)buf + k;
		len -= k;
		off += k;
	}
	if (!len)
		return TFS_OK;
	if (r->whole)
		return tfs_cwhole_read(r->whole, buf, len, off, &d);
	return tfs_cfile_read_fenced(r->cache, buf, len, off, limit,
				     tfs_rlayer_follow(r->l, &r->base, off, len, limit), &d);
}

static tfs_err remote_map(struct tfs_source *s, uint64_t off, size_t len, uint64_t limit, struct tfs_iov *iov,
			  unsigned max, unsigned *n, void **token)
{
	struct remote *r = (struct remote *)s;
	struct tfs_diag d;
	unsigned k = 0;
	*token = NULL;
	if (r->whole)
		return whole_map(r, off, len, iov, max, n);
	if (!r->cache || off > s->id.size || len > s->id.size - off || len >= (1u << 20) ||
	    max < len / TFS_CACHE_BLOCK + 3)
		return TFS_ERR_UNHANDLED;
	if (off < r->nprobe) {
		size_t part = r->nprobe - off < len ? (size_t)(r->nprobe - off) : len;
		iov[k].p = r->probe + off;
		iov[k++].len = part;
		len -= part;
		off += part;
	}
	unsigned m = 0;
	tfs_err e = len ? tfs_cfile_map_fenced(r->cache, off, len, limit,
					       tfs_rlayer_follow(r->l, &r->base, off, len, limit), iov + k,
					       &m, (struct tfs_cmap **)token, &d)
			: TFS_OK;
	*n = k + m;
	return e;
}

static int remote_memo_get(struct tfs_source *s, const char *key, char *val, size_t cap)
{
	struct remote *r = (struct remote *)s;
	return r->cache ? tfs_cfile_memo_get(r->cache, key, val, cap) : 0;
}

static void remote_memo_put(struct tfs_source *s, const char *key, const char *val)
{
	struct remote *r = (struct remote *)s;
	if (r->cache)
		tfs_cfile_memo_put(r->cache, key, val);
}

static void remote_unmap(struct tfs_source *s, void *token)
{
	(void)s;
	tfs_cfile_unmap(token);
}

static tfs_err remote_pread(struct tfs_source *s, void *buf, size_t len, uint64_t off)
{
	return remote_pread_within(s, buf, len, off, s->id.size);
}

static tfs_err remote_identity(struct tfs_source *s, struct tfs_identity *id)
{
	/* Pinned: every read checks the version itself. */
	*id = s->id;
	return TFS_OK;
}

static void remote_close(struct tfs_source *s)
{
	struct remote *r = (struct remote *)s;
	tfs_cwhole_free(r->whole);
	free(r->last_modified);
	tfs_cfile_free(r->cache);
	free(r->url);
	free(r->served_etag);
	free(r->probe);
	free(s->location);
	free(s->etag);
	free(s->revision);
	pthread_mutex_destroy(&r->lock);
	free(r);
}

static void remote_then(struct tfs_source *s, struct tfs_source *next)
{
	struct remote *r = (struct remote *)s;
	if (next->ops == &remote_ops && r->cache && ((struct remote *)next)->cache)
		tfs_cfile_chain(r->cache, ((struct remote *)next)->cache);
}

static void remote_keep(struct tfs_source *s)
{
	struct remote *r = (struct remote *)s;
	if (r->cache)
		tfs_cfile_keep(r->cache);
}

static const struct tfs_source_ops remote_ops = {
	.then = remote_then,
	.prefetch = remote_prefetch,
	.keep = remote_keep,
	.pread = remote_pread,
	.pread_within = remote_pread_within,
	.map = remote_map,
	.unmap = remote_unmap,
	.memo_get = remote_memo_get,
	.memo_put = remote_memo_put,
	.identity = remote_identity,
	.close = remote_close,
};

static char *dup_or_null(const char *s, int *bad)
{
	if (!s)
		return NULL;
	char *d = strdup(s);
	*bad |= !d;
	return d;
}

/* An HTTP date (Last-Modified) as seconds; 0 when it is not one. */
static int64_t http_time(const char *s)
{
	struct tm tm;
	memset(&tm, 0, sizeof tm);
	const char *end = strptime(s, "%a, %d %b %Y %H:%M:%S GMT", &tm);
	return end && !*end ? (int64_t)timegm(&tm) : 0;
}

/* A remote with its own copy of the spec and room for `want` probe bytes. */
static struct remote *remote_new(struct tfs_rlayer *l, const struct tfs_remote_spec *s, uint64_t want)
{
	struct remote *r = calloc(1, sizeof *r);
	int bad = 0;
	if (!r)
		return NULL;
	r->l = l;
	pthread_mutex_init(&r->lock, NULL);
	r->base.ops = &remote_ops;
	r->base.fd = -1;
	r->url = dup_or_null(s->url, &bad);
	r->base.location = dup_or_null(s->location, &bad);
	r->base.etag = dup_or_null(s->etag, &bad);
	r->base.revision = dup_or_null(s->revision, &bad);
	r->authorize = s->authorize;
	r->auth_ctx = s->auth_ctx;
	r->relocate = s->relocate;
	r->relocate_ctx = s->relocate_ctx;
	r->probe = malloc(want ? want : 1);
	if (bad || !r->probe) {
		remote_close(&r->base);
		return NULL;
	}
	return r;
}

/* The probe's failure as the user should read it. */
static tfs_err probe_failed(const struct tfs_remote_spec *s, const struct tfs_http_resp *rs,
			    enum tfs_http_fail f, tfs_err e, struct tfs_diag *d)
{
	if (f != TFS_HTTP_STATUS)
		return e;
	if (s->explain)
		return s->explain(rs->status, rs->error_code, d);
	if (rs->status == 404 || rs->status == 410)
		return tfs_fail(d, TFS_ERR_NOENT, "not found (HTTP %ld)", rs->status);
	if (rs->status == 412)
		return tfs_fail(d, TFS_ERR_OPEN,
				"changed while being mounted (its ETag is no longer %s); try again",
				s->etag ? s->etag : "the one pinned");
	if (rs->status == 401 || rs->status == 403)
		return tfs_fail(d, TFS_ERR_OPEN, "access denied (HTTP %ld%s%s)", rs->status,
				*rs->error_code ? ": " : "", rs->error_code);
	return e;
}

/* The probe: the first bytes (want of them, into r->probe), and with them
 * the size and version. The body goes to a growing buffer so that a
 * server answering 200 with a small whole file is seen as what it is. */
static tfs_err probe(struct remote *r, const struct tfs_remote_spec *s, uint64_t want,
		     struct tfs_http_req *rq, struct tfs_http_resp *rs, uint64_t *size, struct tfs_diag *d)
{
	enum tfs_http_fail f;
	char *body = NULL;
	size_t blen = 0;
	memset(rq, 0, sizeof *rq);
	fill_req(r, rq, r->url);
	if (s->has_size && s->size == 0) {
		rq->head = 1; /* nothing to range over */
	} else {
		rq->has_range = 1;
		rq->range_clip = !s->has_size;
		rq->whole_ok = 1; /* a server that ignores Range: its start */
		rq->off = 0;
		rq->len = want;
		rq->body = &body;
		rq->bodylen = &blen;
		rq->body_max = want;
	}
	tfs_err e = tfs_http_fetch(r->l->http, rq, rs, &f, d);
	if (e && f == TFS_HTTP_STATUS && rs->status == 416 && rs->has_range == 2 && rs->range_total == 0) {
		e = TFS_OK; /* an empty file has no byte to ask for */
		rs->status = 206;
		rs->has_range = 1;
		rs->range_total = 0;
	}
	if (!e && rq->head)
		*size = 0;
	else if (!e && rs->status == 206)
		*size = rs->range_total;
	else if (!e && rs->status == 200 && rs->has_length)
		*size = rs->length; /* the server ignores Range: the body's start came */
	else if (!e && rs->status == 200)
		e = tfs_fail(
			d, TFS_ERR_OPEN,
			"the server ignores Range requests and does not say the file's size (no Content-Length)");
	else if (!e)
		e = tfs_fail(d, TFS_ERR_OPEN, "unexpected HTTP %ld to a range request", rs->status);
	else
		e = probe_failed(s, rs, f, e, d);
	if (!e && s->has_size && *size != s->size)
		e = tfs_fail(d, TFS_ERR_OPEN, "the server says %llu bytes, its listing said %llu",
			     (unsigned long long)*size, (unsigned long long)s->size);
	if (!e) {
		r->nprobe = blen;
		memcpy(r->probe, body, blen);
		if (blen != (*size < want ? *size : want))
			e = tfs_fail(d, TFS_ERR_OPEN, "the first range came back short");
	}
	free(body);
	return e;
}

/* After the probe: the version (the one given, Hub and S3, else the
 * server's ETag), the times (Last-Modified), and where the rest of the
 * bytes will come from: ranges through the block cache, or one whole
 * download. */
static tfs_err settle(struct remote *r, const struct tfs_http_req *rq, const struct tfs_http_resp *rs,
		      uint64_t size, struct tfs_diag *d)
{
	if ((*rs->etag && !(r->served_etag = strdup(rs->etag))) ||
	    (!r->base.etag && usable_etag(rs->etag) && !(r->base.etag = strdup(rs->etag))))
		return tfs_fail(d, TFS_ERR_NOMEM, "out of memory");
	char q[TFS_QPATH_MAX];
	/* (A file downloaded whole is one version however it is: its
	 * download must have the first answer's size and Last-Modified.) */
	if (!r->base.etag && !(rs->status == 200 && !rq->head && *rs->last_modified))
		tfs_log("%s: warning: the server gives no strong ETag, so a change of the file during the mount cannot be detected",
			tfs_quote_path(q, sizeof q, r->base.location));
	r->base.id.size = size;
	r->base.id.mtime_sec = r->base.id.ctime_sec = http_time(rs->last_modified);
	if (rs->status == 200 && !rq->head)
		return whole_setup(r, rs, d);
	/* The cache key: where the bytes are and which version. */
	size_t kl = strlen(r->base.location) + (r->base.etag ? strlen(r->base.etag) : 0) + 2;
	char *key = malloc(kl);
	if (key)
		snprintf(key, kl, "%s\n%s", r->base.location, r->base.etag ? r->base.etag : "");
	r->cache = key ? tfs_cfile_new(r->l->cache, key, size, fetch, r) : NULL;
	free(key);
	return r->cache ? TFS_OK : tfs_fail(d, TFS_ERR_NOMEM, "out of memory");
}

tfs_err tfs_remote_open(struct tfs_rlayer *l, const struct tfs_remote_spec *s, struct tfs_source **out,
			struct tfs_diag *d)
{
	uint64_t want = s->has_size && s->size < TFS_REMOTE_PROBE ? s->size : TFS_REMOTE_PROBE;
	struct remote *r = remote_new(l, s, want);
	if (!r)
		return tfs_fail(d, TFS_ERR_NOMEM, "out of memory");
	struct tfs_http_req rq;
	struct tfs_http_resp rs;
	uint64_t size = 0;
	tfs_err e = probe(r, s, want, &rq, &rs, &size, d);
	if (!e)
		e = settle(r, &rq, &rs, size, d);
	if (e) {
		remote_close(&r->base);
		return e;
	}
	*out = &r->base;
	return TFS_OK;
}
