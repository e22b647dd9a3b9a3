/* The Hugging Face Hub's HTTP API as the hf:// driver (sources/hf.c)
 * speaks it: its URLs, HEAD of a file (the redirect to the CDN not
 * followed: it says where the bytes are), the API's documents and the
 * repository's listing, each failure as one line; and the token, which
 * goes to the Hub's own host only. */
#ifndef TFS_HFAPI_H
#define TFS_HFAPI_H

#include <stddef.h>
#include <stdint.h>

#include "core/err.h"
#include "core/opts.h"
#include "core/source.h"
#include "core/userfile.h"
#include <pthread.h>
#include "sources/httpc.h"
#include "sources/hub.h"

struct tfs_hf_api {
	struct tfs_http *http; /* the mount's client (its remote layer's) */
	struct tfs_hub_ref ref;
	char *endpoint;   /* without a trailing '/' */
	char origin[512]; /* scheme://host[:port] of the endpoint */
	int no_answer;    /* a request got no answer at all (not an HTTP error) */
	/* The token, as "Authorization: Bearer ...", or NULL; and the file it
	 * was read from (NULL: the environment), read again before a request
	 * to the Hub once it has changed (a token rotated during a mount). */
	pthread_mutex_t auth_lock;
	char *auth;
	char *token_file;
	struct tfs_stamp token_stamp;
	int token_default; /* token_file is $HF_HOME/token, which may be absent */
	int token_said;    /* a new token file that was refused: said once */
};

/* What HEAD of a file at the Hub said. */
struct tfs_hf_head {
	long status;
	char *url; /* where the bytes are: the CDN, or the Hub */
	char etag[TFS_HTTP_ETAG_MAX + 1];
	char commit[64];
	int has_size;
	uint64_t size;
	/* X-Linked-Size came (the Hub stores the file with LFS) without an
	 * X-Linked-Etag: something on the way dropped the latter */
	int lfs, linked_etag;
	/* X-Xet-Hash: the file is stored in Xet, under this hash (as sent, or "") */
	char xet_hash[72];
};

/* The token of the api, read by tfs_hf_token (sources/hflocal.h): auth
 * and the file it came from (both taken; from NULL: the environment). */
void tfs_hf_set_token(struct tfs_hf_api *a, char *auth, char *from, int from_default);
/* Whether the api holds a token now. */
int tfs_hf_has_token(struct tfs_hf_api *a);

/* The Hub's address: -o hf_endpoint=, HF_ENDPOINT, else huggingface.co;
 * and its origin, the only place the token goes. */
tfs_err tfs_hf_set_endpoint(struct tfs_hf_api *a, const struct tfs_opts *o, struct tfs_diag *d);
void tfs_hf_api_free(struct tfs_hf_api *a);

/* Whether url is on the Hub's own host (scheme, host and port). */
int tfs_hf_same_origin(const struct tfs_hf_api *a, const char *url);

/* A tfs_authorize_fn (sources/httpc.h) over a struct tfs_hf_api: the
 * token on requests to the Hub's own host only, never to the CDN. */
tfs_err tfs_hf_authorize(void *ctx, const char *url, struct tfs_http_creds *c, struct tfs_diag *d);

/* {endpoint}/[datasets/]ORG/REPO/resolve/{rev}/{path}; NULL: no memory. */
char *tfs_hf_resolve_url(const struct tfs_hf_api *a, const char *rev, const char *path);
/* {endpoint}/api/{type}/ORG/REPO/{what}/{rev}[?query]; NULL: no memory. */
char *tfs_hf_api_url(const struct tfs_hf_api *a, const char *what, const char *rev, const char *query);
/* The repository as the user names it: datasets keep their "datasets/". */
const char *tfs_hf_repo_shown(const struct tfs_hf_api *a, char *buf, size_t n);

/* HEAD of the file full at rev, following the Hub's relative redirects (a
 * renamed repository) but not the one to the CDN. h->url is the caller's
 * to free (NULL on failure); h->status is the last answer's. */
tfs_err tfs_hf_head(struct tfs_hf_api *a, const char *rev, const char *full, struct tfs_hf_head *h,
		    struct tfs_diag *d);

/* GET of an API document, bounded; next (when not NULL) gets the Link
 * rel="next" URL. *body is the caller's to free. */
tfs_err tfs_hf_api_get(struct tfs_hf_api *a, const char *url, const char *what, char **body, size_t *len,
		       char *next, size_t nextsz, struct tfs_diag *d);

/* The whole repository at commit, page after page, into files. */
tfs_err tfs_hf_list(struct tfs_hf_api *a, const char *commit, struct tfs_dirlist *files, struct tfs_diag *d);

#endif
