/* The response headers of an HTTP transfer, parsed a line at a time
 * (sources/httphdr.c): hostile input, taken into fixed fields with every
 * length and number checked. The HTTP client (sources/httpc.c) feeds it;
 * it knows nothing of the client. */
#ifndef TFS_HTTPHDR_H
#define TFS_HTTPHDR_H

#include <stddef.h>
#include <stdint.h>

#define TFS_HTTP_URL_MAX 8192
/* The longest ETag (and X-Linked-Etag) taken: a longer one is refused
 * with a line naming the header, never cut (a cut ETag would be pinned
 * and sent in If-Match, and every read would then fail). */
#define TFS_HTTP_ETAG_MAX 1024

struct tfs_http_resp {
	long status;
	int has_range; /* Content-Range: bytes a-b/total (or * /total) */
	uint64_t range_start, range_end, range_total;
	int has_length;
	uint64_t length; /* Content-Length */
	char etag[TFS_HTTP_ETAG_MAX + 1];
	char last_modified[128];
	char location[TFS_HTTP_URL_MAX];
	char next_link[TFS_HTTP_URL_MAX];        /* Link: <...>; rel="next" */
	char repo_commit[64];                    /* X-Repo-Commit */
	char linked_etag[TFS_HTTP_ETAG_MAX + 1]; /* X-Linked-Etag */
	char xet_hash[72];                       /* X-Xet-Hash: the file's Xet hash */
	int has_linked_size;
	uint64_t linked_size; /* X-Linked-Size */
	double retry_after;   /* seconds, or -1 */
	char error_code[64];  /* S3's <Code> of an error body, if read */
	/* Content-Encoding's first coding other than identity ("gzip"), or
	 * "": the body is then not the file's bytes (libcurl, asked for no
	 * encoding, passes it on as it came). For messages: only a token's
	 * characters are kept, any other is a '?', cut at 31. */
	char encoding[32];
	/* The first header whose value did not fit its field above ("ETag",
	 * "Location", ...), or NULL: such an answer is refused, not cut. */
	const char *overlong;
	unsigned overlong_max; /* its field's limit */
};

/* Takes one response header line (not NUL-terminated) into rs; returns 1
 * for a status line, which starts a new response. (Exposed for the
 * fuzzer: every header a server sends comes through here.) */
int tfs_http_header_line(struct tfs_http_resp *rs, const char *p, size_t n);
/* rs as before any response. */
void tfs_http_resp_reset(struct tfs_http_resp *rs);

#endif
