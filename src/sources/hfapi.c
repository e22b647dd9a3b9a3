/* The Hub's HTTP API (sources/hfapi.h). Everything from the network is
 * hostile input: redirects are bounded and must stay http(s), pages of
 * the listing must come from the Hub itself (a next link elsewhere would
 * take the token with it), and every size is capped. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "core/json.h"
#include "core/url.h"
#include "sources/hfapi.h"

#include "sources/hflocal.h"
#include "sources/remote.h"

#define LISTING_PAGE_MAX (32u << 20) /* bytes of one page of the tree listing */
#define REDIRECTS_MAX 5

int tfs_hf_same_origin(const struct tfs_hf_api *a, const char *url)
{
	size_t n = strlen(a->origin);
	return strncasecmp(url, a->origin, n) == 0 && (url[n] == '/' || url[n] == 0 || url[n] == '?');
}

/* The Hub's credentials (struct tfs_remote_spec, authorize): the token
 * goes to the Hub's own host only, never to the CDN, for the store's
 * requests and its files' alike. */
void tfs_hf_set_token(struct tfs_hf_api *a, char *auth, char *from, int from_default)
{
	pthread_mutex_lock(&a->auth_lock);
	tfs_hf_token_free(a->auth);
	free(a->token_file);
	a->auth = auth;
	a->token_file = from;
	a->token_default = from_default;
	tfs_file_stamp(from, &a->token_stamp);
	pthread_mutex_unlock(&a->auth_lock);
}

int tfs_hf_has_token(struct tfs_hf_api *a)
{
	pthread_mutex_lock(&a->auth_lock);
	int has = a->auth != NULL;
	pthread_mutex_unlock(&a->auth_lock);
	return has;
}

/* The token file changed since it was read (under auth_lock): the token
 * in it now (none when $HF_HOME/token is gone: a logout), or, when it
 * cannot be used (refused, -o token_file= gone), the one read before,
 * with one line said the first time. The stamp of a file not there is
 * all zero, so one that appears is a change too. */
static void reread_token(struct tfs_hf_api *a)
{
	struct tfs_stamp now;
	tfs_file_stamp(a->token_file, &now);
	if (tfs_stamp_same(&now, &a->token_stamp))
		return;
	a->token_stamp = now;
	char *auth = NULL;
	struct tfs_diag d;
	if (tfs_hf_token_file(a->token_file, a->token_default, &auth, &d) == TFS_OK) {
		tfs_hf_token_free(a->auth);
		a->auth = auth;
		a->token_said = 0;
		return;
	}
	if (!a->token_said) {
		a->token_said = 1;
		tfs_log("warning: the Hub token file changed and cannot be used (%s): the token read before is sent until it can",
			d.msg);
	}
}

tfs_err tfs_hf_authorize(void *ctx, const char *url, struct tfs_http_creds *c, struct tfs_diag *d)
{
	struct tfs_hf_api *a = ctx;
	if (!tfs_hf_same_origin(a, url))
		return TFS_OK;
	tfs_err e = TFS_OK;
	pthread_mutex_lock(&a->auth_lock);
	if (a->token_file)
		reread_token(a);
	/* (tfs_hf_token refuses a token too long to carry: a cut one is
	 * never sent.) */
	if (a->auth && strlen(a->auth) >= sizeof c->auth)
		e = tfs_fail(d, TFS_ERR_INVAL, "the Hub token is longer than a request carries (%zu bytes)",
			     (size_t)TFS_HF_TOKEN_MAX);
	else if (a->auth)
		memcpy(c->auth, a->auth, strlen(a->auth) + 1);
	pthread_mutex_unlock(&a->auth_lock);
	return e;
}

/* ---- URLs ---- */

/* {endpoint}/[datasets/]ORG/REPO/resolve/{rev}/{path} */
char *tfs_hf_resolve_url(const struct tfs_hf_api *a, const char *rev, const char *path)
{
	char *u = NULL;
	size_t len = 0, cap = 0;
	int ds = strcmp(a->ref.type, "datasets") == 0;
	if (tfs_json_puts(&u, &len, &cap, a->endpoint) ||
	    tfs_json_puts(&u, &len, &cap, ds ? "/datasets/" : "/") ||
	    tfs_json_puts(&u, &len, &cap, a->ref.repo) || tfs_json_puts(&u, &len, &cap, "/resolve/") ||
	    tfs_http_escape(rev, strlen(rev), &u, &len, &cap) || tfs_json_put(&u, &len, &cap, "/", 1) ||
	    tfs_http_escape_path(path, &u, &len, &cap)) {
		free(u);
		return NULL;
	}
	return u;
}

