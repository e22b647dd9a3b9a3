/* The remote layer of one mount (sources/rlayer.h): the remote drivers'
 * shared options, and what they make for the mount: the HTTP client with
 * its policy (retries, timeouts, the proxy), the block cache every remote
 * file reads through (over the disk cache), the read-ahead across files.
 * sources/remote.c reads through it; nothing here knows a remote file. */
#include "sources/rlayer.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#include "core/url.h"
#include "sources/bstore.h"
#include "sources/cache.h"
#include "sources/httpc.h"
#include "sources/readahead.h"
#include "sources/xorbcache.h"

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
	{"proxy", 1, "remote sources: every request through this HTTP proxy (else http_proxy, https_proxy)",
	 "URL", TFS_OPT_URL},
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

/* An http:// or https:// URL with a host (after any user:password@). */
static int proxy_url_ok(const char *url)
{
	const char *host = strncasecmp(url, "http://", 7) == 0    ? url + 7
			   : strncasecmp(url, "https://", 8) == 0 ? url + 8
								  : NULL;
	if (!host)
		return 0;
	const char *end = host + strcspn(host, "/?#");
	for (const char *p = host; p < end; p++)
		if (*p == '@')
			host = p + 1;
	return host < end;
}

/* -o proxy=URL: an HTTP forward proxy, or "" for none. Its password is
 * shown nowhere: it is a TFS_OPT_URL, which the command line masks in
 * argv and leaves out of every message (core/url.h). */
static tfs_err set_proxy(struct tfs_rlayer *l, const char *url, struct tfs_http_policy *p, struct tfs_diag *d)
{
	char red[TFS_HTTP_URL_MAX];
	/* (Only an http(s) URL is redacted as SOURCE is: of anything else,
	 * no more than its scheme is shown.) */
	if (*url && (strlen(url) >= TFS_HTTP_URL_MAX || !proxy_url_ok(url)))
		return tfs_fail(
			d, TFS_ERR_INVAL,
			"-o proxy= takes an HTTP proxy's URL (http://HOST:PORT or https://HOST:PORT), not %s%.*s",
			strstr(url, "://") ? "a " : "that value",
			strstr(url, "://") ? (int)(strstr(url, "://") - url + 3) : 0, url);
	tfs_url_redact(url, red, sizeof red);
	for (const char *c = url; *c; c++)
		if ((unsigned char)*c <= 0x20 || *c == 0x7f)
			return tfs_fail(d, TFS_ERR_INVAL,
					"-o proxy= cannot hold spaces or control characters");
	if (!(l->proxy = strdup(url)) || !(l->proxy_shown = strdup(red)))
		return tfs_fail(d, TFS_ERR_NOMEM, "out of memory");
	p->proxy = l->proxy;
	p->proxy_shown = l->proxy_shown;
	return TFS_OK;
}

/* The HTTP client's policy from -o retries=, timeout=, proxy=. */
static tfs_err configure_http(struct tfs_rlayer *l, const struct tfs_opts *o, struct tfs_diag *d)
{
	struct tfs_http_policy p;
	tfs_http_get_policy(l->http, &p);
	const char *r = tfs_opts_get(o, "retries"), *t = tfs_opts_get(o, "timeout");
	if (r && parse_uint(r, 20, &p.retries))
		return tfs_fail(d, TFS_ERR_INVAL, "-o retries= takes a number from 0 to 20, not '%s'", r);
	if (t && (parse_uint(t, 3600, &p.stall_seconds) || p.stall_seconds == 0))
		return tfs_fail(d, TFS_ERR_INVAL, "-o timeout= takes seconds from 1 to 3600, not '%s'", t);
	if (t)
		p.connect_seconds = p.stall_seconds < 10 ? p.stall_seconds : 10;
	const char *px = tfs_opts_get(o, "proxy");
	if (px) {
		tfs_err e = set_proxy(l, px, &p, d);
		if (e)
			return e;
	}
	tfs_http_set_policy(l->http, &p);
	return TFS_OK;
}

static uint64_t retried(void *ctx)
{
	return tfs_http_retried(ctx);
}

/* The block cache, over the disk cache when -o cache_dir= names one, and
 * the read-ahead across files, shaped to the cache's window and part. */
static tfs_err configure_cache(struct tfs_rlayer *l, const struct tfs_opts *o, struct tfs_diag *d)
{
	struct tfs_cache_cfg cfg;
	struct tfs_bstore *disk = NULL;
	tfs_err e = tfs_cache_parse(o, &cfg, d);
	cfg.retried = retried;
	cfg.retried_ctx = l->http;
	if (!e && cfg.dir)
		e = tfs_disk_store_open(cfg.dir, cfg.disk_bytes, &disk, d);
	if (!e && (e = tfs_cache_new(&cfg, disk, &l->cache, d)) && disk)
		disk->ops->free(disk);
	/* (After the block cache's store, which makes and checks the
	 * directory both live in.) */
	if (!e && cfg.dir)
		e = tfs_xorbcache_open(cfg.dir, cfg.disk_bytes, &l->xcache, d);
	if (e)
		return e;
	uint64_t window, part;
	tfs_cache_shape(l->cache, &window, &part);
	if (!(l->ra = tfs_ra_new(window, part)))
		return tfs_fail(d, TFS_ERR_NOMEM, "out of memory");
	return TFS_OK;
}

