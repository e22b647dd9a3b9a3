/* s3://BUCKET/KEY (a checkpoint file or an index) and s3://BUCKET/PREFIX/
 * (a directory of the bucket, listed with ListObjectsV2), on AWS or an
 * S3-compatible store. Requests are signed by libcurl (CURLOPT_AWS_SIGV4,
 * with the region and service spelled out, since a custom endpoint's host
 * says neither); libcurl 7.88 signs neither a payload hash it does not
 * send nor a query it does not sort, so the x-amz-content-sha256 header
 * (UNSIGNED-PAYLOAD) and a canonical query are made here. Reads are those
 * of every remote file: the ETag pinned at open, If-Match on each GET. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include <pthread.h>

#include "sources/aws.h"
#include "core/userfile.h"
#include "core/json.h"
#include "sources/remote.h"
#include "sources/rlayer.h"
#include "core/table.h"

#define LIST_PAGE_MAX (16u << 20)

struct s3_store {
	struct tfs_store base;
	struct tfs_rlayer *layer; /* the mount's remote layer */
	char *endpoint;           /* scheme://host[:port], no trailing '/' */
	int path_style;
	char bucket[64];
	char *root; /* "" or "prefix/" */
	/* The credentials (none with no_sign_request), read again before a
	 * request once their files have changed (keys rotated, a session
	 * token renewed by the AWS tools during a mount); never when they
	 * came from the environment, which cannot change. */
	pthread_mutex_t cred_lock;
	int sign;
	struct tfs_aws_creds cr;
	char *profile; /* -o aws_profile=, or NULL */
	char cred_files[2][4096];
	struct tfs_stamp stamp[2];
	int cred_said; /* changed files that could not be read: said once */
	/* The listed directory: its objects' names, sizes and ETags. */
	char *listed_dir;
	struct tfs_dirlist files;
	char **etags;
	size_t cetags;
};

/* ---- URLs ---- */

/* The bucket's URL, with a trailing '/'. */
static tfs_err bucket_url(const struct s3_store *st, char **u, size_t *len, size_t *cap)
{
	if (st->path_style)
		return tfs_json_puts(u, len, cap, st->endpoint) || tfs_json_put(u, len, cap, "/", 1) ||
				       tfs_json_puts(u, len, cap, st->bucket) ||
				       tfs_json_put(u, len, cap, "/", 1)
			       ? TFS_ERR_NOMEM
			       : TFS_OK;
	const char *host = strstr(st->endpoint, "://") + 3;
	return tfs_json_put(u, len, cap, st->endpoint, (size_t)(host - st->endpoint)) ||
			       tfs_json_puts(u, len, cap, st->bucket) || tfs_json_put(u, len, cap, ".", 1) ||
			       tfs_json_puts(u, len, cap, host) || tfs_json_put(u, len, cap, "/", 1)
		       ? TFS_ERR_NOMEM
		       : TFS_OK;
}