/* {endpoint}/api/{type}/ORG/REPO/{what}/{rev}[?query] */
char *tfs_hf_api_url(const struct tfs_hf_api *a, const char *what, const char *rev, const char *query)
{
	char *u = NULL;
	size_t len = 0, cap = 0;
	if (tfs_json_puts(&u, &len, &cap, a->endpoint) || tfs_json_puts(&u, &len, &cap, "/api/") ||
	    tfs_json_puts(&u, &len, &cap, a->ref.type) || tfs_json_put(&u, &len, &cap, "/", 1) ||
	    tfs_json_puts(&u, &len, &cap, a->ref.repo) || tfs_json_put(&u, &len, &cap, "/", 1) ||
	    tfs_json_puts(&u, &len, &cap, what) || tfs_json_put(&u, &len, &cap, "/", 1) ||
	    tfs_http_escape(rev, strlen(rev), &u, &len, &cap) ||
	    (query && tfs_json_puts(&u, &len, &cap, query))) {
		free(u);
		return NULL;
	}
	return u;
}

/* The repository as the user names it: datasets keep their "datasets/". */
const char *tfs_hf_repo_shown(const struct tfs_hf_api *a, char *buf, size_t n)
{
	snprintf(buf, n, "%s%s", strcmp(a->ref.type, "datasets") == 0 ? "datasets/" : "", a->ref.repo);
	return buf;
}

/* No answer came (a name that does not resolve, a refused connection, a
 * timeout): say that, and where the Hub was looked for. */
static tfs_err no_answer(struct tfs_hf_api *a, tfs_err e, const char *what, struct tfs_diag *d)
{
	a->no_answer = 1;
	char why[sizeof d->msg], ep[512];
	snprintf(why, sizeof why, "%s", d->msg);
	tfs_url_redact(a->endpoint, ep, sizeof ep);
	return tfs_fail(d, e, "no answer from the Hub at %s for %s: %s", ep, what, why);
}

/* What an HTTP status from the Hub means, as one line. */
static tfs_err hub_status(struct tfs_hf_api *a, long status, const char *what, struct tfs_diag *d)
{
	switch (status) {
	case 401:
		return tfs_fail(
			d, TFS_ERR_OPEN,
			tfs_hf_has_token(a)
				? "the Hub refuses the token for %s (HTTP 401): is it valid?"
				: "the Hub wants a token for %s (HTTP 401: a gated or private repository): set HF_TOKEN",
			what);
	case 403:
		return tfs_fail(
			d, TFS_ERR_OPEN,
			"the Hub denies access to %s (HTTP 403: a gated repository whose terms this account has not accepted?)",
			what);
	case 404:
		return tfs_fail(d, TFS_ERR_NOENT, "%s is not on the Hub (HTTP 404)", what);
	default:
		return tfs_fail(d, TFS_ERR_OPEN, "the Hub answered HTTP %ld for %s", status, what);
	}
}

/* ---- requests ---- */

/* HEAD of a file at the Hub, following its relative redirects (a renamed
 * repository) but not the one to the CDN, which says where the bytes are. */
/* Where a redirect of the Hub's goes: a path on its host, or an http(s)
 * URL; *next is the caller's to free. */
static tfs_err hop_to(const struct tfs_hf_api *a, const char *location, const char *full, char **next,
		      struct tfs_diag *d)
{
	if (location[0] == '/') {
		size_t n = strlen(a->origin) + strlen(location) + 1;
		*next = malloc(n);
		if (*next)
			snprintf(*next, n, "%s%s", a->origin, location);
	} else if (strncasecmp(location, "https://", 8) == 0 || strncasecmp(location, "http://", 7) == 0) {
		*next = strdup(location);
	} else {
		return tfs_fail(d, TFS_ERR_OPEN,
				"%s: the Hub redirects to something that is not an http(s) URL", full);
	}
	return *next ? TFS_OK : tfs_fail(d, TFS_ERR_NOMEM, "out of memory");
}

