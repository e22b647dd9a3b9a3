/* The response headers of an HTTP transfer, a line at a time
 * (sources/httphdr.h). */
#include "sources/httphdr.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

static int starts(const char *line, size_t n, const char *name)
{
	size_t k = strlen(name);
	return n > k && strncasecmp(line, name, k) == 0;
}

/* The value of a header line: after the colon, without surrounding space.
 * Returns 0, or -1 when it does not fit (out then holds nothing). */
static int value(const char *line, size_t n, size_t skip, char *out, size_t outsz)
{
	const char *v = line + skip, *e = line + n;
	while (v < e && (*v == ' ' || *v == '\t'))
		v++;
	while (e > v && (e[-1] == '\r' || e[-1] == '\n' || e[-1] == ' ' || e[-1] == '\t'))
		e--;
	if ((size_t)(e - v) > outsz - 1) {
		*out = 0;
		return -1;
	}
	memcpy(out, v, (size_t)(e - v));
	out[e - v] = 0;
	return 0;
}

/* A header kept whole into its field, or the answer marked overlong. */
static void keep(struct tfs_http_resp *rs, const char *what, const char *line, size_t n, size_t skip,
		 char *out, size_t outsz)
{
	if (value(line, n, skip, out, outsz) != 0 && !rs->overlong) {
		rs->overlong = what;
		rs->overlong_max = (unsigned)outsz - 1;
	}
}

static int parse_u64(const char *s, uint64_t *v, const char **end)
{
	uint64_t x = 0;
	const char *p = s;
	if (*p < '0' || *p > '9')
		return -1;
	for (; *p >= '0' && *p <= '9'; p++) {
		if (x > (UINT64_MAX - (uint64_t)(*p - '0')) / 10)
			return -1;
		x = x * 10 + (uint64_t)(*p - '0');
	}
	*v = x;
	if (end)
		*end = p;
	return 0;
}

void tfs_http_resp_reset(struct tfs_http_resp *rs)
{
	memset(rs, 0, sizeof *rs);
	rs->retry_after = -1;
}

/* The status line: a new response (after a redirect or a 100), and only
 * the last one's headers count. */
static void status_line(struct tfs_http_resp *rs, const char *p, size_t n)
{
	tfs_http_resp_reset(rs);
	const char *sp = memchr(p, ' ', n);
	uint64_t st;
	char num[8];
	size_t k = sp ? (size_t)(p + n - sp - 1) : 0;
	if (k > sizeof num - 1)
		k = sizeof num - 1;
	if (sp)
		memcpy(num, sp + 1, k);
	num[k] = 0;
	if (sp && parse_u64(num, &st, NULL) == 0 && st < 1000)
		rs->status = (long)st;
}

/* Content-Range: taken whole or not at all: a malformed one (or a second
 * one) leaves no range, which every check then refuses. */
static void content_range(struct tfs_http_resp *rs, const char *p, size_t n)
{
	char v[TFS_HTTP_URL_MAX];
	rs->has_range = 0;
	if (value(p, n, 14, v, sizeof v) != 0)
		return;
	const char *q = v, *e;
	uint64_t a, b, t;
	if (strncasecmp(q, "bytes ", 6) != 0)
		return;
	q += 6;
	if (*q == '*') {
		if (q[1] == '/' && parse_u64(q + 2, &t, &e) == 0 && !*e) {
			rs->range_total = t;
			rs->has_range = 2; /* unsatisfied: only the total */
		}
		return;
	}
	if (parse_u64(q, &a, &e) == 0 && *e == '-' && parse_u64(e + 1, &b, &e) == 0 && *e == '/' &&
	    parse_u64(e + 1, &t, &e) == 0 && !*e && a <= b && b < t) {
		rs->range_start = a;
		rs->range_end = b;
		rs->range_total = t;
		rs->has_range = 1;
	}
}

/* c, if it may be in an HTTP token (RFC 9110), else '?': a server's text
 * that a log line shows. */