/* What S3's error codes mean, in one line. */
static tfs_err explain(long status, const char *code, struct tfs_diag *d)
{
	static const struct {
		const char *code, *what;
		tfs_err e;
	} known[] = {
		{"SignatureDoesNotMatch",
		 "the signature does not match (SignatureDoesNotMatch): is the secret key right?",
		 TFS_ERR_OPEN},
		{"InvalidAccessKeyId", "the access key is not known (InvalidAccessKeyId)", TFS_ERR_OPEN},
		{"ExpiredToken", "the session token has expired (ExpiredToken): get new credentials",
		 TFS_ERR_OPEN},
		{"InvalidToken", "the session token is not valid (InvalidToken)", TFS_ERR_OPEN},
		{"TokenRefreshRequired", "the session token must be refreshed (TokenRefreshRequired)",
		 TFS_ERR_OPEN},
		{"AccessDenied", "access denied (AccessDenied): the credentials may not read this",
		 TFS_ERR_OPEN},
		{"NoSuchBucket", "the bucket does not exist (NoSuchBucket)", TFS_ERR_NOENT},
		{"NoSuchKey", "not found (NoSuchKey)", TFS_ERR_NOENT},
		{"SlowDown", "the store asks to slow down (SlowDown), still after the retries", TFS_ERR_OPEN},
		{"PermanentRedirect", "the bucket is in another region (PermanentRedirect): set AWS_REGION",
		 TFS_ERR_OPEN},
		{"AuthorizationHeaderMalformed",
		 "the request's region is not the bucket's (AuthorizationHeaderMalformed): set AWS_REGION",
		 TFS_ERR_OPEN},
	};
	for (size_t i = 0; i < sizeof known / sizeof known[0]; i++)
		if (code && strcmp(code, known[i].code) == 0)
			return tfs_fail(d, known[i].e, "%s", known[i].what);
	if (status == 404)
		return tfs_fail(d, TFS_ERR_NOENT, "not found (HTTP 404)");
	if (status >= 300 && status <= 399)
		return tfs_fail(
			d, TFS_ERR_OPEN,
			"the endpoint answers with a redirect (HTTP %ld), which tensorfs does not follow: a credential must not reach another host, and S3 redirects only when the region or the endpoint is wrong (set AWS_REGION, or -o endpoint= to the bucket's own)",
			status);
	if (status == 403)
		return tfs_fail(d, TFS_ERR_OPEN, "access denied (HTTP 403%s%s)", code && *code ? ": " : "",
				code ? code : "");
	return tfs_fail(d, TFS_ERR_OPEN, "HTTP %ld%s%s", status, code && *code ? " " : "", code ? code : "");
}

/* S3's credentials (struct tfs_remote_spec, authorize): SigV4 signing by
 * libcurl with the keys, and the session token and payload hash headers;
 * none for a public bucket. Requests carrying them follow no redirect
 * (sources/httpc.h). */
/* The credentials' files changed since they were read (under
 * cred_lock): the keys in them now, or, when they cannot be used (a
 * mistake in them, the keys gone), those read before, said once. */
static void reread_creds(struct s3_store *st)
{
	struct tfs_stamp now[2];
	tfs_file_stamp(st->cred_files[0], &now[0]);
	tfs_file_stamp(st->cred_files[1], &now[1]);
	if (tfs_stamp_same(&now[0], &st->stamp[0]) && tfs_stamp_same(&now[1], &st->stamp[1]))
		return;
	st->stamp[0] = now[0];
	st->stamp[1] = now[1];
	struct tfs_aws_creds cr;
	struct tfs_diag d;
	if (tfs_aws_credentials_of(&cr, 1, st->profile, &d) == TFS_OK) {
		/* (The region stays: the endpoint was made for it.) */
		memcpy(cr.region, st->cr.region, sizeof cr.region);
		explicit_bzero(&st->cr, sizeof st->cr);
		st->cr = cr;
		st->cred_said = 0;
	} else if (!st->cred_said) {
		st->cred_said = 1;
		tfs_log("warning: the AWS credentials changed and cannot be used (%s): those read before are sent until they can",
			d.msg);
	}
	explicit_bzero(&cr, sizeof cr);
}

static tfs_err authorize(void *ctx, const char *url, struct tfs_http_creds *c, struct tfs_diag *d)
{
	struct s3_store *st = ctx;
	(void)url;
	(void)d;
	snprintf(c->header[0], sizeof c->header[0], "x-amz-content-sha256: UNSIGNED-PAYLOAD");
	if (!st->sign)
		return TFS_OK;
	pthread_mutex_lock(&st->cred_lock);
	if (!st->cr.from_env)
		reread_creds(st);
	snprintf(c->aws_sigv4, sizeof c->aws_sigv4, "aws:amz:%s:s3", st->cr.region);
	snprintf(c->userpwd, sizeof c->userpwd, "%s:%s", st->cr.key, st->cr.secret);
	if (*st->cr.token)
		snprintf(c->header[1], sizeof c->header[1], "x-amz-security-token: %s", st->cr.token);
	pthread_mutex_unlock(&st->cred_lock);
	return TFS_OK;
}

