/* One request of the HTTP client: a try's transfer (libcurl's options,
 * the callbacks that take the body, the verdicts on what came), the
 * credentials asked before each try, and the retries. */
#include "sources/httpc_i.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>

#include "core/url.h"
#include "core/version.h"

#define HEADERS_MAX (256u << 10) /* all response headers of one transfer */
#define ERRBODY_MAX 4096         /* what is kept of an error body */
#define RETRY_AFTER_MAX 30.0     /* seconds: a server cannot make us wait longer */
#define MAX_REDIRECTS 5

struct xfer {
	struct tfs_http *h;
	const struct tfs_http_req *rq;
	struct tfs_http_resp *rs;
	size_t got;  /* body bytes taken */
	unsigned iv; /* iov being filled, and how far */
	size_t ivoff;
	size_t header_bytes;
	enum tfs_http_fail why; /* set by a callback that stopped the transfer */
	char errbody[ERRBODY_MAX + 1];
	size_t errlen;
	const char *overlong; /* of any response of the transfer */
	unsigned overlong_max;
	size_t kept;     /* iov bytes in place from an earlier try */
	int checked;     /* the range and accept() passed */
	int other_range; /* ... and the range did not */
	uint64_t at;     /* whole_ok: bytes of the whole answer seen */
	int done;        /* whole_ok: stopped once the range was in */
};

static size_t on_header(char *p, size_t size, size_t nmemb, void *ud)
{
	struct xfer *x = ud;
	size_t n = size * nmemb;
	x->header_bytes += n;
	if (x->header_bytes > HEADERS_MAX) {
		x->why = TFS_HTTP_TOOBIG;
		return 0;
	}
	if (tfs_http_header_line(x->rs, p, n))
		x->errlen = 0;
	if (x->rs->overlong && !x->overlong) {
		x->overlong = x->rs->overlong;
		x->overlong_max = x->rs->overlong_max;
	}
	return n;
}

/* A 200 with the whole file to a range request that takes one
 * (rq->whole_ok): the range's bytes are copied out of it as they pass,
 * then the transfer stops. */
static size_t whole_body(struct xfer *x, const char *p, size_t n)
{
	const struct tfs_http_req *rq = x->rq;
	if (!x->checked) {
		if (rq->accept && rq->accept(rq->arg, x->rs)) {
			x->why = TFS_HTTP_REFUSED;
			return 0;
		}
		x->checked = 1;
	}
	uint64_t from = x->at > rq->off ? x->at : rq->off, end = rq->off + rq->len;
	if (x->at + n < end)
		end = x->at + n;
	if (from < end) {
		size_t k = (size_t)(end - from);
		const char *src = p + (from - x->at);
		if (rq->buf) {
			memcpy((char *)rq->buf + x->got, src, k);
		} else if (rq->body) {
			char *b = realloc(*rq->body, x->got + k + 1);
			if (!b) {
				x->why = TFS_HTTP_TOOBIG;
				return 0;
			}
			*rq->body = b;
			memcpy(b + x->got, src, k);
			b[x->got + k] = 0;
			*rq->bodylen = x->got + k;
		}
		x->got += k;
	}
	x->at += n;
	if (x->at >= rq->off + rq->len) {
		x->done = 1; /* all of it is in: no need for the rest */
		return 0;
	}
	return n;
}

/* Before the first byte lands in an iov: the answer is the range asked
 * for (or, asked for no range, the whole file of rq->len bytes). */
static int wrong_answer(const struct tfs_http_req *rq, const struct tfs_http_resp *rs, long st)
{
	if (!rq->has_range)
		return st != 200 || (rs->has_length && rs->length != rq->len);
	return st != 206 || rs->has_range != 1 || rs->range_start != rq->off ||
	       rs->range_end != rq->off + rq->len - 1;
}

/* An error's body: its start is kept (S3 says what went wrong in it). */
static size_t error_body(struct xfer *x, const char *p, size_t n)
{
	size_t k = ERRBODY_MAX - x->errlen < n ? ERRBODY_MAX - x->errlen : n;
	memcpy(x->errbody + x->errlen, p, k);
	x->errlen += k;
	return n;
}

