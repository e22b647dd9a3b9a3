/* The Hub's answer to GET /api/{type}/REPO/xet-read-token/REV: the token
 * a reader of the repository's Xet files sends to the CAS, when it
 * expires, and where the CAS is ({"accessToken", "exp", "casUrl"}).
 *
 * Strict, for bytes off the network: the token is printable ASCII with no
 * space (it goes into a header line), the CAS's URL http or https with a
 * host, no user or password, no query or fragment, no space or control
 * character; exp a whole number of seconds. */
#ifndef TFS_XETTOKEN_H
#define TFS_XETTOKEN_H

#include <stddef.h>
#include <stdint.h>

#include "core/err.h"

#define TFS_XET_TOKEN_MAX 4096
#define TFS_XET_CAS_URL_MAX 1024

struct tfs_xet_token {
	char token[TFS_XET_TOKEN_MAX + 1];
	int64_t exp;                          /* seconds since the epoch */
	char cas[TFS_XET_CAS_URL_MAX + 1];    /* without a trailing '/' */
	char origin[TFS_XET_CAS_URL_MAX + 1]; /* scheme://host[:port] of cas */
};

/* On failure, t holds nothing and d one line. */
tfs_err tfs_xet_token_parse(const char *json, size_t n, struct tfs_xet_token *t, struct tfs_diag *d);

#endif
