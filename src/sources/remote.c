#include "sources/remote.h"

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "sources/cache.h"

const struct tfs_opt_spec tfs_remote_opts[] = {
	{"cache_size", 1, "remote sources: memory for cached blocks (default 256M)", "SIZE", 0},
	{"cache_dir", 1, "remote sources: keep fetched blocks in DIR across mounts", "DIR", TFS_OPT_PATH},
	{"cache_max", 1, "remote sources: size limit of cache_dir (default 10G)", "SIZE", 0},
	{"retries", 1, "remote sources: retries of a failed request (default 3)", "N", 0},
	{"timeout", 1, "remote sources: seconds without a byte before a request fails (default 15)",
	 "SECONDS", 0},
	{"concurrency", 1, "remote sources: range requests in flight at most (default 32)", "N", 0},
	{"part_size", 1, "remote sources: bytes per read-ahead request (default 4M)", "SIZE", 0},
	{"warm", 0, "remote sources: fill cache_dir with the whole checkpoint after mounting", NULL, 0},
	{NULL, 0, NULL, NULL, 0},
};

static int parse_uint(const char *s, unsigned max, unsigned *v)
{
	uint64_t x;
	if (tfs_opt_number(s, 0, max, &x))
		return -1;
	*v = (unsigned)x;
	return 0;
}

tfs_err tfs_remote_configure(const struct tfs_opts *o, struct tfs_diag *d)
{
	struct tfs_http_policy p;
	tfs_http_get_policy(&p);
	const char *r = tfs_opts_get(o, "retries"), *t = tfs_opts_get(o, "timeout");
	if (r && parse_uint(r, 20, &p.retries))
		return tfs_fail(d, TFS_ERR_INVAL, "-o retries= takes a number from 0 to 20, not '%s'", r);
	if (t && (parse_uint(t, 3600, &p.stall_seconds) || p.stall_seconds == 0))
		return tfs_fail(d, TFS_ERR_INVAL, "-o timeout= takes seconds from 1 to 3600, not '%s'", t);
	if (t)
		p.connect_seconds = p.stall_seconds < 10 ? p.stall_seconds : 10;
	tfs_http_set_policy(&p);
	return tfs_cache_configure(o, d);
}

struct remote {
	struct tfs_source base;
	pthread_mutex_t lock; /* url, when it can be relocated */
	char *url;
	char *auth;
	char **headers;
	char *aws_sigv4, *userpwd;
	int netrc;
	/* The ETag of the first answer (the bytes' server, which for the Hub
	 * is the CDN, not the Hub), or NULL: every later 206 must carry the
	 * same, since a server or cache may ignore If-Match. */
	char *served_etag;
	unsigned char *probe; /* bytes [0, nprobe) */
	size_t nprobe;
	struct tfs_cfile *cache;
	tfs_err (*relocate)(void *ctx, char **url, struct tfs_diag *d);
	void *relocate_ctx;
};

/* A weak ETag cannot be used with If-Match (RFC 9110 compares strongly). */
static int usable_etag(const char *e)
{
	return e && *e && strncmp(e, "W/", 2) != 0;
}

static void fill_req(struct remote *r, struct tfs_http_req *rq, const char *url)
{
	memset(rq, 0, sizeof *rq);
	rq->url = url;
	rq->follow = 1;
	rq->if_match = r->base.etag && usable_etag(r->base.etag) ? r->base.etag : NULL;
	rq->auth = r->auth;
	rq->headers = (const char *const *)r->headers;
	rq->aws_sigv4 = r->aws_sigv4;
	rq->userpwd = r->userpwd;
	rq->netrc = r->netrc;
}

static char *url_now(struct remote *r)
{
	pthread_mutex_lock(&r->lock);
	char *u = strdup(r->url);
	pthread_mutex_unlock(&r->lock);
	return u;
}

