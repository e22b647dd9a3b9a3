/* HTTP requests for the remote sources, with libcurl.
 *
 * A client (struct tfs_http) is what the requests of one mount share: its
 * policy (retries, timeouts, the proxy), its counters, a pool of easy
 * handles (each keeping its connections, lent to one request at a time),
 * DNS and TLS sessions shared under locks, and its abort. Every request
 * is bounded: a connect timeout, a stall timeout (a low-speed limit, not
 * one fixed timeout, since a large range may take long), a limit on
 * redirects, on header and body sizes; and any transfer stops within
 * about a second once tfs_http_abort() is called (unmount). */
#ifndef TFS_HTTP_H
#define TFS_HTTP_H

#include <stddef.h>
#include <stdint.h>

#include "core/err.h"
#include "core/source.h"
#include "sources/httphdr.h"

/* One try's credentials (struct tfs_http_req, authorize), each "" when
 * not used. The Authorization line goes only to the host of the URL
 * (libcurl drops it on a hop to another host or port); a request that
 * carries more than it (headers, a SigV4 signature) follows no redirect:
 * libcurl would take those to any origin, so it gets the 3xx instead. */
#define TFS_HTTP_CRED_MAX 8192
#define TFS_HTTP_CRED_HEADERS 3
struct tfs_http_creds {
	char auth[TFS_HTTP_CRED_MAX]; /* "Authorization: Bearer ..." */
	/* More "Name: value" lines (a session token, a payload hash). */
	char header[TFS_HTTP_CRED_HEADERS][TFS_HTTP_CRED_MAX];
	char aws_sigv4[256]; /* CURLOPT_AWS_SIGV4's provider, with userpwd */
	char userpwd[1024];
	int netrc; /* credentials from ~/.netrc for the URL's host */
};

/* Puts a source's credentials for a request to `url` into *c (zeroed):
 * a bearer token for the Hub's own host only, S3's SigV4 keys, ~/.netrc.
 * Asked before every try, so whatever it reads may change between them.
 * A failure fails the request, with d's line. */
typedef tfs_err (*tfs_authorize_fn)(void *ctx, const char *url, struct tfs_http_creds *c, struct tfs_diag *d);

struct tfs_http_req {
	const char *url;
	int head; /* HEAD instead of GET */
	/* Follow redirects (at most 5), unless its credentials hold more
	 * than an Authorization line (struct tfs_http_creds). */
	int follow;
	int has_range; /* ask for bytes [off, off + len) exactly */
	uint64_t off, len;
	int range_clip; /* or fewer, ending at the file's last byte */
	/* A 200 with the whole file answers the range too (a server that
	 * ignores Range): bytes [off, off + len) of it are taken from its
	 * start, into buf or body, and the transfer stops once they are in.
	 * accept(), when given, is asked before the first byte is taken. */
	int whole_ok;
	const char *if_match; /* the pinned ETag, or NULL */
	/* One more header line ("Range: bytes=0-99" for an API that answers
	 * a range with a document, not with 206), or NULL. A request with one
	 * follows no redirect: libcurl would send it to any origin. */
	const char *header;
	/* The credentials, asked of authorize(auth_ctx, url, creds) before
	 * every try (the first, each retry), into storage the try owns: a
	 * token file replaced, keys rotated or a session token renewed during
	 * a mount count from the next request on. NULL: none. */
	tfs_authorize_fn authorize;
	void *auth_ctx;
	/* Where the body goes: into `buf` (exactly buflen bytes expected for
	 * a range), or spread over iov[0..niov) in order, or into a growing
	 * *body of at most body_max bytes. A request without a range into iov
	 * is for the whole file, of `len` bytes: a 200 of that length. */
	void *buf;
	size_t buflen;
	const struct tfs_iov *iov;
	unsigned niov;
	/* For a range into iov: accept(arg, resp) is asked once the headers
	 * are in and the range is the one asked for, before any byte is
	 * written (non-zero refuses the answer: TFS_HTTP_REFUSED); then
	 * progress(arg, n) is told whenever the first n bytes are in place,
	 * so that the start of a part can be served before its end arrives.
	 * *in_place (when given) is how many are in place from earlier
	 * tries: a retry does not write them again. Optional. */
	int (*accept)(void *arg, const struct tfs_http_resp *rs);
	void (*progress)(void *arg, uint64_t n);
	void *arg;
	uint64_t *in_place;
	/* Asked before each retry, with the failed try's answer (a 206
	 * whose body was cut, a 503...): non-zero ends the tries at once,
	 * for a caller that knows no try can succeed (the file changed since
	 * it was pinned). Optional; gets arg. */
	int (*hopeless)(void *arg, const struct tfs_http_resp *rs);
	char **body;
	size_t *bodylen;
	size_t body_max;
};