static void request(struct s3_store *st, struct tfs_http_req *rq, const char *url)
{
	memset(rq, 0, sizeof *rq);
	rq->url = url;
	rq->authorize = authorize;
	rq->auth_ctx = st;
}

/* ---- listing ---- */

struct collect {
	struct s3_store *st;
	const char *prefix;
	size_t plen;
	tfs_err bad;
	uint64_t seen; /* keys over all pages, this directory's or not */
};

static tfs_err on_object(void *ctx, const char *key, uint64_t size, const char *etag)
{
	struct collect *c = ctx;
	struct s3_store *st = c->st;
	c->seen++;
	if (strncmp(key, c->prefix, c->plen) != 0)
		return c->bad = TFS_ERR_FORMAT;
	const char *name = key + c->plen;
	/* Deeper keys (a store that ignores the delimiter) and the folder
	 * markers some tools write ("dir/") are not this directory's files. */
	if (!*name || strchr(name, '/'))
		return TFS_OK;
	size_t cap = st->cetags;
	if (tfs_dirlist_add(&st->files, name, size) ||
	    tfs_grow((void **)&st->etags, &cap, st->files.n, sizeof *st->etags) ||
	    !(st->etags[st->files.n - 1] = strdup(etag)))
		return TFS_ERR_NOMEM;
	st->cetags = cap;
	return TFS_OK;
}

static void forget_listing(struct s3_store *st)
{
	for (size_t i = 0; st->etags && i < st->files.n; i++)
		free(st->etags[i]);
	free(st->etags);
	st->etags = NULL;
	st->cetags = 0;
	tfs_dirlist_free(&st->files);
	free(st->listed_dir);
	st->listed_dir = NULL;
}

/* ListObjectsV2 of one directory, page after page. The query is written
 * canonically (names sorted, names and values escaped), as SigV4 signs it. */
static tfs_err list_dir(struct s3_store *st, const char *dir, struct tfs_diag *d)
{
	char prefix[2048], token[1024] = "";
	snprintf(prefix, sizeof prefix, "%s%s", st->root, dir);
	forget_listing(st);
	struct collect c = {.st = st, .prefix = prefix, .plen = strlen(prefix)};
	struct tfs_s3_list_cb cb = {.object = on_object, .ctx = &c};
	tfs_err e = TFS_OK;
	uint64_t bytes = 0;
	for (unsigned page = 0; !e; page++) {
		char *u = NULL, *body = NULL;
		size_t len = 0, cap = 0, blen = 0;
		if (page >= TFS_LISTING_PAGES_MAX) {
			e = tfs_fail(d, TFS_ERR_FORMAT, "the bucket listing goes on past %u pages",
				     TFS_LISTING_PAGES_MAX);
			break;
		}
		if (bucket_url(st, &u, &len, &cap) ||
		    (*token && (tfs_json_puts(&u, &len, &cap, "?continuation-token=") ||
				tfs_http_escape(token, strlen(token), &u, &len, &cap))) ||
		    tfs_json_puts(&u, &len, &cap,
				  *token ? "&delimiter=%2F&list-type=2&prefix="
					 : "?delimiter=%2F&list-type=2&prefix=") ||
		    tfs_http_escape(prefix, strlen(prefix), &u, &len, &cap)) {
			free(u);
			return tfs_fail(d, TFS_ERR_NOMEM, "out of memory");
		}
		struct tfs_http_req rq;
		struct tfs_http_resp rs;
		enum tfs_http_fail f;
		request(st, &rq, u);
		rq.body = &body;
		rq.bodylen = &blen;
		rq.body_max = LIST_PAGE_MAX;
		e = tfs_http_fetch(st->layer->http, &rq, &rs, &f, d);
		free(u);
		if (e && f == TFS_HTTP_STATUS)
			e = explain(rs.status, rs.error_code, d);
		else if (!e && rs.status != 200)
			e = explain(rs.status, rs.error_code, d); /* a redirect, not followed */
		int truncated = 0;
		if (!e) {
			c.bad = TFS_OK;
			struct tfs_diag pd;
			pd.msg[0] = 0;
			e = tfs_s3_parse_list(body ? body : "", blen, &cb, &truncated, token, sizeof token,
					      &pd);
			if (c.bad)
				e = tfs_fail(d, TFS_ERR_FORMAT,
					     "the bucket listing holds a key outside the prefix '%s'",
					     prefix);
			else if (e)
				tfs_fail(d, e, "%s", *pd.msg ? pd.msg : "out of memory");
		}
		free(body);
		bytes += blen;
		if (!e && truncated && (c.seen > TFS_LISTING_ENTRIES_MAX || bytes > TFS_LISTING_BYTES_MAX))
			e = tfs_fail(
				d, TFS_ERR_FORMAT, "the bucket listing goes on past %s (%u pages so far)",
				c.seen > TFS_LISTING_ENTRIES_MAX ? "1,000,000 keys" : "512 MiB", page + 1);
		if (!e && !truncated)
			break;
	}
	if (!e && !(st->listed_dir = strdup(dir)))
		e = tfs_fail(d, TFS_ERR_NOMEM, "out of memory");
	if (e)
		forget_listing(st);
	return e;
}