/* The file's facts an answer carries, the first of each kept: a redirect
 * only in the X-Linked-* headers, the file itself (served, 1) in its own
 * ETag and length too. */
static void take_facts(struct tfs_hf_head *h, const struct tfs_http_resp *rs, int served)
{
	if (!*h->etag && (served || *rs->linked_etag))
		snprintf(h->etag, sizeof h->etag, "%s", *rs->linked_etag ? rs->linked_etag : rs->etag);
	if (!h->has_size && (rs->has_linked_size || (served && rs->has_length))) {
		h->has_size = 1;
		h->size = rs->has_linked_size ? rs->linked_size : rs->length;
	}
	h->lfs |= rs->has_linked_size;
	h->linked_etag |= *rs->linked_etag != 0;
	if (*rs->xet_hash && !*h->xet_hash)
		snprintf(h->xet_hash, sizeof h->xet_hash, "%s", rs->xet_hash);
	if (*rs->repo_commit && !*h->commit)
		snprintf(h->commit, sizeof h->commit, "%s", rs->repo_commit);
}

tfs_err tfs_hf_head(struct tfs_hf_api *a, const char *rev, const char *full, struct tfs_hf_head *h,
		    struct tfs_diag *d)
{
	char *url = tfs_hf_resolve_url(a, rev, full);
	memset(h, 0, sizeof *h);
	if (!url)
		return tfs_fail(d, TFS_ERR_NOMEM, "out of memory");
	for (int hop = 0;; hop++) {
		struct tfs_http_req rq = {
			.url = url, .head = 1, .authorize = tfs_hf_authorize, .auth_ctx = a};
		struct tfs_http_resp rs;
		enum tfs_http_fail f;
		tfs_err e = tfs_http_fetch(a->http, &rq, &rs, &f, d);
		h->status = rs.status;
		if (e && f != TFS_HTTP_STATUS) {
			free(url);
			return f == TFS_HTTP_NET || f == TFS_HTTP_NONAME ? no_answer(a, e, full, d) : e;
		}
		if (rs.status >= 400) {
			free(url);
			return hub_status(a, rs.status, full, d);
		}
		if (rs.status >= 300 && rs.status < 400) {
			if (!*rs.location || hop >= REDIRECTS_MAX) {
				free(url);
				return tfs_fail(d, TFS_ERR_OPEN, "%s: %s", full,
						*rs.location ? "too many redirects from the Hub"
							     : "a redirect without a Location");
			}
			char *next = NULL;
			tfs_err he = hop_to(a, rs.location, full, &next, d);
			free(url);
			if (he)
				return he;
			url = next;
			/* The Hub's own answers carry the file's facts; a hop on
			 * its host may carry them too. */
			take_facts(h, &rs, 0);
			if (!tfs_hf_same_origin(a, url))
				break; /* the CDN: the bytes are there */
			continue;
		}
		/* 200: the Hub serves the file itself (not stored with LFS). */
		take_facts(h, &rs, 1);
		break;
	}
	h->url = url;
	return TFS_OK;
}

/* GET of an API document, bounded; next gets the Link rel="next" URL. */
tfs_err tfs_hf_api_get(struct tfs_hf_api *a, const char *url, const char *what, char **body, size_t *len,
		       char *next, size_t nextsz, struct tfs_diag *d)
{
	struct tfs_http_req rq = {
		.url = url,
		.follow = 0,
		.body = body,
		.bodylen = len,
		.body_max = LISTING_PAGE_MAX,
		.authorize = tfs_hf_authorize,
		.auth_ctx = a,
	};
	struct tfs_http_resp rs;
	enum tfs_http_fail f;
	*body = NULL;
	tfs_err e = tfs_http_fetch(a->http, &rq, &rs, &f, d);
	if (e && f == TFS_HTTP_STATUS) {
		free(*body);
		*body = NULL;
		return hub_status(a, rs.status, what, d);
	}
	if (e) {
		free(*body);
		*body = NULL;
		return f == TFS_HTTP_NET || f == TFS_HTTP_NONAME ? no_answer(a, e, what, d) : e;
	}
	if (rs.status != 200 || !*body) {
		free(*body);
		*body = NULL;
		return tfs_fail(d, TFS_ERR_OPEN, "the Hub answered HTTP %ld for %s", rs.status, what);
	}
	if (next)
		snprintf(next, nextsz, "%s", rs.next_link);
	return TFS_OK;
}

