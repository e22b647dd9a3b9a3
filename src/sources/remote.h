/* A file behind HTTP(S): what the http, Hub and S3 drivers open. One
 * request at open (the first PROBE bytes, which also give the size and
 * the version to pin); afterwards every read goes through the block cache,
 * each range checked (206 and the exact Content-Range) and sent with
 * If-Match, so that bytes of another version are never served. */
#ifndef TFS_REMOTE_H
#define TFS_REMOTE_H

#include "sources/httpc.h"
#include "core/source.h"

/* The first request asks for this much: nearly every real safetensors
 * header fits (Hugging Face's tools read the same prefix first). */
#define TFS_REMOTE_PROBE 100000u

/* A directory listing (the Hub's tree, S3's ListObjectsV2) over all its
 * pages: a server whose listing never ends is stopped here, in seconds and
 * with memory bounded, with one line. */
#define TFS_LISTING_ENTRIES_MAX 1000000u
#define TFS_LISTING_BYTES_MAX (512ull << 20)
#define TFS_LISTING_PAGES_MAX 10000u

/* Puts a driver's credentials on a request about to be sent to rq->url
 * (its auth, headers, aws_sigv4 and userpwd, netrc: struct tfs_http_req):
 * a bearer token for the Hub's own host only, S3's SigV4 signing, ~/.netrc.
 * A remote file calls it before each of its requests (the probe, every
 * range, the check of a cut answer), so a source whose credentials expire
 * (an OAuth token, rotating keys) renews them here, in its own file, and
 * nothing else changes. What it points the request at stays valid until
 * the file is closed. A failure fails that request, with d's line. */
typedef tfs_err (*tfs_authorize_fn)(void *ctx, struct tfs_http_req *rq, struct tfs_diag *d);

struct tfs_remote_spec {
	const char *url;      /* where the bytes are */
	const char *location; /* user.source and messages: no credentials */
	/* The credentials, or NULL for none; auth_ctx outlives the file (the
	 * driver's store: a store outlives every file it opened). */
	tfs_authorize_fn authorize;
	void *auth_ctx;
	const char *etag;     /* the version, when known (Hub, S3 listing) */
	const char *revision; /* user.revision */
	int has_size;
	uint64_t size; /* the size, when known */
	/* Called when the data URL stops working (403/410: a signed CDN URL
	 * that expired) to get a fresh one; NULL if the URL cannot expire. */
	tfs_err (*relocate)(void *ctx, char **url, struct tfs_diag *d);
	void *relocate_ctx;
	/* Says what an HTTP error at open means for this kind of server (S3's
	 * error codes), into d; NULL for the generic words. */
	tfs_err (*explain)(long status, const char *code, struct tfs_diag *d);
};

tfs_err tfs_remote_open(const struct tfs_remote_spec *s, struct tfs_source **out, struct tfs_diag *d);

/* The HTTP layer's policy and the cache, from the drivers' options
 * (retries=, timeout=, cache_size=, cache_dir=, cache_max=). */
tfs_err tfs_remote_configure(const struct tfs_opts *o, struct tfs_diag *d);

/* The block cache of every remote file of the process, once a configure
 * made it (NULL before). */
struct tfs_cache *tfs_remote_cache(void);

/* The options every remote driver takes. */
extern const struct tfs_opt_spec tfs_remote_opts[];

/* The environment every remote driver's transfers read (libcurl's proxy
 * variables, HOME for ~/.netrc), for the start of each driver's env
 * table (struct tfs_source_driver). */
#define TFS_REMOTE_ENV                                                                                       \
	{"http_proxy", 1, NULL, NULL, TFS_OPT_URL}, {"https_proxy", 1, NULL, NULL, TFS_OPT_URL},             \
		{"HTTPS_PROXY", 1, NULL, NULL, TFS_OPT_URL}, {"all_proxy", 1, NULL, NULL, TFS_OPT_URL},      \
		{"ALL_PROXY", 1, NULL, NULL, TFS_OPT_URL},                                                   \
	{                                                                                                    \
		"HOME", 1, NULL, NULL, TFS_OPT_PATH                                                          \
	}

/* The remote drivers' lifecycle hooks (struct tfs_source_driver): the
 * block cache and the HTTP client are the process's, shared by them all. */
void tfs_remote_start(void);
void tfs_remote_stop(void);
int tfs_remote_warm(uint64_t *done, uint64_t *total);
/* The remote drivers' counters (one HTTP client and cache for all). */
void tfs_remote_counters(struct tfs_counters *c);
/* Their notice: the files downloaded whole, as their server ignores Range
 * requests. */
int tfs_remote_notice(char *buf, size_t cap);

#endif