static char token_char(char c)
{
	int ok = (c >= '0' && c <= '9') || (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') ||
		 (c && strchr("!#$%&'*+-.^_`|~", c));
	return ok ? c : '?';
}

/* Content-Encoding: gzip (or "identity", or a list, "gzip, br"): the first
 * coding that is not identity. One too long to take is an encoding too. */
static void content_encoding(struct tfs_http_resp *rs, const char *p, size_t n)
{
	char v[TFS_HTTP_URL_MAX];
	if (value(p, n, 17, v, sizeof v) != 0) {
		snprintf(rs->encoding, sizeof rs->encoding, "?");
		return;
	}
	for (char *c = v; *c && !*rs->encoding;) {
		c += strspn(c, " \t,");
		size_t k = strcspn(c, ","), e = k;
		while (e && (c[e - 1] == ' ' || c[e - 1] == '\t'))
			e--;
		if (e && !(e == 8 && strncasecmp(c, "identity", 8) == 0)) {
			size_t m = e < sizeof rs->encoding - 1 ? e : sizeof rs->encoding - 1;
			for (size_t i = 0; i < m; i++)
				rs->encoding[i] = token_char(c[i]);
			rs->encoding[m] = 0;
		}
		c += k;
	}
}

/* Link: <url>; rel="next", <url>; rel="prev" */
static void link_next(struct tfs_http_resp *rs, const char *p, size_t n)
{
	char v[TFS_HTTP_URL_MAX];
	if (value(p, n, 5, v, sizeof v) != 0) {
		/* Cut, a next page could be lost: the listing would
		 * look complete when it is not. */
		if (!rs->overlong) {
			rs->overlong = "Link";
			rs->overlong_max = (unsigned)sizeof v - 1;
		}
		return;
	}
	for (char *q = v; (q = strchr(q, '<'));) {
		char *gt = strchr(q, '>');
		if (!gt)
			break;
		char *semi = gt + 1, *comma = strchr(semi, ',');
		size_t plen = comma ? (size_t)(comma - semi) : strlen(semi);
		if (memmem(semi, plen, "rel=\"next\"", 10) || memmem(semi, plen, "rel=next", 8)) {
			size_t ul = (size_t)(gt - q - 1);
			memcpy(rs->next_link, q + 1, ul); /* ul < sizeof v */
			rs->next_link[ul] = 0;
		}
		q = gt + 1;
	}
}

int tfs_http_header_line(struct tfs_http_resp *rs, const char *p, size_t n)
{
	char v[TFS_HTTP_URL_MAX];
	if (n >= 5 && strncmp(p, "HTTP/", 5) == 0) {
		status_line(rs, p, n);
		return 1;
	}
	if (starts(p, n, "content-range:")) {
		content_range(rs, p, n);
	} else if (starts(p, n, "content-length:")) {
		const char *e;
		uint64_t len;
		rs->has_length = 0;
		if (value(p, n, 15, v, sizeof v) == 0 && parse_u64(v, &len, &e) == 0 && !*e) {
			rs->length = len;
			rs->has_length = 1;
		}
	} else if (starts(p, n, "etag:")) {
		keep(rs, "ETag", p, n, 5, rs->etag, sizeof rs->etag);
	} else if (starts(p, n, "last-modified:")) {
		keep(rs, "Last-Modified", p, n, 14, rs->last_modified, sizeof rs->last_modified);
	} else if (starts(p, n, "location:")) {
		keep(rs, "Location", p, n, 9, rs->location, sizeof rs->location);
	} else if (starts(p, n, "x-repo-commit:")) {
		keep(rs, "X-Repo-Commit", p, n, 14, rs->repo_commit, sizeof rs->repo_commit);
	} else if (starts(p, n, "x-xet-hash:")) {
		keep(rs, "X-Xet-Hash", p, n, 11, rs->xet_hash, sizeof rs->xet_hash);
	} else if (starts(p, n, "x-linked-etag:")) {
		keep(rs, "X-Linked-Etag", p, n, 14, rs->linked_etag, sizeof rs->linked_etag);
	} else if (starts(p, n, "x-linked-size:")) {
		const char *e;
		uint64_t len;
		rs->has_linked_size = 0;
		if (value(p, n, 14, v, sizeof v) == 0 && parse_u64(v, &len, &e) == 0 && !*e) {
			rs->linked_size = len;
			rs->has_linked_size = 1;
		}
	} else if (starts(p, n, "retry-after:")) {
		uint64_t s;
		const char *e;
		if (value(p, n, 12, v, sizeof v) == 0 && parse_u64(v, &s, &e) == 0 && !*e)
			rs->retry_after = s > 3600 ? 3600.0 : (double)s;
	} else if (starts(p, n, "link:")) {
		link_next(rs, p, n);
	} else if (starts(p, n, "content-encoding:")) {
		content_encoding(rs, p, n);
	}
	return 0;
}
