/* http:// and https:// URLs of a checkpoint file or of an index; the
 * shards of an index are resolved relative to the index's URL, as a
 * browser resolves a relative link. HTTP has no directory listing, so a
 * URL must name a file. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/json.h"
#include "core/url.h"
#include "core/userfile.h"
#include "sources/remote.h"
#include "sources/rlayer.h"
#include "core/table.h"

struct http_store {
	struct tfs_store base;
	struct tfs_rlayer *layer; /* the mount's remote layer */
	char *dir;                /* the URL up to its last '/', credentials included */
	char *target;             /* the name SOURCE gave in it, used as written */
};

static int claims(const char *spec)
{
	return strncasecmp(spec, "http://", 7) == 0 || strncasecmp(spec, "https://", 8) == 0;
}

/* The credentials of a file over http(s) (struct tfs_remote_spec,
 * authorize): user:password@ in the URL (libcurl takes them from there),
 * else ~/.netrc, which keeps them off the command line, where every local
 * user can read them. */
static tfs_err authorize(void *ctx, const char *url, struct tfs_http_creds *c, struct tfs_diag *d)
{
	(void)ctx;
	(void)url;
	(void)d;
	c->netrc = 1;
	return TFS_OK;
}

static tfs_err store_open(struct tfs_store *st, const char *name, struct tfs_source **out, struct tfs_diag *d)
{
	struct http_store *hs = (struct http_store *)st;
	char *url = NULL, loc[TFS_HTTP_URL_MAX];
	size_t len = 0, cap = 0;
	tfs_err e = TFS_OK;
	if (tfs_json_puts(&url, &len, &cap, hs->dir))
		return tfs_fail(d, TFS_ERR_NOMEM, "out of memory");
	if (hs->target && strcmp(name, hs->target) == 0) {
		/* As the user wrote it (it may carry a query). */
		e = tfs_json_puts(&url, &len, &cap, name);
	} else {
		/* A name from an index: each path segment escaped. */
		for (const char *p = name; !e && *p;) {
			size_t seg = strcspn(p, "/");
			e = tfs_http_escape(p, seg, &url, &len, &cap);
			p += seg;
			if (!e && *p == '/') {
				e = tfs_json_put(&url, &len, &cap, "/", 1);
				p++;
			}
		}
	}
	if (e) {
		free(url);
		return tfs_fail(d, TFS_ERR_NOMEM, "out of memory");
	}
	if (len >= TFS_HTTP_URL_MAX) {
		free(url);
		return tfs_fail(d, TFS_ERR_OPEN, "the URL is too long");
	}
	tfs_url_redact(url, loc, sizeof loc);
	struct tfs_remote_spec s = {.url = url, .location = loc, .authorize = authorize};
	e = tfs_remote_open(hs->layer, &s, out, d);
	free(url);
	/* What SOURCE named (the file, the index) gives the store its
	 * identity: the times of the mount's directories and generated
	 * files. It is opened once, before the shards. */
	if (!e && hs->target && strcmp(name, hs->target) == 0)
		st->id = (*out)->id;
	return e;
}

static tfs_err store_list(struct tfs_store *st, const char *dir, struct tfs_dirlist *out, struct tfs_diag *d)
{
	(void)st;
	(void)dir;
	(void)out;
	return tfs_fail(d, TFS_ERR_OPEN,
			"HTTP has no directory listing: give the URL of a checkpoint file or of its index");
}

static void store_close(struct tfs_store *st)
{
	struct http_store *hs = (struct http_store *)st;
	free(hs->dir);
	free(hs->target);
	free(hs->base.prefix);
	free(hs->base.location);
	free(hs);
}

static const struct tfs_store_ops http_store_ops = {
	.open = store_open,
	.list = store_list,
	.close = store_close,
};

/* libcurl reads ~/.netrc at every request: a FIFO or a device there would
 * block or feed each one. Looked at once, as every file a user names. */