static void log_changed(struct remote *r)
{
	if (!__atomic_exchange_n(&r->base.changed, 1, __ATOMIC_RELAXED))
		tfs_log("%s: changed since it was mounted (its ETag is no longer %s); its reads now fail with EIO: remount to see the new version",
			r->base.location, r->base.etag ? r->base.etag : r->served_etag);
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
	const struct remote *r;
	void (*progress)(void *arg, uint64_t n);
	void *arg;
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

static tfs_err fetch(void *ctx, const struct tfs_iov *iov, unsigned niov, uint64_t off, uint64_t len,
		     void (*on_progress)(void *arg, uint64_t n), void *arg)
{
	struct remote *r = ctx;
	struct pinned pin = {r, on_progress, arg};
	uint64_t in_place = 0; /* across a relocation too */
	if (__atomic_load_n(&r->base.changed, __ATOMIC_RELAXED))
		return TFS_ERR_IO; /* said once already; nothing of it is served now */
	struct tfs_http_req rq;
	struct tfs_http_resp rs;
	enum tfs_http_fail f;
	struct tfs_diag d;
	for (int relocated = 0;; relocated++) {
		char *url = url_now(r);
		if (!url)
			return TFS_ERR_NOMEM;
		fill_req(r, &rq, url);
		rq.has_range = 1;
		rq.off = off;
		rq.len = len;
		rq.iov = iov;
		rq.niov = niov;
		rq.accept = refuse_other;
		rq.progress = progress;
		rq.arg = &pin;
		rq.in_place = &in_place;
		tfs_err e = tfs_http_fetch(&rq, &rs, &f, &d);
		free(url);
		if ((!e && other_version(r, &rs)) || (e && f == TFS_HTTP_REFUSED)) {
			log_changed(r);
			return TFS_ERR_IO;
		}
		if (!e)
			return TFS_OK;
		if (f == TFS_HTTP_STATUS && (rs.status == 403 || rs.status == 410) && r->relocate &&
		    !relocated) {
			char *nu = NULL;
			if (r->relocate(r->relocate_ctx, &nu, &d) == TFS_OK) {
				pthread_mutex_lock(&r->lock);
				free(r->url);
				r->url = nu;
				pthread_mutex_unlock(&r->lock);
				continue;
			}
		}
		if (f == TFS_HTTP_STATUS && rs.status == 412) {
			log_changed(r);
		} else if (f != TFS_HTTP_ABORTED) {
			tfs_log("%s: bytes %llu-%llu: %s", r->base.location, (unsigned long long)off,
				(unsigned long long)(off + len - 1), d.msg);
		}
		return TFS_ERR_IO;
	}
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
	return tfs_cfile_read(r->cache, buf, len, off, limit, &d);
}

static tfs_err remote_map(struct tfs_source *s, uint64_t off, size_t len, uint64_t limit, struct tfs_iov *iov,
			  unsigned max, unsigned *n, void **token)
{
	struct remote *r = (struct remote *)s;
	struct tfs_diag d;
	unsigned k = 0;
	*token = NULL;
	if (off > s->id.size || len > s->id.size - off || len >= (1u << 20) ||
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
	tfs_err e = len ? tfs_cfile_map(r->cache, off, len, limit, iov + k, &m, (struct tfs_cmap **)token, &d)
			: TFS_OK;
	*n = k + m;
	return e;
}

static int remote_memo_get(struct tfs_source *s, const char *key, char *val, size_t cap)
{
	return tfs_cfile_memo_get(((struct remote *)s)->cache, key, val, cap);
}

static void remote_memo_put(struct tfs_source *s, const char *key, const char *val)
{
	tfs_cfile_memo_put(((struct remote *)s)->cache, key, val);
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
	tfs_cfile_free(r->cache);
	free(r->url);
	free(r->auth);
	for (char **h = r->headers; h && *h; h++)
		free(*h);
	free(r->headers);
	free(r->aws_sigv4);
	free(r->userpwd);
	free(r->served_etag);
	free(r->probe);
	free(s->location);
	free(s->etag);
	free(s->revision);
	pthread_mutex_destroy(&r->lock);
	free(r);
}

static const struct tfs_source_ops remote_ops;

static void remote_then(struct tfs_source *s, struct tfs_source *next)
{
	if (next->ops == &remote_ops)
		tfs_cfile_chain(((struct remote *)s)->cache, ((struct remote *)next)->cache);
}

static const struct tfs_source_ops remote_ops = {
	.then = remote_then,
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
static struct remote *remote_new(const struct tfs_remote_spec *s, uint64_t want)
{
	struct remote *r = calloc(1, sizeof *r);
	int bad = 0;
	if (!r)
		return NULL;
	pthread_mutex_init(&r->lock, NULL);
	r->base.ops = &remote_ops;
	r->base.fd = -1;
	r->url = dup_or_null(s->url, &bad);
	r->base.location = dup_or_null(s->location, &bad);
	r->base.etag = dup_or_null(s->etag, &bad);
	r->base.revision = dup_or_null(s->revision, &bad);
	r->auth = dup_or_null(s->auth, &bad);
	r->aws_sigv4 = dup_or_null(s->aws_sigv4, &bad);
	r->userpwd = dup_or_null(s->userpwd, &bad);
	r->netrc = s->netrc;
	r->relocate = s->relocate;
	r->relocate_ctx = s->relocate_ctx;
	size_t nh = 0;
	while (s->headers && s->headers[nh])
		nh++;
	if (nh && (r->headers = calloc(nh + 1, sizeof *r->headers)))
		for (size_t i = 0; i < nh; i++)
			r->headers[i] = dup_or_null(s->headers[i], &bad);
	bad |= nh && !r->headers;
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

tfs_err tfs_remote_open(const struct tfs_remote_spec *s, struct tfs_source **out, struct tfs_diag *d)
{
	uint64_t want = s->has_size && s->size < TFS_REMOTE_PROBE ? s->size : TFS_REMOTE_PROBE;
	struct remote *r = remote_new(s, want);
	if (!r)
		return tfs_fail(d, TFS_ERR_NOMEM, "out of memory");

	/* The probe: the first bytes, and with them the size and version.
	 * The body goes to a growing buffer so that a server answering 200
	 * with a small whole file is seen as what it is. */
	struct tfs_http_req rq;
	struct tfs_http_resp rs;
	enum tfs_http_fail f;
	char *body = NULL;
	size_t blen = 0;
	fill_req(r, &rq, r->url);
	if (s->has_size && s->size == 0) {
		rq.head = 1; /* nothing to range over */
	} else {
		rq.has_range = 1;
		rq.range_clip = !s->has_size;
		rq.off = 0;
		rq.len = want;
		rq.body = &body;
		rq.bodylen = &blen;
		rq.body_max = want;
	}
	tfs_err e = tfs_http_fetch(&rq, &rs, &f, d);
	if (e && f == TFS_HTTP_STATUS && rs.status == 416 && rs.has_range == 2 && rs.range_total == 0) {
		e = TFS_OK; /* an empty file has no byte to ask for */
		rs.status = 206;
		rs.has_range = 1;
		rs.range_total = 0;
	}
	if (e) {
		free(body);
		remote_close(&r->base);
		return probe_failed(s, &rs, f, e, d);
	}
	uint64_t size;
	if (rq.head) {
		size = 0;
	} else if (rs.status == 206) {
		size = rs.range_total;
	} else {
		free(body);
		remote_close(&r->base);
		return tfs_fail(d, TFS_ERR_OPEN, "unexpected HTTP %ld to a range request", rs.status);
	}
	if (s->has_size && size != s->size) {
		free(body);
		remote_close(&r->base);
		return tfs_fail(d, TFS_ERR_OPEN, "the server says %llu bytes, its listing said %llu",
				(unsigned long long)size, (unsigned long long)s->size);
	}
	r->nprobe = blen;
	memcpy(r->probe, body, blen);
	free(body);
	if (blen != (size < want ? size : want)) {
		remote_close(&r->base);
		return tfs_fail(d, TFS_ERR_OPEN, "the first range came back short");
	}
	/* The version: the one given (Hub, S3), else the server's ETag;
	 * Last-Modified gives the files' times. */
	if ((*rs.etag && !(r->served_etag = strdup(rs.etag))) ||
	    (!r->base.etag && usable_etag(rs.etag) && !(r->base.etag = strdup(rs.etag)))) {
		remote_close(&r->base);
		return tfs_fail(d, TFS_ERR_NOMEM, "out of memory");
	}
	if (!r->base.etag)
		tfs_log("%s: warning: the server gives no strong ETag, so a change of the file during the mount cannot be detected",
			r->base.location);
	r->base.id.size = size;
	r->base.id.mtime_sec = r->base.id.ctime_sec = http_time(rs.last_modified);
	/* The cache key: where the bytes are and which version. */
	size_t kl = strlen(r->base.location) + (r->base.etag ? strlen(r->base.etag) : 0) + 2;
	char *key = malloc(kl);
	if (key)
		snprintf(key, kl, "%s\n%s", r->base.location, r->base.etag ? r->base.etag : "");
	r->cache = key ? tfs_cfile_new(key, size, fetch, r) : NULL;
	free(key);
	if (!r->cache) {
		remote_close(&r->base);
		return tfs_fail(d, TFS_ERR_NOMEM, "out of memory");
	}
	*out = &r->base;
	return TFS_OK;
}

void tfs_remote_start(void)
{
	tfs_cache_start(); /* once, however many drivers ask */
}

void tfs_remote_stop(void)
{
	tfs_http_abort();
}

void tfs_remote_counters(struct tfs_counters *c)
{
	uint64_t hits, misses, disk;
	tfs_cache_counters(&hits, &misses, &disk);
	c->requests += tfs_http_requests();
	c->bytes_fetched += tfs_http_bytes();
	c->retries += tfs_http_retried();
	c->cache_hits += hits;
	c->cache_misses += misses;
	c->disk_hits += disk;
}

int tfs_remote_warm(uint64_t *done, uint64_t *total)
{
	int on;
	tfs_cache_warm_status(done, total, &on);
	return on;
}