/* Into rq->buf, which holds exactly the range. */
static size_t buf_body(struct xfer *x, const char *p, size_t n)
{
	const struct tfs_http_req *rq = x->rq;
	if (n > rq->buflen - x->got) {
		x->why = TFS_HTTP_BADRANGE;
		return 0;
	}
	memcpy((char *)rq->buf + x->got, p, n);
	x->got += n;
	return n;
}

/* Before the first byte lands in an iov: the range asked for, of the
 * version the caller pinned (a byte of another version must never reach a
 * block a reader may be served). 0 when it is. */
static int iov_refused(struct xfer *x)
{
	const struct tfs_http_req *rq = x->rq;
	if (x->checked)
		return 0;
	if (wrong_answer(rq, x->rs, x->rs->status)) {
		x->why = TFS_HTTP_BADRANGE;
		x->other_range = 1;
		return 1;
	}
	if (rq->accept && rq->accept(rq->arg, x->rs)) {
		x->why = TFS_HTTP_REFUSED;
		return 1;
	}
	x->checked = 1;
	return 0;
}

/* Spread over rq->iov in order, the caller told of the progress. */
static size_t iov_body(struct xfer *x, const char *p, size_t n)
{
	const struct tfs_http_req *rq = x->rq;
	if (iov_refused(x))
		return 0;
	size_t left = n;
	while (left) {
		if (x->iv >= rq->niov) {
			x->why = TFS_HTTP_BADRANGE;
			return 0;
		}
		const struct tfs_iov *v = &rq->iov[x->iv];
		size_t k = v->len - x->ivoff < left ? v->len - x->ivoff : left;
		/* What an earlier try put in place may be being read. */
		if (x->got + k > x->kept) {
			size_t skip = x->got < x->kept ? x->kept - x->got : 0;
			memcpy((char *)v->p + x->ivoff + skip, p + skip, k - skip);
		}
		p += k;
		left -= k;
		x->ivoff += k;
		x->got += k;
		if (x->ivoff == v->len) {
			x->iv++;
			x->ivoff = 0;
		}
	}
	if (rq->progress && x->got > x->kept)
		rq->progress(rq->arg, x->got);
	return n;
}

/* Into a growing *rq->body of at most rq->body_max bytes. */
static size_t grown_body(struct xfer *x, const char *p, size_t n)
{
	const struct tfs_http_req *rq = x->rq;
	if (n > rq->body_max - x->got) {
		x->why = TFS_HTTP_TOOBIG;
		return 0;
	}
	char *b = realloc(*rq->body, x->got + n + 1);
	if (!b) {
		x->why = TFS_HTTP_TOOBIG;
		return 0;
	}
	*rq->body = b;
	memcpy(b + x->got, p, n);
	x->got += n;
	b[x->got] = 0;
	*rq->bodylen = x->got;
	return n;
}

static size_t on_body(char *p, size_t size, size_t nmemb, void *ud)
{
	struct xfer *x = ud;
	const struct tfs_http_req *rq = x->rq;
	size_t n = size * nmemb;
	long st = x->rs->status;
	if (st < 200 || st > 299)
		return error_body(x, p, n);
	if (*x->rs->encoding) {
		/* Compressed bytes (a proxy that gzips whatever it passes on):
		 * refused before one of them lands anywhere. */
		x->why = TFS_HTTP_ENCODED;
		return 0;
	}
	__atomic_fetch_add(&x->h->nbytes, (uint64_t)n, __ATOMIC_RELAXED);
	if (rq->has_range && st == 200) {
		if (rq->whole_ok)
			return whole_body(x, p, n);
		/* The server ignores Range: never download the whole file. */
		x->why = TFS_HTTP_NORANGE;
		return 0;
	}
	if (rq->buf)
		return buf_body(x, p, n);
	if (rq->iov)
		return iov_body(x, p, n);
	if (rq->body)
		return grown_body(x, p, n);
	return n; /* a body nobody wants */
}