/* ---- the store ---- */

static tfs_err store_open(struct tfs_store *base, const char *name, struct tfs_source **out,
			  struct tfs_diag *d)
{
	struct s3_store *st = (struct s3_store *)base;
	char *u = NULL, *key = NULL, *loc = NULL;
	size_t len = 0, cap = 0, kl = strlen(st->root) + strlen(name) + 1;
	key = malloc(kl);
	loc = malloc(kl + strlen(st->bucket) + 8);
	if (!key || !loc || bucket_url(st, &u, &len, &cap)) {
		free(key), free(loc), free(u);
		return tfs_fail(d, TFS_ERR_NOMEM, "out of memory");
	}
	snprintf(key, kl, "%s%s", st->root, name);
	sprintf(loc, "s3://%s/%s", st->bucket, key);
	tfs_err e = tfs_http_escape_path(key, &u, &len, &cap) ? tfs_fail(d, TFS_ERR_NOMEM, "out of memory")
							      : TFS_OK;
	/* What the listing said (when this file's directory was listed):
	 * its ETag is then pinned from the first request on. */
	struct tfs_remote_spec s = {
		.url = u,
		.location = loc,
		.authorize = authorize,
		.auth_ctx = st,
		.explain = explain,
	};
	const char *slash = strrchr(name, '/');
	size_t dl = slash ? (size_t)(slash - name) + 1 : 0;
	if (st->listed_dir && strlen(st->listed_dir) == dl && strncmp(st->listed_dir, name, dl) == 0)
		for (size_t i = 0; i < st->files.n; i++)
			if (strcmp(st->files.name[i], name + dl) == 0) {
				s.has_size = 1;
				s.size = st->files.size[i];
				s.etag = *st->etags[i] ? st->etags[i] : NULL;
			}
	if (!e)
		e = tfs_remote_open(st->layer, &s, out, d);
	free(u);
	free(key);
	free(loc);
	return e;
}

static tfs_err store_list(struct tfs_store *base, const char *dir, struct tfs_dirlist *out,
			  struct tfs_diag *d)
{
	struct s3_store *st = (struct s3_store *)base;
	tfs_err e = list_dir(st, dir, d);
	for (size_t i = 0; !e && i < st->files.n; i++)
		if (tfs_dirlist_add(out, st->files.name[i], st->files.size[i]))
			e = tfs_fail(d, TFS_ERR_NOMEM, "out of memory");
	return e;
}

static void store_close(struct tfs_store *base)
{
	struct s3_store *st = (struct s3_store *)base;
	forget_listing(st);
	free(st->endpoint);
	free(st->root);
	explicit_bzero(&st->cr, sizeof st->cr); /* a secret: not left in freed memory */
	free(st->profile);
	pthread_mutex_destroy(&st->cred_lock);
	free(st->base.prefix);
	free(st->base.location);
	free(st);
}

