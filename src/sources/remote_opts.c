/* The remote drivers' shared options (sources/remote.h) and what they
 * configure for the whole process: the HTTP layer's policy (retries,
 * timeouts, the proxy) and the one block cache every remote file reads
 * through. remote.c reads through it; nothing here knows a remote file. */
#include "sources/remote.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "core/url.h"
#include "sources/bstore.h"
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
static tfs_err set_proxy(const char *url, struct tfs_http_policy *p, struct tfs_diag *d)
{
	static char *proxy, *shown;
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
	if (!proxy || strcmp(proxy, url) != 0) {
		char *np = strdup(url), *ns = strdup(red);
		if (!np || !ns) {
			free(np);
			free(ns);
			return tfs_fail(d, TFS_ERR_NOMEM, "out of memory");
		}
		free(proxy);
		free(shown);
		proxy = np;
		shown = ns;
	}
	p->proxy = proxy;
	p->proxy_shown = shown;
	return TFS_OK;
}

/* The block cache of every remote file of the process: the drivers, and
 * the two checkpoints of a diff, share one budget and one set of
 * workers. Made by the first configure that succeeds; it never goes. */
static pthread_mutex_t cache_lock = PTHREAD_MUTEX_INITIALIZER;
static struct tfs_cache *cache;

static tfs_err cache_configure(const struct tfs_opts *o, struct tfs_diag *d)
{
	struct tfs_cache_cfg cfg;
	tfs_err e = tfs_cache_parse(o, &cfg, d);
	if (e)
		return e;
	pthread_mutex_lock(&cache_lock);
	if (!cache) {
		struct tfs_bstore *disk = NULL;
		if (cfg.dir)
			e = tfs_disk_store_open(cfg.dir, cfg.disk_bytes, &disk, d);
		if (!e && (e = tfs_cache_new(&cfg, disk, &cache, d)) && disk)
			disk->ops->free(disk);
	}
	pthread_mutex_unlock(&cache_lock);
	return e;
}

struct tfs_cache *tfs_remote_cache(void)
{
	pthread_mutex_lock(&cache_lock);
	struct tfs_cache *c = cache;
	pthread_mutex_unlock(&cache_lock);
	return c;
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
	const char *px = tfs_opts_get(o, "proxy");
	if (px) {
		tfs_err e = set_proxy(px, &p, d);
		if (e)
			return e;
	}
	tfs_http_set_policy(&p);
	return cache_configure(o, d);
}
