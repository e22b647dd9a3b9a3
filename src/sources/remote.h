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

struct tfs_remote_spec {
	const char *url;      /* where the bytes are */
	const char *location; /* user.source and messages: no credentials */
	/* The credentials (sources/httpc.h), asked before every request of
	 * the file (the probe, each range, the whole download), or NULL for
	 * none; auth_ctx outlives the file (the driver's store: a store
	 * outlives every file it opened). */
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

/* The file at s->url, read through the mount's remote layer l (its
 * cache, its HTTP client, its read-ahead). */
struct tfs_rlayer;
tfs_err tfs_remote_open(struct tfs_rlayer *l, const struct tfs_remote_spec *s, struct tfs_source **out,
			struct tfs_diag *d);

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

#endif