static int on_progress(void *ud, curl_off_t dt, curl_off_t dn, curl_off_t ut, curl_off_t un)
{
	(void)dt;
	(void)dn;
	(void)ut;
	(void)un;
	return tfs_http_aborted(((struct xfer *)ud)->h);
}

/* S3 error bodies: <Error><Code>SlowDown</Code>... */
static void error_code(const struct xfer *x, struct tfs_http_resp *rs)
{
	char body[ERRBODY_MAX + 1];
	memcpy(body, x->errbody, x->errlen);
	body[x->errlen] = 0;
	const char *a = strstr(body, "<Code>");
	const char *b = a ? strstr(a, "</Code>") : NULL;
	if (a && b && b - a - 6 < (long)sizeof rs->error_code) {
		memcpy(rs->error_code, a + 6, (size_t)(b - a - 6));
		rs->error_code[b - a - 6] = 0;
	}
}

/* The handle's options for one request of rq, its answer going to x. */
static void set_options(CURL *h, const struct tfs_http_req *rq, const struct tfs_http_creds *cr,
			struct xfer *x, char *errbuf, char *range, size_t range_cap)
{
	const struct tfs_http_policy *policy = &x->h->policy;
	curl_easy_reset(h);
	tfs_http_client_options(x->h, h);
	curl_easy_setopt(h, CURLOPT_URL, rq->url);
	curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
	curl_easy_setopt(h, CURLOPT_ERRORBUFFER, errbuf);
	curl_easy_setopt(h, CURLOPT_PROTOCOLS_STR, "http,https");
	curl_easy_setopt(h, CURLOPT_REDIR_PROTOCOLS_STR, "http,https");
	/* libcurl drops Authorization and Cookie on a hop to another host,
	 * but sends custom headers (a session token) anywhere. */
	int follow = rq->follow && !rq->header && !*cr->header[0] && !*cr->aws_sigv4;
	curl_easy_setopt(h, CURLOPT_FOLLOWLOCATION, follow ? 1L : 0L);
	curl_easy_setopt(h, CURLOPT_MAXREDIRS, (long)MAX_REDIRECTS);
	curl_easy_setopt(h, CURLOPT_UNRESTRICTED_AUTH, 0L);
	curl_easy_setopt(h, CURLOPT_HTTP_VERSION, (long)CURL_HTTP_VERSION_2TLS);
	curl_easy_setopt(h, CURLOPT_CONNECTTIMEOUT, (long)policy->connect_seconds);
	curl_easy_setopt(h, CURLOPT_LOW_SPEED_LIMIT, 1L);
	curl_easy_setopt(h, CURLOPT_LOW_SPEED_TIME, (long)policy->stall_seconds);
	/* And a cap on the whole attempt, so that a server trickling a byte
	 * at a time cannot hold a read forever: the stall time for every MiB
	 * asked for, plus twice the stall time (docs/remote.md, "When the
	 * network fails"). */
	uint64_t mib = rq->has_range || rq->iov ? (rq->whole_ok ? rq->off + rq->len : rq->len) >> 20
						: rq->body_max >> 20;
	curl_easy_setopt(h, CURLOPT_TIMEOUT_MS, (long)(policy->stall_seconds * 1000ull * (2 + mib)));
	if (policy->proxy)
		curl_easy_setopt(h, CURLOPT_PROXY, policy->proxy);
	/* No Accept-Encoding is sent (CURLOPT_ACCEPT_ENCODING is left unset):
	 * a range is of the file's own bytes, and libcurl then passes an
	 * encoded body on as it came, which on_body refuses. (A transfer
	 * coding, hop by hop, libcurl undoes.) Our headers (a token, a SigV4
	 * signature) are the origin's: never in a CONNECT to the proxy
	 * (libcurl's default since 7.42.1, said here on purpose). */
	curl_easy_setopt(h, CURLOPT_HEADEROPT, (long)CURLHEADER_SEPARATE);
	curl_easy_setopt(h, CURLOPT_TCP_KEEPALIVE, 1L);
	curl_easy_setopt(h, CURLOPT_BUFFERSIZE, 256L << 10);
	curl_easy_setopt(h, CURLOPT_USERAGENT, "tensorfs/" TFS_VERSION);
	curl_easy_setopt(h, CURLOPT_HEADERFUNCTION, on_header);
	curl_easy_setopt(h, CURLOPT_HEADERDATA, x);
	curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, on_body);
	curl_easy_setopt(h, CURLOPT_WRITEDATA, x);
	curl_easy_setopt(h, CURLOPT_XFERINFOFUNCTION, on_progress);
	curl_easy_setopt(h, CURLOPT_XFERINFODATA, x);
	curl_easy_setopt(h, CURLOPT_NOPROGRESS, 0L);
	if (rq->head)
		curl_easy_setopt(h, CURLOPT_NOBODY, 1L);
	if (rq->has_range) {
		snprintf(range, range_cap, "%llu-%llu", (unsigned long long)rq->off,
			 (unsigned long long)(rq->off + rq->len - 1));
		curl_easy_setopt(h, CURLOPT_RANGE, range);
	}
	/* (A range request is stopped by on_body instead, which can tell a
	 * server that ignores Range from one that sends too much.) */
	if (rq->body && rq->body_max && !rq->has_range)
		curl_easy_setopt(h, CURLOPT_MAXFILESIZE_LARGE, (curl_off_t)rq->body_max);
	if (cr->netrc)
		curl_easy_setopt(h, CURLOPT_NETRC, (long)CURL_NETRC_OPTIONAL);
	if (*cr->aws_sigv4) {
		curl_easy_setopt(h, CURLOPT_AWS_SIGV4, cr->aws_sigv4);
		curl_easy_setopt(h, CURLOPT_USERPWD, cr->userpwd);
	}
}