static tfs_err check_netrc(struct tfs_diag *d)
{
	const char *home = getenv("HOME");
	if (!home || !*home)
		return TFS_OK;
	char path[4200];
	snprintf(path, sizeof path, "%s/.netrc", home);
	int fd;
	struct stat st;
	struct tfs_diag nd;
	tfs_err e = tfs_file_open(NULL, path, 1u << 20, NULL, &fd, &st, &nd);
	if (e == TFS_OK)
		close(fd);
	if (e == TFS_ERR_NOTREG || e == TFS_ERR_INVAL)
		return tfs_fail(d, TFS_ERR_INVAL, "%s: %s", path, nd.msg);
	return TFS_OK; /* absent or unreadable: libcurl goes on without it */
}

static tfs_err resolve(const char *spec, const struct tfs_opts *o, struct tfs_sources *ss,
		       struct tfs_store **out, char **target, struct tfs_diag *d)
{
	struct tfs_rlayer *layer;
	(void)o;
	tfs_err e = tfs_sources_remote(ss, &layer, d);
	if (e || (e = check_netrc(d)))
		return e;
	size_t n = strlen(spec);
	if (n >= TFS_HTTP_URL_MAX)
		return tfs_fail(d, TFS_ERR_INVAL, "the URL is too long");
	for (size_t i = 0; i < n; i++)
		if ((unsigned char)spec[i] <= 0x20 || spec[i] == 0x7f)
			return tfs_fail(
				d, TFS_ERR_INVAL,
				"a URL cannot hold spaces or control characters (escape them as %%20...)");
	const char *host = strstr(spec, "://") + 3;
	size_t path_at = strcspn(host, "/?#");
	if (path_at == 0)
		return tfs_fail(d, TFS_ERR_INVAL, "the URL has no host");
	/* The directory: up to the last '/' of the path (before any query). */
	const char *q = host + path_at;
	const char *end = q + strcspn(q, "?#");
	const char *slash = NULL;
	for (const char *p = q; p < end; p++)
		if (*p == '/')
			slash = p;
	struct http_store *hs = calloc(1, sizeof *hs);
	if (!hs)
		return tfs_fail(d, TFS_ERR_NOMEM, "out of memory");
	hs->base.ops = &http_store_ops;
	hs->layer = layer;
	if (slash) {
		hs->dir = strndup(spec, (size_t)(slash - spec) + 1);
		*target = strdup(slash + 1);
	} else {
		/* http://host or http://host?x: the root of the host */
		size_t k = (size_t)(q - spec);
		hs->dir = malloc(k + 2);
		if (hs->dir)
			snprintf(hs->dir, k + 2, "%.*s/", (int)k, spec);
		*target = strdup(q);
	}
	char red[TFS_HTTP_URL_MAX];
	tfs_url_redact(hs->dir ? hs->dir : "", red, sizeof red);
	hs->base.prefix = strdup(red);
	tfs_url_redact(spec, red, sizeof red);
	hs->base.location = strdup(red);
	if (!hs->dir || !*target || !hs->base.prefix || !hs->base.location) {
		free(*target);
		*target = NULL;
		store_close(&hs->base);
		return tfs_fail(d, TFS_ERR_NOMEM, "out of memory");
	}
	if (!**target || **target == '?' || **target == '#') {
		free(*target);
		*target = NULL; /* a directory: listing it will say why not */
	} else if (!(hs->target = strdup(*target))) {
		free(*target);
		*target = NULL;
		store_close(&hs->base);
		return tfs_fail(d, TFS_ERR_NOMEM, "out of memory");
	}
	*out = &hs->base;
	return TFS_OK;
}

static const struct tfs_opt_spec http_env[] = {
	TFS_REMOTE_ENV,
	{NULL, 0, NULL, NULL, 0},
};

const struct tfs_source_driver tfs_source_http = {
	.name = "http",
	.schemes = "http://, https://",
	.usage = "http(s)://HOST/PATH",
	.claims = claims,
	.resolve = resolve,
	.remote = 1,
	.redact = tfs_url_redact,
	.hide = tfs_url_hide,
	.env = http_env,
};