/* What went wrong, finer than tfs_err, for messages and retry decisions. */
enum tfs_http_fail {
	TFS_HTTP_OK,
	TFS_HTTP_NET,       /* connect, reset, timeout, truncated: retried */
	TFS_HTTP_NONAME,    /* the host's name does not resolve: not retried */
	TFS_HTTP_STATUS,    /* an HTTP status: resp.status says which */
	TFS_HTTP_NORANGE,   /* 200 with the whole body to a Range request */
	TFS_HTTP_BADRANGE,  /* 206 with another Content-Range or length */
	TFS_HTTP_TOOBIG,    /* a body over body_max, or headers too large */
	TFS_HTTP_REDIRECTS, /* a redirect loop, or a redirect to another scheme */
	TFS_HTTP_NOTHTTP,   /* the answer is not HTTP at all */
	TFS_HTTP_ABORTED,   /* tfs_http_abort() was called */
	TFS_HTTP_REFUSED,   /* req.accept refused the answer */
	TFS_HTTP_ENCODED,   /* a 2xx with a Content-Encoding: not the file's bytes */
	TFS_HTTP_CREDS,     /* req.authorize failed: nothing sent, not retried */
};

struct tfs_http_policy {
	unsigned retries;       /* after the first attempt */
	unsigned stall_seconds; /* no byte for this long: the attempt fails */
	unsigned connect_seconds;
	/* The forward proxy of every request (-o proxy=): NULL leaves it to
	 * libcurl, which reads http_proxy, https_proxy, all_proxy and
	 * no_proxy as curl does; "" is none, whatever the environment says. */
	const char *proxy;
	const char *proxy_shown; /* the same without its password, for messages */
};

struct tfs_http;

/* A client with the default policy (3 retries, 15 s stall, 10 s connect,
 * libcurl's proxy variables); TFS_ERR_NOMEM. Freed after its last
 * request has returned. */
tfs_err tfs_http_new(struct tfs_http **out);
void tfs_http_free(struct tfs_http *h);

/* Its settings (the drivers' -o retries=, timeout=, proxy=), before its
 * first request. */
void tfs_http_set_policy(struct tfs_http *h, const struct tfs_http_policy *p);
void tfs_http_get_policy(const struct tfs_http *h, struct tfs_http_policy *p);

/* One request with the policy's retries: network failures, 408, 429 and
 * 5xx are retried after a jittered exponential backoff (or Retry-After,
 * capped), anything else is returned at once. `fail` says what happened;
 * the diag line, for anything but TFS_HTTP_OK, says it for people (no
 * credentials in it). */
tfs_err tfs_http_fetch(struct tfs_http *h, const struct tfs_http_req *rq, struct tfs_http_resp *rs,
		       enum tfs_http_fail *fail, struct tfs_diag *d);

/* Ends every transfer and backoff of the client in progress and every
 * later one. */
void tfs_http_abort(struct tfs_http *h);
int tfs_http_aborted(const struct tfs_http *h);

/* Requests sent; attempts that failed and were tried again (what the
 * cache's in-flight limit backs off on: a 503, SlowDown, a reset); body
 * bytes received in 2xx answers: since the client was made. */
uint64_t tfs_http_requests(const struct tfs_http *h);
uint64_t tfs_http_retried(const struct tfs_http *h);
uint64_t tfs_http_bytes(const struct tfs_http *h);

/* Appends one path segment, percent-encoded (RFC 3986 unreserved kept). */
tfs_err tfs_http_escape(const char *s, size_t n, char **out, size_t *len, size_t *cap);
/* Appends a path (an S3 key, a file in a Hub repository): each segment
 * percent-encoded as above, its '/' kept. */
tfs_err tfs_http_escape_path(const char *path, char **out, size_t *len, size_t *cap);

#endif