/* A request's header lines as libcurl takes them, linked by hand in
 * storage the try owns: curl_slist_append would copy each line, a
 * credential among them, into memory freed without being wiped. The nodes
 * point at the lines where they are (the try's credentials, the request's
 * own line), which libcurl only reads, and the list lives as long as the
 * transfer. */
struct header_list {
	struct curl_slist node[3 + TFS_HTTP_CRED_HEADERS];
	unsigned n;
	char if_match[512];
};

static void link_line(struct header_list *hl, char *line)
{
	struct curl_slist *v = &hl->node[hl->n];
	v->data = line;
	v->next = NULL;
	if (hl->n)
		hl->node[hl->n - 1].next = v;
	hl->n++;
}

/* If-Match, the credentials' header lines and the request's own into hl:
 * its first node, or NULL for none. */
static struct curl_slist *add_headers(const struct tfs_http_req *rq, struct tfs_http_creds *cr,
				      struct header_list *hl)
{
	hl->n = 0;
	if (rq->if_match) {
		snprintf(hl->if_match, sizeof hl->if_match, "If-Match: %s", rq->if_match);
		link_line(hl, hl->if_match);
	}
	if (*cr->auth)
		link_line(hl, cr->auth);
	if (rq->header)
		link_line(hl, (char *)rq->header); /* (read only, as every line) */
	for (int i = 0; i < TFS_HTTP_CRED_HEADERS; i++)
		if (*cr->header[i])
			link_line(hl, cr->header[i]);
	return hl->n ? &hl->node[0] : NULL;
}

static enum tfs_http_fail encoded(const struct tfs_http_resp *rs, struct tfs_diag *d)
{
	tfs_fail(
		d, TFS_ERR_IO,
		"the answer came encoded (Content-Encoding: %s), which tensorfs never asks for: its bytes are not the file's (a proxy or server that compresses what it sends must leave these requests alone)",
		rs->encoding);
	return TFS_HTTP_ENCODED;
}

