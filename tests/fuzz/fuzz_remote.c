/* libFuzzer target for what remote servers send: HTTP response header
 * lines (Content-Range, Content-Length, Link, the Hub's X-* headers,
 * Retry-After), the Hub's tree listings and revision answers, hf://
 * references, S3 listings and error bodies, and the AWS files' INI syntax.
 * The first byte picks the parser. Besides crashes, leaks and
 * UB it checks what callers rely on: a Content-Range taken is a valid
 * range, every listed path is safe, a commit is 40 hex digits. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "tfs_aws.h"
#include "tfs_http.h"
#include "tfs_hub.h"

static void headers(const uint8_t *p, size_t n)
{
	struct tfs_http_resp rs;
	memset(&rs, 0, sizeof rs);
	size_t start = 0;
	for (size_t i = 0; i <= n; i++) {
		if (i < n && p[i] != '\n')
			continue;
		tfs_http_header_line(&rs, (const char *)p + start, i - start);
		start = i + 1;
		if (rs.has_range == 1 && !(rs.range_start <= rs.range_end && rs.range_end < rs.range_total))
			abort();
		if (strnlen(rs.etag, sizeof rs.etag) == sizeof rs.etag ||
		    strnlen(rs.location, sizeof rs.location) == sizeof rs.location ||
		    strnlen(rs.next_link, sizeof rs.next_link) == sizeof rs.next_link)
			abort(); /* not NUL-terminated */
	}
}

static void tree(const uint8_t *p, size_t n)
{
	struct tfs_dirlist l = {0};
	struct tfs_diag d;
	if (tfs_hub_parse_tree((const char *)p, n, &l, &d) == TFS_OK)
		for (size_t i = 0; i < l.n; i++)
			if (!tfs_hub_safe_path(l.name[i], strlen(l.name[i])))
				abort();
	tfs_dirlist_free(&l);
}

static void revision(const uint8_t *p, size_t n)
{
	char sha[41];
	struct tfs_diag d;
	if (tfs_hub_parse_revision((const char *)p, n, sha, &d) == TFS_OK && !tfs_hub_is_commit(sha))
		abort();
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
	tfs_http_redact(s, red, sizeof red);
	if (strchr(s, '@') == NULL && strcmp(s, red) != 0 && strlen(s) < sizeof red)
		abort(); /* nothing to remove: unchanged */
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
	if (strlen(key) >= 1100 || strlen(etag) >= 256)
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
	if (tfs_s3_parse_list((const char *)p, n, &cb, &truncated, next, sizeof next, &d) == TFS_OK &&
	    truncated && !*next)
		abort();
	tfs_s3_error_code((const char *)p, n, code, sizeof code);
	if (strnlen(code, sizeof code) == sizeof code)
		abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (size < 1)
		return 0;
	switch (data[0] % 6) {
	case 0: headers(data + 1, size - 1); break;
	case 1: tree(data + 1, size - 1); break;
	case 2: revision(data + 1, size - 1); break;
	case 3: ref(data + 1, size - 1); break;
	case 4: ini(data + 1, size - 1); break;
	default: s3(data + 1, size - 1); break;
	}
	return 0;
}
