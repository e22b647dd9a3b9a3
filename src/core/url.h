/* The secrets in URLs the user gives (SOURCE, -o hf_endpoint=, -o
 * endpoint=, HF_ENDPOINT, a proxy...): one redaction for every message and
 * log line, one masking of argv. Which option values and environment
 * variables are URLs is declared where they are (TFS_OPT_URL,
 * core/source.h); the command line hands each to tfs_url_secret and
 * tfs_url_hide once, before anything runs. */
#ifndef TFS_URL_H
#define TFS_URL_H

#include <stddef.h>

/* url as messages may show it: without its user:password@ (or user@).
 * Anything without "://" is copied as it is. */
void tfs_url_redact(const char *url, char *out, size_t n);

/* url's whole user:password@ (or user@: a token may be given as the user
 * name) overwritten with '*' in place, '@' kept: a process's argv is
 * readable by every local user for the life of the mount. */
void tfs_url_hide(char *url);
/* The same for the first len bytes of url (a value inside an -o list). */
void tfs_url_hide_n(char *url, size_t len);

/* Remembers url's user:password@ (or user@), if it has one, so that every
 * message and log line made afterwards leaves it out (tfs_url_scrub, which
 * tfs_fail and tfs_log apply). Called before any thread starts; at most
 * TFS_URL_SECRETS_MAX are kept, the rest refused (-1). */
#define TFS_URL_SECRETS_MAX 32
int tfs_url_secret(const char *url);

/* Takes every remembered "://user:password@" out of msg (NUL-terminated),
 * in place: it becomes "://", as tfs_url_redact writes the URL. */
void tfs_url_scrub(char *msg);

#endif