/* Why a callback stopped the transfer (x->why), said for people. */
static enum tfs_http_fail stop_verdict(const struct xfer *x, struct tfs_diag *d)
{
	const struct tfs_http_req *rq = x->rq;
	switch (x->why) {
	case TFS_HTTP_NORANGE:
		tfs_fail(
			d, TFS_ERR_IO,
			"the server ignores Range requests (it answered 200 with the whole file); tensorfs needs byte ranges");
		return TFS_HTTP_NORANGE;
	case TFS_HTTP_TOOBIG:
		tfs_fail(d, TFS_ERR_IO, "the answer is larger than tensorfs accepts");
		return TFS_HTTP_TOOBIG;
	case TFS_HTTP_REFUSED:
		tfs_fail(d, TFS_ERR_IO, "the answer is of another version of the file");
		return TFS_HTTP_REFUSED;
	case TFS_HTTP_ENCODED:
		return encoded(x->rs, d);
	default:
		if (x->other_range)
			tfs_fail(d, TFS_ERR_IO,
				 "asked for bytes %llu-%llu, the server answered another range",
				 (unsigned long long)rq->off, (unsigned long long)(rq->off + rq->len - 1));
		else
			tfs_fail(d, TFS_ERR_IO, "the server sent more bytes than the range asked for");
		return TFS_HTTP_BADRANGE;
	}
}

/* No answer came (c, not CURLE_OK): which way, then libcurl's words. */
static enum tfs_http_fail network_verdict(CURLcode c, const struct xfer *x, const char *errbuf,
					  struct tfs_diag *d)
{
	const char *lib = *errbuf ? errbuf : curl_easy_strerror(c);
	char stalled[64];
	snprintf(stalled, sizeof stalled, "no answer for %u s", x->h->policy.stall_seconds);
	const char *how = c == CURLE_COULDNT_RESOLVE_HOST ? "the host name does not resolve"
			  : c == CURLE_COULDNT_CONNECT    ? "the connection was refused or failed"
			  : c == CURLE_OPERATION_TIMEDOUT && strstr(lib, "too slow") ? stalled
			  : c == CURLE_OPERATION_TIMEDOUT                            ? "it timed out"
										     : NULL;
	/* libcurl's words name the proxy's address, or the origin's, without
	 * saying which. */
	char via[TFS_HTTP_URL_MAX + 32] = "";
	if (x->h->policy.proxy_shown && *x->h->policy.proxy_shown)
		snprintf(via, sizeof via, " (through the proxy %s)", x->h->policy.proxy_shown);
	if (how)
		tfs_fail(d, TFS_ERR_OPEN, "%s (%s)%s", how, lib, via);
	else
		tfs_fail(d, TFS_ERR_OPEN, "%s%s", lib, via);
	/* A name that does not resolve will not resolve on retry. */
	return c == CURLE_COULDNT_RESOLVE_HOST ? TFS_HTTP_NONAME : TFS_HTTP_NET;
}

/* What libcurl's own result says (a callback's stop, a limit, a redirect,
 * an answer that is not HTTP, the network); TFS_HTTP_OK when the transfer
 * itself went through. */
static enum tfs_http_fail transfer_verdict(CURL *h, CURLcode c, const struct xfer *x, const char *errbuf,
					   struct tfs_diag *d)
{
	if (c == CURLE_ABORTED_BY_CALLBACK || (c != CURLE_OK && tfs_http_aborted(x->h))) {
		tfs_fail(d, TFS_ERR_IO, "stopped: the mount is going away");
		return TFS_HTTP_ABORTED;
	}
	if (c == CURLE_WRITE_ERROR && x->done && !x->why)
		return TFS_HTTP_OK; /* whole_body took what it wanted */
	if (c == CURLE_WRITE_ERROR || (c != CURLE_OK && x->why))
		return stop_verdict(x, d);
	if (c == CURLE_FILESIZE_EXCEEDED) {
		tfs_fail(d, TFS_ERR_IO, "the answer is larger than tensorfs accepts");
		return TFS_HTTP_TOOBIG;
	}
	if (x->overlong) {
		tfs_fail(
			d, TFS_ERR_IO,
			"the server's %s header is longer than tensorfs takes (%u bytes): refused rather than cut",
			x->overlong, x->overlong_max);
		return TFS_HTTP_TOOBIG;
	}
	long hops = 0;
	curl_easy_getinfo(h, CURLINFO_REDIRECT_COUNT, &hops);
	if (c == CURLE_TOO_MANY_REDIRECTS || (c == CURLE_UNSUPPORTED_PROTOCOL && hops > 0)) {
		tfs_fail(d, TFS_ERR_OPEN, "%s",
			 c == CURLE_TOO_MANY_REDIRECTS ? "too many redirects (a redirect loop?)"
						       : "a redirect to a scheme other than http or https");
		return TFS_HTTP_REDIRECTS;
	}
	if (c == CURLE_UNSUPPORTED_PROTOCOL || c == CURLE_WEIRD_SERVER_REPLY) {
		/* libcurl refuses an HTTP/0.9 answer (no status line) with the
		 * first code: it is what a server that speaks something else
		 * sends. */
		tfs_fail(d, TFS_ERR_OPEN, "the answer is not HTTP (libcurl: %s)",
			 *errbuf ? errbuf : curl_easy_strerror(c));
		return TFS_HTTP_NOTHTTP;
	}
	return c != CURLE_OK ? network_verdict(c, x, errbuf, d) : TFS_HTTP_OK;
}

