/* libFuzzer target for what remote servers send: HTTP response header
 * lines (status lines, Content-Range, Content-Length, ETag, Location,
 * Link, the Hub's X-* headers, Retry-After), the Hub's tree listings and
 * revision answers, hf:// references, S3 listings and error bodies, and
 * the AWS files' INI syntax. The first byte picks the parser. Besides
 * crashes, leaks and UB it checks what callers rely on: a Content-Range
 * taken is a valid range, a kept value is the whole value (a longer one
 * is refused, never cut), every listed path is safe, a commit is 40 hex
 * digits, and a refusal is one line. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "sources/aws.h"
#include "sources/httpc.h"
#include "sources/hub.h"
#include "core/url.h"

static void one_line(const struct tfs_diag *d)
{
	if (!memchr(d->msg, 0, sizeof d->msg) || !d->msg[0] || strchr(d->msg, '\n'))
		abort(); /* a diagnostic is one line */
}

/* For a line "Name: value" of a header kept whole, in an answer not yet
 * marked overlong: the field holds the value exactly, or the answer is
 * now marked overlong for it and the field is empty. */
static void whole(const struct tfs_http_resp *rs, const char *line, size_t n, const char *name,
		  const char *field, const char *what)
{
	size_t k = strlen(name);
	if (n <= k || strncasecmp(line, name, k) != 0)
		return;
	const char *v = line + k, *e = line + n;
	while (v < e && (*v == ' ' || *v == '\t'))
		v++;
	while (e > v && (e[-1] == '\r' || e[-1] == '\n' || e[-1] == ' ' || e[-1] == '\t'))
		e--;
	size_t vl = (size_t)(e - v);
	if (rs->overlong && strcmp(rs->overlong, what) == 0) {
		if (*field || vl <= rs->overlong_max)
			abort();
	} else if (!rs->overlong && (strlen(field) != vl || memcmp(field, v, vl) != 0)) {
		abort();
	}
}

static void headers(const uint8_t *p, size_t n)
{
	struct tfs_http_resp rs;
	memset(&rs, 0, sizeof rs);
	size_t start = 0;
	for (size_t i = 0; i <= n; i++) {
		if (i < n && p[i] != '\n')
			continue;
		const char *line = (const char *)p + start;
		size_t len = i - start;
		const char *was = rs.overlong;
		int status = tfs_http_header_line(&rs, line, len);
		start = i + 1;
		if (status && (rs.status < 0 || rs.status > 999 || rs.overlong))
			abort(); /* a status line starts a clean answer */
		if (rs.has_range == 1 && !(rs.range_start <= rs.range_end && rs.range_end < rs.range_total))
			abort();
		if (strnlen(rs.etag, sizeof rs.etag) == sizeof rs.etag ||
		    strnlen(rs.location, sizeof rs.location) == sizeof rs.location ||
		    strnlen(rs.next_link, sizeof rs.next_link) == sizeof rs.next_link)
			abort(); /* not NUL-terminated */
		if (rs.retry_after > 3600)
			abort();
		/* Only a line without a NUL: a C string ends there. */
		if (!was && !memchr(line, 0, len)) {
			whole(&rs, line, len, "etag:", rs.etag, "ETag");
			whole(&rs, line, len, "location:", rs.location, "Location");
			whole(&rs, line, len, "x-linked-etag:", rs.linked_etag, "X-Linked-Etag");
		}
	}
}

static void tree(const uint8_t *p, size_t n)
{
	struct tfs_dirlist l = {0};
	struct tfs_diag d;
	if (tfs_hub_parse_tree((const char *)p, n, &l, &d) == TFS_OK) {
		for (size_t i = 0; i < l.n; i++)
			if (!tfs_hub_safe_path(l.name[i], strlen(l.name[i])))
				abort();
	} else {
		one_line(&d);
	}
	tfs_dirlist_free(&l);
}

static void revision(const uint8_t *p, size_t n)
{
	char sha[41];
	struct tfs_diag d;
	tfs_err e = tfs_hub_parse_revision((const char *)p, n, sha, &d);
	if (e == TFS_OK && !tfs_hub_is_commit(sha))
		abort();
	if (e)
		one_line(&d);
}

static void ref(const uint8_t *p, size_t n)
{
	char *s = malloc(n + 1);
	struct tfs_hub_ref r;
	struct tfs_diag d;
	if (!s)
		return;
	memcpy(s, p, n);
	s[n] = 0;
	if (tfs_hub_parse_ref(s, &r, &d) == TFS_OK &&
	    (!*r.repo || !*r.rev || (*r.path && !tfs_hub_safe_path(r.path, strlen(r.path)))))
		abort();
	char red[512];
	tfs_url_redact(s, red, sizeof red);
	if (strchr(s, '@') == NULL && strcmp(s, red) != 0 && strlen(s) < sizeof red)
		abort(); /* nothing to remove: unchanged */
	size_t len = strlen(s);
	tfs_url_hide(s);
	if (strlen(s) != len)
		abort(); /* masked in place, never shorter or longer */
	free(s);
}

static tfs_err ini_entry(void *ctx, const char *section, const char *key, const char *value)
{
	(void)ctx;
	/* What callers rely on: non-empty sections and keys, no line ends. */
	if (!*section || !*key || strpbrk(key, "\n=") || strchr(value, '\n'))
		abort();
	return TFS_OK;
}

static tfs_err s3_object(void *ctx, const char *key, uint64_t size, const char *etag)
{
	(void)ctx;
	(void)size;
	if (strlen(key) >= 1100 || strlen(etag) > TFS_HTTP_ETAG_MAX)
		abort();
	return TFS_OK;
}

static void ini(const uint8_t *p, size_t n)
{
	struct tfs_diag d;
	tfs_ini_parse((const char *)p, n, ini_entry, NULL, &d);
}

static void s3(const uint8_t *p, size_t n)
{
	struct tfs_s3_list_cb cb = {.object = s3_object};
	struct tfs_diag d;
	char next[64], code[64];
	int truncated;
	tfs_err e = tfs_s3_parse_list((const char *)p, n, &cb, &truncated, next, sizeof next, &d);
	if (e == TFS_OK && truncated && !*next)
		abort();
	if (e)
		one_line(&d);
	tfs_s3_error_code((const char *)p, n, code, sizeof code);
	if (strnlen(code, sizeof code) == sizeof code)
		abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (size < 1)
		return 0;
	switch (data[0] % 6) {
	case 0:
		headers(data + 1, size - 1);
		break;
	case 1:
		tree(data + 1, size - 1);
		break;
	case 2:
		revision(data + 1, size - 1);
		break;
	case 3:
		ref(data + 1, size - 1);
		break;
	case 4:
		ini(data + 1, size - 1);
		break;
	default:
		s3(data + 1, size - 1);
		break;
	}
	return 0;
}