/* The whole repository at the commit, page after page. */
tfs_err tfs_hf_list(struct tfs_hf_api *a, const char *commit, struct tfs_dirlist *files, struct tfs_diag *d)
{
	char *url = tfs_hf_api_url(a, "tree", commit, "?recursive=true");
	char *next = malloc(TFS_HTTP_URL_MAX); /* (too large for a stack) */
	tfs_err e = url && next ? TFS_OK : tfs_fail(d, TFS_ERR_NOMEM, "out of memory");
	uint64_t bytes = 0;
	for (unsigned page = 0; !e && url; page++) {
		char *body;
		size_t len;
		if (page >= TFS_LISTING_PAGES_MAX) {
			e = tfs_fail(d, TFS_ERR_FORMAT, "the Hub's tree listing goes on past %u pages",
				     TFS_LISTING_PAGES_MAX);
			break;
		}
		e = tfs_hf_api_get(a, url, "the repository listing", &body, &len, next, TFS_HTTP_URL_MAX, d);
		if (!e)
			e = tfs_hub_parse_tree(body, len, files, d);
		free(body);
		bytes += len;
		if (!e && (files->n > TFS_LISTING_ENTRIES_MAX || bytes > TFS_LISTING_BYTES_MAX))
			e = tfs_fail(
				d, TFS_ERR_FORMAT, "the Hub's tree listing goes on past %s (%u pages so far)",
				files->n > TFS_LISTING_ENTRIES_MAX ? "1,000,000 files" : "512 MiB", page + 1);
		free(url);
		url = NULL;
		if (!e && *next) {
			/* Pages come from the Hub itself: a next link elsewhere
			 * would take the token with it. */
			if (!tfs_hf_same_origin(a, next))
				e = tfs_fail(d, TFS_ERR_FORMAT,
					     "the Hub's listing points its next page at another host");
			else if (!(url = strdup(next)))
				e = tfs_fail(d, TFS_ERR_NOMEM, "out of memory");
		}
	}
	free(url);
	free(next);
	return e;
}

/* The Hub's address: -o hf_endpoint=, HF_ENDPOINT, else huggingface.co;
 * and its origin, the only place the token goes. */
tfs_err tfs_hf_set_endpoint(struct tfs_hf_api *a, const struct tfs_opts *o, struct tfs_diag *d)
{
	const char *ep = tfs_opts_get(o, "hf_endpoint");
	if (!ep || !*ep)
		ep = getenv("HF_ENDPOINT");
	a->endpoint = strdup(ep && *ep ? ep : "https://huggingface.co");
	if (!a->endpoint)
		return tfs_fail(d, TFS_ERR_NOMEM, "out of memory");
	for (size_t n = strlen(a->endpoint); n && a->endpoint[n - 1] == '/'; n--)
		a->endpoint[n - 1] = 0;
	if (strncasecmp(a->endpoint, "https://", 8) != 0 && strncasecmp(a->endpoint, "http://", 7) != 0)
		return tfs_fail(d, TFS_ERR_INVAL, "HF_ENDPOINT must be an http(s) URL");
	const char *host = strstr(a->endpoint, "://") + 3;
	size_t ol = (size_t)(host - a->endpoint) + strcspn(host, "/?#");
	if (ol >= sizeof a->origin)
		return tfs_fail(d, TFS_ERR_INVAL, "HF_ENDPOINT is too long");
	memcpy(a->origin, a->endpoint, ol);
	return TFS_OK;
}

void tfs_hf_api_free(struct tfs_hf_api *a)
{
	tfs_hf_token_free(a->auth);
	free(a->token_file);
	pthread_mutex_destroy(&a->auth_lock);
	free(a->endpoint);
	a->endpoint = a->auth = NULL;
}