/* What the answer says: its status, and for a body the range and length
 * it promised against what came. */
static enum tfs_http_fail answer_verdict(const struct xfer *x, const struct tfs_http_resp *rs,
					 struct tfs_diag *d)
{
	const struct tfs_http_req *rq = x->rq;
	if (rs->status < 200 || rs->status > 399 || (rs->status > 299 && rq->follow)) {
		tfs_fail(d, TFS_ERR_OPEN, "HTTP %ld%s%s", rs->status, *rs->error_code ? " " : "",
			 rs->error_code);
		return TFS_HTTP_STATUS;
	}
	if (rs->status <= 299 && *rs->encoding)
		return encoded(rs, d); /* (one with no body, a HEAD's) */
	if (rq->has_range && !rq->head && rs->status == 206) {
		/* The end may be cut to the file's last byte only where the
		 * caller allows it (the first request, before the size is
		 * known). */
		uint64_t want_end = rq->off + rq->len - 1;
		if (rq->range_clip && rs->has_range == 1 && rs->range_total && want_end >= rs->range_total)
			want_end = rs->range_total - 1;
		if (rs->has_range != 1 || rs->range_start != rq->off || rs->range_end != want_end) {
			tfs_fail(d, TFS_ERR_IO,
				 "asked for bytes %llu-%llu, the server answered another range",
				 (unsigned long long)rq->off, (unsigned long long)want_end);
			return TFS_HTTP_BADRANGE;
		}
		size_t want_len = (size_t)(want_end - rq->off + 1);
		if ((rq->buf || rq->iov || rq->body) && x->got != want_len) {
			tfs_fail(d, TFS_ERR_IO, "the body ended after %zu of %zu bytes", x->got, want_len);
			return TFS_HTTP_NET; /* a truncated body: worth another try */
		}
	} else if (rq->has_range && !rq->head && rs->status == 200 && rq->whole_ok) {
		/* The range, out of the whole file: all of it, or the file's
		 * end where the caller allows a shorter one. */
		uint64_t total = rs->has_length ? rs->length : x->done ? rq->off + rq->len : x->at;
		uint64_t want = total <= rq->off ? 0 : total - rq->off < rq->len ? total - rq->off : rq->len;
		if (want != rq->len && !rq->range_clip) {
			tfs_fail(d, TFS_ERR_IO, "asked for bytes %llu-%llu of a file of %llu bytes",
				 (unsigned long long)rq->off, (unsigned long long)(rq->off + rq->len - 1),
				 (unsigned long long)total);
			return TFS_HTTP_BADRANGE;
		}
		if (x->got != want) {
			tfs_fail(d, TFS_ERR_IO, "the body ended after %zu of %llu bytes", x->got,
				 (unsigned long long)want);
			return TFS_HTTP_NET;
		}
	} else if (rq->has_range && !rq->head && rs->status == 200) {
		/* A body short enough to arrive before we could stop it. */
		tfs_fail(
			d, TFS_ERR_IO,
			"the server ignores Range requests (it answered 200 with the whole file); tensorfs needs byte ranges");
		return TFS_HTTP_NORANGE;
	} else if (!rq->head && rs->has_length && rs->status == 200 && x->got != rs->length &&
		   (rq->buf || rq->iov || rq->body)) {
		tfs_fail(d, TFS_ERR_IO, "the body ended after %zu of %llu bytes", x->got,
			 (unsigned long long)rs->length);
		return TFS_HTTP_NET;
	} else if (!rq->has_range && rq->iov && x->got != rq->len) {
		tfs_fail(d, TFS_ERR_IO, "the body ended after %zu of %llu bytes", x->got,
			 (unsigned long long)rq->len);
		return TFS_HTTP_NET;
	}
	return TFS_HTTP_OK;
}