static const struct tfs_store_ops s3_store_ops = {
	.open = store_open,
	.list = store_list,
	.close = store_close,
};

/* ---- the driver ---- */

static int claims(const char *spec)
{
	return strncmp(spec, "s3://", 5) == 0;
}

static int bucket_ok(const char *b, size_t n)
{
	if (n < 3 || n > 63)
		return 0;
	for (size_t i = 0; i < n; i++)
		if (!((b[i] >= 'a' && b[i] <= 'z') || (b[i] >= '0' && b[i] <= '9') || b[i] == '.' ||
		      b[i] == '-'))
			return 0;
	return b[0] != '.' && b[0] != '-';
}

/* The endpoint: -o endpoint=, AWS_ENDPOINT_URL, else AWS's own for the
 * region (virtual-hosted). A custom one is path-style. NULL st->endpoint:
 * no memory (said by the caller). */
static tfs_err set_endpoint(struct s3_store *st, const struct tfs_opts *o, const char *region,
			    struct tfs_diag *d)
{
	const char *ep = tfs_opts_get(o, "endpoint");
	if (!ep || !*ep)
		ep = getenv("AWS_ENDPOINT_URL");
	char aws[128];
	if (ep && *ep) {
		if (strncasecmp(ep, "http://", 7) != 0 && strncasecmp(ep, "https://", 8) != 0)
			return tfs_fail(d, TFS_ERR_INVAL, "the S3 endpoint must be an http(s) URL");
		st->path_style = 1;
	} else {
		snprintf(aws, sizeof aws, "https://s3.%s.amazonaws.com", region);
		ep = aws;
		st->path_style = tfs_opts_get(o, "path_style") != NULL || strchr(st->bucket, '.') != NULL;
	}
	st->endpoint = strdup(ep);
	if (st->endpoint) {
		char *q = strchr(strstr(st->endpoint, "://") + 3, '/');
		if (q)
			*q = 0; /* the host only */
	}
	return TFS_OK;
}

/* What authorize() puts on every request: SigV4 by libcurl with the
 * keys, the payload hash and the session token. The keys are wiped from
 * cr once copied. */
/* Signed requests with these credentials from now on, and their files
 * watched (sources/aws.h). */
static tfs_err sign_with(struct s3_store *st, struct tfs_aws_creds *cr, const char *profile,
			 struct tfs_diag *d)
{
	if (strlen(cr->key) + strlen(cr->secret) + 2 > sizeof((struct tfs_http_creds *)0)->userpwd)
		return tfs_fail(d, TFS_ERR_INVAL, "the AWS keys are longer than tensorfs takes");
	if (profile && *profile && !(st->profile = strdup(profile)))
		return tfs_fail(d, TFS_ERR_NOMEM, "out of memory");
	st->sign = 1;
	st->cr = *cr;
	tfs_aws_files(st->cred_files[0], st->cred_files[1], sizeof st->cred_files[0]);
	tfs_file_stamp(st->cred_files[0], &st->stamp[0]);
	tfs_file_stamp(st->cred_files[1], &st->stamp[1]);
	return TFS_OK;
}

static tfs_err resolve(const char *spec, const struct tfs_opts *o, struct tfs_sources *ss,
		       struct tfs_store **out, char **target, struct tfs_diag *d)
{
	struct tfs_rlayer *layer;
	tfs_err e = tfs_sources_remote(ss, &layer, d);
	if (e)
		return e;
	*target = NULL;
	const char *b = spec + 5, *slash = strchr(b, '/');
	size_t bl = slash ? (size_t)(slash - b) : strlen(b);
	if (!bucket_ok(b, bl))
		return tfs_fail(
			d, TFS_ERR_INVAL,
			"expected s3://BUCKET/KEY or s3://BUCKET/PREFIX/ (a bucket name is 3 to 63 of a-z, 0-9, '.', '-')");
	const char *key = slash ? slash + 1 : "";
	for (const char *p = key; *p; p++)
		if ((unsigned char)*p < 0x20 || *p == 0x7f)
			return tfs_fail(d, TFS_ERR_INVAL, "a key cannot hold control characters");
	if (strlen(key) > 1024)
		return tfs_fail(d, TFS_ERR_INVAL, "a key is at most 1024 bytes");