tfs_err tfs_sources_remote(struct tfs_sources *ss, struct tfs_rlayer **out, struct tfs_diag *d)
{
	tfs_err e = TFS_OK;
	pthread_mutex_lock(&ss->lock);
	if (!ss->remote) {
		struct tfs_rlayer *l = calloc(1, sizeof *l);
		if (!l || tfs_http_new(&l->http))
			e = tfs_fail(d, TFS_ERR_NOMEM, "out of memory");
		if (!e)
			e = configure_http(l, ss->opts, d);
		if (!e)
			e = configure_cache(l, ss->opts, d);
		if (e)
			tfs_rlayer_free(l);
		else
			ss->remote = l;
	}
	*out = ss->remote;
	pthread_mutex_unlock(&ss->lock);
	return e;
}

void tfs_rlayer_free(struct tfs_rlayer *l)
{
	if (!l)
		return;
	/* The workers first: they fetch through the client. */
	if (l->http)
		tfs_http_abort(l->http);
	tfs_cache_free(l->cache);
	tfs_xorbcache_free(l->xcache);
	tfs_ra_free(l->ra);
	tfs_http_free(l->http);
	free(l->proxy);
	free(l->proxy_shown);
	free(l);
}

void tfs_rlayer_start(struct tfs_rlayer *l)
{
	tfs_cache_start(l->cache);
}

void tfs_rlayer_stop(struct tfs_rlayer *l)
{
	tfs_http_abort(l->http);
	tfs_cache_stop(l->cache);
}

void tfs_rlayer_counters(struct tfs_rlayer *l, struct tfs_counters *c)
{
	uint64_t hits = 0, misses = 0, disk = 0;
	tfs_cache_counters(l->cache, &hits, &misses, &disk);
	c->requests += tfs_http_requests(l->http);
	c->bytes_fetched += tfs_http_bytes(l->http);
	c->retries += tfs_http_retried(l->http);
	c->cache_hits += hits;
	c->cache_misses += misses;
	c->disk_hits += disk;
	c->xet_files += __atomic_load_n(&l->xet.xet_files, __ATOMIC_RELAXED);
	c->lfs_files += __atomic_load_n(&l->xet.lfs_files, __ATOMIC_RELAXED);
	c->cas_requests += __atomic_load_n(&l->xet.cas_requests, __ATOMIC_RELAXED);
	c->xorb_bytes += __atomic_load_n(&l->xet.xorb_bytes, __ATOMIC_RELAXED);
	c->chunk_cached += __atomic_load_n(&l->xet.chunk_cached, __ATOMIC_RELAXED);
	c->chunk_fetched += __atomic_load_n(&l->xet.chunk_fetched, __ATOMIC_RELAXED);
}

int tfs_rlayer_warm(struct tfs_rlayer *l, uint64_t *done, uint64_t *total)
{
	int on = 0;
	tfs_cache_warm_status(l->cache, done, total, &on);
	return on;
}

int tfs_rlayer_notice(struct tfs_rlayer *l, char *buf, size_t cap)
{
	uint64_t mem = 0, disk = 0;
	unsigned nmem = 0, ndisk = 0;
	tfs_cwhole_totals(l->cache, &nmem, &mem, &ndisk, &disk);
	if (!nmem && !ndisk)
		return 0;
	char where[160];
	if (!ndisk)
		snprintf(where, sizeof where, "in memory (-o cache_size)");
	else if (!nmem)
		snprintf(where, sizeof where, "in -o cache_dir (as -o cache_size cannot hold them)");
	else
		snprintf(where, sizeof where, "%u in memory (-o cache_size), %u in -o cache_dir", nmem,
			 ndisk);
	snprintf(
		buf, cap,
		"the server ignores Range requests (it answers 200 with the whole file, as python3 -m http.server does): "
		"%u file%s (%llu MiB) %s downloaded whole, once, when first read, and kept %s",
		nmem + ndisk, nmem + ndisk == 1 ? "" : "s",
		(unsigned long long)((mem + disk + (1u << 20) - 1) >> 20), nmem + ndisk == 1 ? "is" : "are",
		where);
	return 1;
}

/* The tensors of the model, for the read-ahead across files: of every
 * source, local ones too (a remote file asks about its own reads only;
 * a local shard is never asked about). Its names are the model's, kept
 * until the next call; a failure leaves no prediction, the file
 * read-ahead alone. */
uint64_t tfs_rlayer_follow(struct tfs_rlayer *l, struct tfs_source *s, uint64_t off, uint64_t len,
			   uint64_t limit)
{
	struct tfs_ra_range next[8];
	struct timespec ts;
	uint64_t fence;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	unsigned n = tfs_ra_read(l->ra, s, off, len, limit, (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec,
				 next, 8, &fence);
	for (unsigned i = 0; i < n; i++) {
		struct tfs_source *f = (struct tfs_source *)next[i].file;
		if (f->ops->prefetch)
			f->ops->prefetch(f, next[i].off, next[i].len);
	}
	return fence;
}

void tfs_rlayer_objects(struct tfs_rlayer *l, const struct tfs_object *objs, size_t n)
{
	tfs_ra_reset(l->ra);
	tfs_err e = TFS_OK;
	for (size_t i = 0; !e && i < n; i++)
		e = tfs_ra_add(l->ra, objs[i].src, objs[i].begin, objs[i].end, objs[i].name);
	if (n && (e || tfs_ra_seal(l->ra)))
		tfs_ra_reset(l->ra);
}