/* One try, with the credentials cr (storage the try owns, which its
 * caller wipes once the try is over). */
static enum tfs_http_fail attempt(struct tfs_http *hc, const struct tfs_http_req *rq,
				  struct tfs_http_resp *rs, struct tfs_http_creds *cr, struct tfs_diag *d)
{
	struct xfer x;
	char errbuf[CURL_ERROR_SIZE] = "";
	char range[64];
	struct header_list hl;
	memset(&x, 0, sizeof x);
	x.h = hc;
	x.rq = rq;
	x.rs = rs;
	x.kept = rq->in_place ? (size_t)*rq->in_place : 0;
	tfs_http_resp_reset(rs);
	if (tfs_http_aborted(hc)) {
		tfs_fail(d, TFS_ERR_IO, "stopped: the mount is going away");
		return TFS_HTTP_ABORTED;
	}
	CURL *h = tfs_http_handle_get(hc);
	if (!h) {
		tfs_fail(d, TFS_ERR_NOMEM, "cannot start an HTTP client");
		return TFS_HTTP_NET;
	}
	if (rq->body)
		*rq->bodylen = 0;
	set_options(h, rq, cr, &x, errbuf, range, sizeof range);
	struct curl_slist *lines = add_headers(rq, cr, &hl);
	if (lines)
		curl_easy_setopt(h, CURLOPT_HTTPHEADER, lines);
	__atomic_fetch_add(&hc->nrequests, 1, __ATOMIC_RELAXED);
	CURLcode c = curl_easy_perform(h);
	if (x.errlen)
		error_code(&x, rs);
	if (rq->in_place && x.checked && x.got > *rq->in_place)
		*rq->in_place = x.got;
	enum tfs_http_fail f = transfer_verdict(h, c, &x, errbuf, d);
	if (f == TFS_HTTP_OK)
		f = answer_verdict(&x, rs, d);
	/* (The handle keeps no pointer into what goes now: reset drops the
	 * header list and the password before the next request sets its own.) */
	curl_easy_reset(h);
	tfs_http_handle_put(hc, h);
	return f;
}

/* The credentials of a try into *cr, asked anew: TFS_OK, or the failure
 * with d's line. */
static tfs_err creds_for(const struct tfs_http_req *rq, struct tfs_http_creds *cr, struct tfs_diag *d)
{
	explicit_bzero(cr, sizeof *cr);
	return rq->authorize ? rq->authorize(rq->auth_ctx, rq->url, cr, d) : TFS_OK;
}

/* A refusal of the credentials sent (401, 403, or S3's 400 for an expired
 * session token) when they have changed since the try took them (a token
 * file rewritten while the request was in flight): worth one more try at
 * once, which is not counted as a retry. */
static int renewed(const struct tfs_http_req *rq, enum tfs_http_fail f, const struct tfs_http_resp *rs,
		   const struct tfs_http_creds *sent, struct tfs_http_creds *now)
{
	struct tfs_diag d;
	if (!rq->authorize || f != TFS_HTTP_STATUS ||
	    (rs->status != 400 && rs->status != 401 && rs->status != 403))
		return 0;
	return creds_for(rq, now, &d) == TFS_OK && memcmp(sent, now, sizeof *now) != 0;
}