	struct s3_store *st = calloc(1, sizeof *st);
	if (!st)
		return tfs_fail(d, TFS_ERR_NOMEM, "out of memory");
	st->base.ops = &s3_store_ops;
	st->layer = layer;
	pthread_mutex_init(&st->cred_lock, NULL);
	memcpy(st->bucket, b, bl);
	struct tfs_aws_creds cr;
	int nosign = tfs_opts_get(o, "no_sign_request") != NULL;
	if ((e = tfs_aws_credentials_of(&cr, !nosign, tfs_opts_get(o, "aws_profile"), d)))
		goto fail;
	if ((e = set_endpoint(st, o, cr.region, d)))
		goto fail;
	if (!nosign && (e = sign_with(st, &cr, tfs_opts_get(o, "aws_profile"), d)))
		goto fail;
	explicit_bzero(&cr, sizeof cr);
	/* A key: its directory and its name. A prefix (ending in '/', or the
	 * bucket itself): a directory. */
	size_t kl = strlen(key);
	if (kl == 0 || key[kl - 1] == '/') {
		st->root = strdup(key);
	} else {
		const char *ks = strrchr(key, '/');
		st->root = strndup(key, ks ? (size_t)(ks - key) + 1 : 0);
		*target = strdup(ks ? ks + 1 : key);
		if (!*target) {
			e = tfs_fail(d, TFS_ERR_NOMEM, "out of memory");
			goto fail;
		}
	}
	char pre[1200];
	snprintf(pre, sizeof pre, "s3://%s/%s", st->bucket, st->root ? st->root : "");
	st->base.prefix = strdup(pre);
	st->base.location = strdup(spec);
	if (!st->endpoint || !st->root || !st->base.prefix || !st->base.location) {
		e = tfs_fail(d, TFS_ERR_NOMEM, "out of memory");
		goto fail;
	}
	*out = &st->base;
	return TFS_OK;
fail:
	memset(&cr, 0, sizeof cr);
	free(*target);
	*target = NULL;
	store_close(&st->base);
	return e;
}

static const struct tfs_opt_spec s3_opts[] = {
	{"endpoint", 1, "s3: an S3-compatible store's URL (or AWS_ENDPOINT_URL)", "URL", TFS_OPT_URL},
	{"path_style", 0, "s3: BUCKET in the path, not the host name", NULL, 0},
	{"no_sign_request", 0, "s3: no credentials, for a public bucket", NULL, 0},
	{"aws_profile", 1, "s3: the profile in ~/.aws/credentials and config (or AWS_PROFILE)", "NAME", 0},
	{NULL, 0, NULL, NULL, 0},
};

static const struct tfs_opt_spec s3_env[] = {
	TFS_REMOTE_ENV,
	{"AWS_ENDPOINT_URL", 1, NULL, NULL, TFS_OPT_URL},
	{"AWS_SHARED_CREDENTIALS_FILE", 1, NULL, NULL, TFS_OPT_PATH},
	{"AWS_CONFIG_FILE", 1, NULL, NULL, TFS_OPT_PATH},
	{NULL, 0, NULL, NULL, 0},
};

const struct tfs_source_driver tfs_source_s3 = {
	.name = "s3",
	.schemes = "s3://",
	.usage = "s3://BUCKET/KEY",
	.env_help = "AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY, AWS_SESSION_TOKEN, AWS_PROFILE, "
		    "AWS_SHARED_CREDENTIALS_FILE, AWS_CONFIG_FILE, AWS_REGION, AWS_DEFAULT_REGION, "
		    "AWS_ENDPOINT_URL",
	.claims = claims,
	.resolve = resolve,
	.opts = s3_opts,
	.env = s3_env,
	.remote = 1,
};
