#include "core/url.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The '@' that ends the user:password@ of url[0..len) (the last one before
 * the path), or NULL; *host is where the authority starts. */
static const char *userinfo_at(const char *url, size_t len, const char **host)
{
	const char *scheme = memmem(url, len, "://", 3);
	if (!scheme)
		return NULL; /* a path has no credentials */
	*host = scheme + 3;
	const char *end = *host, *at = NULL;
	while (end < url + len && !strchr("/?#", *end))
		end++;
	for (const char *p = *host; p < end; p++)
		if (*p == '@')
			at = p;
	return at;
}

void tfs_url_redact(const char *url, char *out, size_t n)
{
	const char *host, *at = userinfo_at(url, strlen(url), &host);
	if (!at)
		snprintf(out, n, "%s", url);
	else
		snprintf(out, n, "%.*s%s", (int)(host - url), url, at + 1);
}

/* The whole userinfo, not only what follows a ':': a token is often
 * given as the user name alone (http://TOKEN@host/). */
void tfs_url_hide_n(char *url, size_t len)
{
	const char *host, *at = userinfo_at(url, len, &host);
	if (at)
		memset(url + (host - url), '*', (size_t)(at - host));
}

void tfs_url_hide(char *url)
{
	tfs_url_hide_n(url, strlen(url));
}

/* "://userinfo@" of each URL given; written before any thread starts,
 * only read afterwards. */
static char *secrets[TFS_URL_SECRETS_MAX];
static size_t nsecrets;

int tfs_url_secret(const char *url)
{
	const char *host, *at = userinfo_at(url, strlen(url), &host);
	if (!at)
		return 0;
	size_t n = (size_t)(at + 1 - host) + 3;
	for (size_t i = 0; i < nsecrets; i++)
		if (strlen(secrets[i]) == n && memcmp(secrets[i] + 3, host, n - 3) == 0)
			return 0;
	char *s = nsecrets < TFS_URL_SECRETS_MAX ? malloc(n + 1) : NULL;
	if (!s)
		return -1;
	memcpy(s, "://", 3);
	memcpy(s + 3, host, n - 3);
	s[n] = 0;
	secrets[nsecrets++] = s;
	return 0;
}

void tfs_url_scrub(char *msg)
{
	for (size_t i = 0; i < nsecrets; i++) {
		size_t n = strlen(secrets[i]);
		for (char *p = strstr(msg, secrets[i]); p; p = strstr(p + 3, secrets[i]))
			memmove(p + 3, p + n, strlen(p + n) + 1);
		/* A line cut to its buffer may end inside one: cut it before. */
		size_t len = strlen(msg);
		for (size_t k = n - 1; k > 3; k--)
			if (len >= k && memcmp(msg + len - k, secrets[i], k) == 0) {
				msg[len - k + 3] = 0;
				break;
			}
	}
}