/* The host of a URL, for messages (never its user or password). */
static void url_host(const char *url, char *out, size_t n)
{
	char red[512];
	tfs_url_redact(url, red, sizeof red);
	const char *s = strstr(red, "://"), *p = s ? s + 3 : red;
	snprintf(out, n, "%.*s", (int)strcspn(p, "/?#"), p);
}

static int retryable(enum tfs_http_fail f, long status)
{
	if (f == TFS_HTTP_NET)
		return 1;
	if (f != TFS_HTTP_STATUS)
		return 0;
	return status == 408 || status == 429 || status == 500 || status == 502 || status == 503 ||
	       status == 504;
}

/* Sleeps up to `secs`, waking early when the mount goes away. */
static void nap(const struct tfs_http *h, double secs)
{
	while (secs > 0 && !tfs_http_aborted(h)) {
		double step = secs < 0.05 ? secs : 0.05;
		struct timespec ts = {(time_t)step, (long)((step - (double)(time_t)step) * 1e9)};
		nanosleep(&ts, NULL);
		secs -= step;
	}
}

tfs_err tfs_http_fetch(struct tfs_http *h, const struct tfs_http_req *rq, struct tfs_http_resp *rs,
		       enum tfs_http_fail *fail, struct tfs_diag *d)
{
	double backoff = 0.2;
	const struct tfs_http_policy *policy = &h->policy;
	/* A try's credentials and the ones asked anew after a refusal (a
	 * few kilobytes each): they may be secrets, wiped as each try ends,
	 * and the header lines libcurl reads point into them. */
	struct tfs_http_creds *cr = malloc(2 * sizeof *cr);
	if (!cr) {
		*fail = TFS_HTTP_NET;
		return tfs_fail(d, TFS_ERR_NOMEM, "out of memory");
	}
	tfs_err e = TFS_ERR_IO;
	int again = 0;
	for (unsigned n = 0;;) {
		enum tfs_http_fail f = TFS_HTTP_CREDS;
		tfs_err ce = creds_for(rq, &cr[0], d);
		if (ce == TFS_OK)
			f = attempt(h, rq, rs, &cr[0], d);
		else
			memset(rs, 0, sizeof *rs); /* no answer to look at */
		e = ce ? ce : e;
		*fail = f;
		int renew = f != TFS_HTTP_OK && !again && renewed(rq, f, rs, &cr[0], &cr[1]);
		/* The try is over: its credentials go now, not after the
		 * backoff (the next try asks for them anew). */
		explicit_bzero(cr, 2 * sizeof *cr);
		if (f == TFS_HTTP_OK) {
			e = TFS_OK;
			break;
		}
		if (renew) {
			again = 1;
			continue;
		}
		if (n >= policy->retries || !retryable(f, rs->status) || tfs_http_aborted(h) ||
		    (rq->hopeless && rq->hopeless(rq->arg, rs))) {
			/* The tries made are part of what happened. */
			if (n > 0 && !tfs_http_aborted(h)) {
				char msg[sizeof d->msg];
				snprintf(msg, sizeof msg, "%s", d->msg);
				tfs_fail(d, TFS_ERR_IO, "%s (%u tries)", msg, n + 1);
			}
			break;
		}
		__atomic_fetch_add(&h->nretried, 1, __ATOMIC_RELAXED);
		char host[256];
		url_host(rq->url, host, sizeof host);
		tfs_log_info("%s: %s; retrying (%u of %u)", host, d->msg, n + 1, policy->retries);
		/* Jitter spreads the retries of many readers apart. */
		uint32_t r = 0;
		if (getrandom(&r, sizeof r, GRND_NONBLOCK) != (ssize_t)sizeof r)
			r = (uint32_t)n * 2654435761u;
		double wait = backoff * (0.5 + (double)(r % 1000) / 2000.0);
		if (rs->retry_after >= 0)
			wait = rs->retry_after < RETRY_AFTER_MAX ? rs->retry_after : RETRY_AFTER_MAX;
		nap(h, wait);
		backoff = backoff * 2 < 5.0 ? backoff * 2 : 5.0;
		n++;
	}
	explicit_bzero(cr, 2 * sizeof *cr);
	free(cr);
	return e;
}
