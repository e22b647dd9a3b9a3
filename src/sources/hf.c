/* hf://[models/|datasets/]ORG/REPO[@REV][/PATH]: a Hugging Face Hub
 * repository, pinned to one commit for the life of the mount.
 *
 * The revision is resolved once (a commit id is taken as it is; otherwise
 * X-Repo-Commit of the file's HEAD, or the revision API for a whole
 * repository). Files are found with HEAD /resolve/{commit}/PATH without
 * following redirects: the Hub answers with the size and ETag of the bytes
 * (X-Linked-Size, X-Linked-Etag) and where they are (Location, the CDN),
 * and the reads go there directly. The token goes to the Hub's own host
 * only, never to the CDN. A file that the local Hugging Face cache already
 * holds for that commit is read from there, with no network. */
#include <errno.h>
#include <pthread.h>
#include <unistd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <dirent.h>

#include "sources/hflocal.h"
#include "sources/hub.h"
#include "core/json.h"
#include "core/url.h"
#include "sources/remote.h"

#define LISTING_PAGE_MAX (32u << 20) /* bytes of one page of the tree listing */
#define REDIRECTS_MAX 5

struct hf_store {
	struct tfs_store base;
	struct tfs_hub_ref ref;
	char *endpoint;   /* without a trailing '/' */
	char origin[512]; /* scheme://host[:port] of the endpoint */
	char *auth;       /* "Authorization: Bearer ...", or NULL */
	char commit[41];
	int offline;
	int no_answer;            /* a request got no answer at all (not an HTTP error) */
	char *snapshot;           /* the cache's snapshots/<commit>, when it exists */
	char *root;               /* the directory PATH named ("" or "sub/") */
	struct tfs_dirlist files; /* the repository at the commit */
	int listed;
	int said_no_oid;      /* the line of no_lfs_oid(), said once */
	pthread_mutex_t lock; /* relocations (files open in parallel) */
	struct relocation *relocations;
};

static int same_origin(const struct hf_store *hs, const char *url)
{
	size_t n = strlen(hs->origin);
	return strncasecmp(url, hs->origin, n) == 0 && (url[n] == '/' || url[n] == 0 || url[n] == '?');
}

/* ---- URLs ---- */

static tfs_err put_path(char **u, size_t *len, size_t *cap, const char *path)
{
	tfs_err e = TFS_OK;
	for (const char *p = path; !e && *p;) {
		size_t seg = strcspn(p, "/");
		e = tfs_http_escape(p, seg, u, len, cap);
		p += seg;
		if (!e && *p == '/') {
			e = tfs_json_put(u, len, cap, "/", 1);
			p++;
		}
	}
	return e;
}

/* {endpoint}/[datasets/]ORG/REPO/resolve/{rev}/{path} */
static char *resolve_url(const struct hf_store *hs, const char *rev, const char *path)
{
	char *u = NULL;
	size_t len = 0, cap = 0;
	int ds = strcmp(hs->ref.type, "datasets") == 0;
	if (tfs_json_puts(&u, &len, &cap, hs->endpoint) ||
	    tfs_json_puts(&u, &len, &cap, ds ? "/datasets/" : "/") ||
	    tfs_json_puts(&u, &len, &cap, hs->ref.repo) || tfs_json_puts(&u, &len, &cap, "/resolve/") ||
	    tfs_http_escape(rev, strlen(rev), &u, &len, &cap) || tfs_json_put(&u, &len, &cap, "/", 1) ||
	    put_path(&u, &len, &cap, path)) {
		free(u);
		return NULL;
	}
	return u;
}

/* {endpoint}/api/{type}/ORG/REPO/{what}/{rev}[?query] */
static char *api_url(const struct hf_store *hs, const char *what, const char *rev, const char *query)
{
	char *u = NULL;
	size_t len = 0, cap = 0;
	if (tfs_json_puts(&u, &len, &cap, hs->endpoint) || tfs_json_puts(&u, &len, &cap, "/api/") ||
	    tfs_json_puts(&u, &len, &cap, hs->ref.type) || tfs_json_put(&u, &len, &cap, "/", 1) ||
	    tfs_json_puts(&u, &len, &cap, hs->ref.repo) || tfs_json_put(&u, &len, &cap, "/", 1) ||
	    tfs_json_puts(&u, &len, &cap, what) || tfs_json_put(&u, &len, &cap, "/", 1) ||
	    tfs_http_escape(rev, strlen(rev), &u, &len, &cap) ||
	    (query && tfs_json_puts(&u, &len, &cap, query))) {
		free(u);
		return NULL;
	}
	return u;
}

/* The repository as the user names it: datasets keep their "datasets/". */
static const char *repo_shown(const struct hf_store *hs, char *buf, size_t n)
{
	snprintf(buf, n, "%s%s", strcmp(hs->ref.type, "datasets") == 0 ? "datasets/" : "", hs->ref.repo);
	return buf;
}

/* No answer came (a name that does not resolve, a refused connection, a
 * timeout): say that, and where the Hub was looked for. */
static tfs_err no_answer(struct hf_store *hs, tfs_err e, const char *what, struct tfs_diag *d)
{
	hs->no_answer = 1;
	char why[sizeof d->msg], ep[512];
	snprintf(why, sizeof why, "%s", d->msg);
	tfs_url_redact(hs->endpoint, ep, sizeof ep);
	return tfs_fail(d, e, "no answer from the Hub at %s for %s: %s", ep, what, why);
}

/* What an HTTP status from the Hub means, as one line. */
static tfs_err hub_status(const struct hf_store *hs, long status, const char *what, struct tfs_diag *d)
{
	switch (status) {
	case 401:
		return tfs_fail(
			d, TFS_ERR_OPEN,
			hs->auth
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

struct head {
	long status;
	char *url; /* where the bytes are: the CDN, or the Hub */
	char etag[TFS_HTTP_ETAG_MAX + 1];
	char commit[64];
	int has_size;
	uint64_t size;
	/* X-Linked-Size came (the Hub stores the file with LFS) without an
	 * X-Linked-Etag: something on the way dropped the latter */
	int lfs, linked_etag;
};

/* HEAD of a file at the Hub, following its relative redirects (a renamed
 * repository) but not the one to the CDN, which says where the bytes are. */
static tfs_err head_file(struct hf_store *hs, const char *rev, const char *full, struct head *h,
			 struct tfs_diag *d)
{
	char *url = resolve_url(hs, rev, full);
	memset(h, 0, sizeof *h);
	if (!url)
		return tfs_fail(d, TFS_ERR_NOMEM, "out of memory");
	for (int hop = 0;; hop++) {
		struct tfs_http_req rq = {
			.url = url, .head = 1, .auth = same_origin(hs, url) ? hs->auth : NULL};
		struct tfs_http_resp rs;
		enum tfs_http_fail f;
		tfs_err e = tfs_http_fetch(&rq, &rs, &f, d);
		h->status = rs.status;
		if (e && f != TFS_HTTP_STATUS) {
			free(url);
			return f == TFS_HTTP_NET || f == TFS_HTTP_NONAME ? no_answer(hs, e, full, d) : e;
		}
		if (rs.status >= 400) {
			free(url);
			return hub_status(hs, rs.status, full, d);
		}
		if (rs.status >= 300 && rs.status < 400) {
			if (!*rs.location || hop >= REDIRECTS_MAX) {
				free(url);
				return tfs_fail(d, TFS_ERR_OPEN, "%s: %s", full,
						*rs.location ? "too many redirects from the Hub"
							     : "a redirect without a Location");
			}
			char *next;
			if (rs.location[0] == '/') {
				size_t n = strlen(hs->origin) + strlen(rs.location) + 1;
				next = malloc(n);
				if (next)
					snprintf(next, n, "%s%s", hs->origin, rs.location);
			} else if (strncasecmp(rs.location, "https://", 8) == 0 ||
				   strncasecmp(rs.location, "http://", 7) == 0) {
				next = strdup(rs.location);
			} else {
				free(url);
				return tfs_fail(
					d, TFS_ERR_OPEN,
					"%s: the Hub redirects to something that is not an http(s) URL",
					full);
			}
			if (!next) {
				free(url);
				return tfs_fail(d, TFS_ERR_NOMEM, "out of memory");
			}
			free(url);
			url = next;
			/* The Hub's own answers carry the file's facts; a hop on
			 * its host may carry them too. */
			if (*rs.linked_etag && !*h->etag)
				snprintf(h->etag, sizeof h->etag, "%s", rs.linked_etag);
			if (rs.has_linked_size && !h->has_size) {
				h->has_size = 1;
				h->size = rs.linked_size;
			}
			h->lfs |= rs.has_linked_size;
			h->linked_etag |= *rs.linked_etag != 0;
			if (*rs.repo_commit && !*h->commit)
				snprintf(h->commit, sizeof h->commit, "%s", rs.repo_commit);
			if (!same_origin(hs, url))
				break; /* the CDN: the bytes are there */
			continue;
		}
		/* 200: the Hub serves the file itself (not stored with LFS). */
		if (!*h->etag)
			snprintf(h->etag, sizeof h->etag, "%s", *rs.linked_etag ? rs.linked_etag : rs.etag);
		if (!h->has_size && (rs.has_linked_size || rs.has_length)) {
			h->has_size = 1;
			h->size = rs.has_linked_size ? rs.linked_size : rs.length;
		}
		h->lfs |= rs.has_linked_size;
		h->linked_etag |= *rs.linked_etag != 0;
		if (*rs.repo_commit && !*h->commit)
			snprintf(h->commit, sizeof h->commit, "%s", rs.repo_commit);
		break;
	}
	h->url = url;
	return TFS_OK;
}

/* GET of an API document, bounded; next gets the Link rel="next" URL. */
static tfs_err api_get(struct hf_store *hs, const char *url, const char *what, char **body, size_t *len,
		       char *next, size_t nextsz, struct tfs_diag *d)
{
	struct tfs_http_req rq = {
		.url = url,
		.follow = 0,
		.auth = same_origin(hs, url) ? hs->auth : NULL,
		.body = body,
		.bodylen = len,
		.body_max = LISTING_PAGE_MAX,
	};
	struct tfs_http_resp rs;
	enum tfs_http_fail f;
	*body = NULL;
	tfs_err e = tfs_http_fetch(&rq, &rs, &f, d);
	if (e && f == TFS_HTTP_STATUS) {
		free(*body);
		*body = NULL;
		return hub_status(hs, rs.status, what, d);
	}
	if (e) {
		free(*body);
		*body = NULL;
		return f == TFS_HTTP_NET || f == TFS_HTTP_NONAME ? no_answer(hs, e, what, d) : e;
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
static tfs_err list_repo(struct hf_store *hs, struct tfs_diag *d)
{
	if (hs->listed)
		return TFS_OK;
	char *url = api_url(hs, "tree", hs->commit, "?recursive=true");
	static char next[TFS_HTTP_URL_MAX];
	tfs_err e = url ? TFS_OK : tfs_fail(d, TFS_ERR_NOMEM, "out of memory");
	uint64_t bytes = 0;
	for (unsigned page = 0; !e && url; page++) {
		char *body;
		size_t len;
		if (page >= TFS_LISTING_PAGES_MAX) {
			e = tfs_fail(d, TFS_ERR_FORMAT, "the Hub's tree listing goes on past %u pages",
				     TFS_LISTING_PAGES_MAX);
			break;
		}
		e = api_get(hs, url, "the repository listing", &body, &len, next, sizeof next, d);
		if (!e)
			e = tfs_hub_parse_tree(body, len, &hs->files, d);
		free(body);
		bytes += len;
		if (!e && (hs->files.n > TFS_LISTING_ENTRIES_MAX || bytes > TFS_LISTING_BYTES_MAX))
			e = tfs_fail(d, TFS_ERR_FORMAT,
				     "the Hub's tree listing goes on past %s (%u pages so far)",
				     hs->files.n > TFS_LISTING_ENTRIES_MAX ? "1,000,000 files" : "512 MiB",
				     page + 1);
		free(url);
		url = NULL;
		if (!e && *next) {
			/* Pages come from the Hub itself: a next link elsewhere
			 * would take the token with it. */
			if (!same_origin(hs, next))
				e = tfs_fail(d, TFS_ERR_FORMAT,
					     "the Hub's listing points its next page at another host");
			else if (!(url = strdup(next)))
				e = tfs_fail(d, TFS_ERR_NOMEM, "out of memory");
		}
	}
	free(url);
	hs->listed = !e;
	return e;
}

/* ---- the store ---- */

/* What a source needs to find its bytes again when a signed CDN URL
 * expires; kept with the store, which outlives its sources. */
struct relocation {
	struct hf_store *hs;
	char *full;
	struct relocation *next;
};

/* An LFS file's ETag (X-Linked-Etag, and the blob's name in the HF cache)
 * is its SHA-256, the LFS oid; a plain git file's is its git blob id (40
 * hex digits), which vouches for nothing here. */
static void lfs_oid(struct tfs_source *s)
{
	const char *e = s->etag;
	if (!e)
		return;
	if (strncmp(e, "W/", 2) == 0)
		return; /* weak: not the bytes' hash */
	e += *e == '"';
	size_t n = strspn(e, "0123456789abcdef");
	if (n == 64 && (e[64] == 0 || (e[64] == '"' && e[65] == 0))) {
		memcpy(s->sha256, e, 64);
		s->sha256[64] = 0;
	}
}

/* An LFS file (the Hub said its X-Linked-Size) whose answer had no
 * X-Linked-Etag: a cache or proxy in front of the Hub dropped it. The
 * bytes are still pinned by their ETag, but --verify cannot check them
 * against the LFS oid: said once, rather than let --verify pass over them
 * in silence. */
static void no_lfs_oid(struct hf_store *hs, const char *name)
{
	if (__atomic_exchange_n(&hs->said_no_oid, 1, __ATOMIC_RELAXED))
		return;
	char path[TFS_QPATH_MAX], q[TFS_QPATH_MAX];
	snprintf(path, sizeof path, "%s%s", hs->base.prefix ? hs->base.prefix : "", name);
	tfs_log("%s: warning: %s gives no X-Linked-Etag (the LFS sha256) for this LFS file; a cache or proxy in front of the Hub that drops it? --verify cannot check such files against the Hub's hash",
		tfs_quote_path(q, sizeof q, path), hs->endpoint);
}

static tfs_err relocate(void *ctx, char **url, struct tfs_diag *d)
{
	struct relocation *r = ctx;
	struct head h;
	tfs_err e = head_file(r->hs, r->hs->commit, r->full, &h, d);
	if (!e)
		*url = h.url;
	return e;
}

static tfs_err store_open(struct tfs_store *st, const char *name, struct tfs_source **out, struct tfs_diag *d)
{
	struct hf_store *hs = (struct hf_store *)st;
	size_t n = strlen(hs->root) + strlen(name) + 1;
	char *full = malloc(n);
	tfs_err e = TFS_OK;
	if (!full)
		return tfs_fail(d, TFS_ERR_NOMEM, "out of memory");
	snprintf(full, n, "%s%s", hs->root, name);
	char *loc = resolve_url(hs, hs->commit, full);
	if (loc) {
		/* user.source and messages: no user:password@ of the endpoint */
		size_t ln = strlen(loc) + 1;
		char *shown = malloc(ln);
		if (shown)
			tfs_url_redact(loc, shown, ln);
		free(loc);
		loc = shown;
	}
	int has_size = 0, lfs = 0;
	uint64_t size = 0;
	for (size_t i = 0; hs->listed && i < hs->files.n; i++)
		if (strcmp(hs->files.name[i], full) == 0) {
			has_size = 1;
			size = hs->files.size[i];
		}
	char *local = loc ? tfs_hf_cached(hs->snapshot, full, &has_size, &size) : NULL;
	if (!loc) {
		e = tfs_fail(d, TFS_ERR_NOMEM, "out of memory");
	} else if (local) {
		/* Already downloaded for this commit: no network at all. The
		 * blob's name is its ETag in the cache's layout. */
		e = tfs_source_open_path(local, out, d);
		if (!e) {
			char target[4096];
			ssize_t k = readlink(local, target, sizeof target - 1);
			const char *blob = NULL;
			if (k > 0) {
				target[k] = 0;
				blob = strrchr(target, '/') ? strrchr(target, '/') + 1 : target;
			}
			free((*out)->location);
			(*out)->location = strdup(loc);
			(*out)->revision = strdup(hs->commit);
			(*out)->etag = blob ? strdup(blob) : NULL;
			if (!(*out)->location || !(*out)->revision) {
				tfs_source_close(*out);
				e = tfs_fail(d, TFS_ERR_NOMEM, "out of memory");
			}
		}
	} else if (hs->offline) {
		e = tfs_fail(d, TFS_ERR_NOENT,
			     "HF_HUB_OFFLINE=1, and the Hugging Face cache does not hold %s at commit %s",
			     full, hs->commit);
	} else {
		struct head h;
		e = head_file(hs, hs->commit, full, &h, d);
		lfs = !e && h.lfs && !h.linked_etag;
		if (!e && *h.commit && strcmp(h.commit, hs->commit) != 0)
			e = tfs_fail(d, TFS_ERR_OPEN, "the Hub served commit %s for %s, not the pinned %s",
				     h.commit, full, hs->commit);
		if (!e && has_size && h.has_size && h.size != size)
			e = tfs_fail(d, TFS_ERR_OPEN, "the Hub's listing and HEAD disagree on the size of %s",
				     full);
		struct relocation *rl = e ? NULL : calloc(1, sizeof *rl);
		if (!e && (!rl || !(rl->full = strdup(full))))
			e = tfs_fail(d, TFS_ERR_NOMEM, "out of memory");
		if (!e) {
			rl->hs = hs;
			struct tfs_remote_spec s = {
				.url = h.url,
				.location = loc,
				.auth = same_origin(hs, h.url) ? hs->auth : NULL,
				.etag = *h.etag ? h.etag : NULL,
				.revision = hs->commit,
				.has_size = h.has_size,
				.size = h.size,
				.relocate = same_origin(hs, h.url) ? NULL : relocate,
				.relocate_ctx = rl,
			};
			e = tfs_remote_open(&s, out, d);
			if (!e) {
				pthread_mutex_lock(&hs->lock);
				rl->next = hs->relocations;
				hs->relocations = rl;
				pthread_mutex_unlock(&hs->lock);
				rl = NULL;
			}
		}
		if (rl) {
			free(rl->full);
			free(rl);
		}
		free(h.url);
	}
	if (!e) {
		lfs_oid(*out);
		if (lfs)
			no_lfs_oid(hs, name);
	}
	free(local);
	free(loc);
	free(full);
	return e;
}

static int fall_back(struct hf_store *hs, const char *repo_dir, const char *spec, struct tfs_diag *d);

static tfs_err store_list(struct tfs_store *st, const char *dir, struct tfs_dirlist *out, struct tfs_diag *d)
{
	struct hf_store *hs = (struct hf_store *)st;
	char prefix[4200];
	snprintf(prefix, sizeof prefix, "%s%s", hs->root, dir);
	size_t pl = strlen(prefix);
	if (hs->offline) {
		char path[8400];
		snprintf(path, sizeof path, "%s/%s", hs->snapshot ? hs->snapshot : "/nonexistent", prefix);
		DIR *dd = opendir(path);
		if (!dd)
			return tfs_fail(
				d, TFS_ERR_NOENT,
				"HF_HUB_OFFLINE=1, and the Hugging Face cache has no snapshot of commit %s",
				hs->commit);
		struct dirent *de;
		tfs_err e = TFS_OK;
		while (!e && (de = readdir(dd))) {
			struct stat s;
			if (de->d_name[0] == '.' || fstatat(dirfd(dd), de->d_name, &s, 0) != 0 ||
			    !S_ISREG(s.st_mode))
				continue;
			if (tfs_dirlist_add(out, de->d_name, (uint64_t)s.st_size))
				e = tfs_fail(d, TFS_ERR_NOMEM, "out of memory");
		}
		closedir(dd);
		return e;
	}
	tfs_err e = list_repo(hs, d);
	if (e && fall_back(hs, NULL, hs->base.location, d))
		return store_list(st, dir, out, d);
	for (size_t i = 0; !e && i < hs->files.n; i++) {
		const char *p = hs->files.name[i];
		if (strncmp(p, prefix, pl) != 0)
			continue;
		const char *slash = strchr(p + pl, '/');
		if (slash ? tfs_dirlist_add_dir(out, p + pl, (size_t)(slash - (p + pl)))
			  : tfs_dirlist_add(out, p + pl, hs->files.size[i]))
			e = tfs_fail(d, TFS_ERR_NOMEM, "out of memory");
	}
	return e;
}

static void store_close(struct tfs_store *st)
{
	struct hf_store *hs = (struct hf_store *)st;
	for (struct relocation *r = hs->relocations, *next; r; r = next) {
		next = r->next;
		free(r->full);
		free(r);
	}
	pthread_mutex_destroy(&hs->lock);
	free(hs->endpoint);
	free(hs->auth);
	free(hs->snapshot);
	free(hs->root);
	tfs_dirlist_free(&hs->files);
	free(hs->base.prefix);
	free(hs->base.location);
	free(hs);
}

static const struct tfs_store_ops hf_store_ops = {
	.open = store_open,
	.list = store_list,
	.close = store_close,
};

/* ---- the driver ---- */

static int claims(const char *spec)
{
	return strncmp(spec, "hf://", 5) == 0;
}

/* The Hub gave no answer (not an HTTP error: no name, no connection, no
 * byte), but the Hugging Face cache may hold the revision's snapshot: go
 * on from it, as huggingface_hub does, with one warning. 1 when the store
 * is offline now (call pin() again); 0 leaves *d as it was. */
static int fall_back(struct hf_store *hs, const char *repo_dir, const char *spec, struct tfs_diag *d)
{
	if (hs->offline || !hs->no_answer || (!repo_dir && !hs->snapshot))
		return 0;
	char sha[64] = "", p[4600];
	const char *rev = hs->ref.rev;
	if (hs->snapshot) {
		/* pinned already, and its snapshot is there */
		snprintf(sha, sizeof sha, "%s", hs->commit);
		snprintf(p, sizeof p, "%s", hs->snapshot);
	} else if (tfs_hub_is_commit(rev)) {
		snprintf(sha, sizeof sha, "%.40s", rev); /* a commit: 40 hex digits */
	} else {
		tfs_hf_cached_ref(repo_dir, rev, sha, sizeof sha);
	}
	struct stat st;
	if (!hs->snapshot)
		snprintf(p, sizeof p, "%s/snapshots/%s", repo_dir, sha);
	if (!tfs_hub_is_commit(sha) || stat(p, &st) != 0 || !S_ISDIR(st.st_mode))
		return 0;
	char q[TFS_QPATH_MAX];
	tfs_log("%s: warning: %s; using the Hugging Face cache's snapshot of %.12s",
		tfs_quote_path(q, sizeof q, spec), d->msg, sha);
	hs->offline = 1;
	free(hs->auth);
	hs->auth = NULL;
	return 1;
}

/* The commit REV names, pinned once. */
static tfs_err pin(struct hf_store *hs, const char *repo_dir, int *path_is_file, struct tfs_diag *d)
{
	const char *rev = hs->ref.rev;
	*path_is_file = -1; /* unknown */
	if (tfs_hub_is_commit(rev)) {
		memcpy(hs->commit, rev, 41);
		return TFS_OK;
	}
	if (hs->offline) {
		char sha[64];
		tfs_hf_cached_ref(repo_dir, rev, sha, sizeof sha);
		if (!tfs_hub_is_commit(sha))
			return tfs_fail(
				d, TFS_ERR_NOENT,
				"HF_HUB_OFFLINE=1, and the Hugging Face cache does not know revision '%s' of %s",
				rev, repo_shown(hs, (char[300]){0}, 300));
		memcpy(hs->commit, sha, 41);
		return TFS_OK;
	}
	if (*hs->ref.path) {
		/* A file: its HEAD gives the commit (X-Repo-Commit). A
		 * directory has no HEAD: the revision API says instead. */
		struct head h;
		struct tfs_diag hd;
		tfs_err e = head_file(hs, rev, hs->ref.path, &h, &hd);
		free(h.url);
		if (!e && tfs_hub_is_commit(h.commit)) {
			memcpy(hs->commit, h.commit, 41);
			*path_is_file = 1;
			return TFS_OK;
		}
		if (e && h.status != 404) {
			*d = hd;
			return e;
		}
	}
	char *url = api_url(hs, "revision", rev, NULL), *body = NULL;
	size_t len;
	if (!url)
		return tfs_fail(d, TFS_ERR_NOMEM, "out of memory");
	char what[600], rn[300];
	snprintf(what, sizeof what, "revision '%s' of %s", rev, repo_shown(hs, rn, sizeof rn));
	tfs_err e = api_get(hs, url, what, &body, &len, NULL, 0, d);
	free(url);
	if (!e)
		e = tfs_hub_parse_revision(body, len, hs->commit, d);
	free(body);
	return e;
}

/* The Hub's address: -o hf_endpoint=, HF_ENDPOINT, else huggingface.co;
 * and its origin, the only place the token goes. */
static tfs_err set_endpoint(struct hf_store *hs, const struct tfs_opts *o, struct tfs_diag *d)
{
	const char *ep = tfs_opts_get(o, "hf_endpoint");
	if (!ep || !*ep)
		ep = getenv("HF_ENDPOINT");
	hs->endpoint = strdup(ep && *ep ? ep : "https://huggingface.co");
	if (!hs->endpoint)
		return tfs_fail(d, TFS_ERR_NOMEM, "out of memory");
	for (size_t n = strlen(hs->endpoint); n && hs->endpoint[n - 1] == '/'; n--)
		hs->endpoint[n - 1] = 0;
	if (strncasecmp(hs->endpoint, "https://", 8) != 0 && strncasecmp(hs->endpoint, "http://", 7) != 0)
		return tfs_fail(d, TFS_ERR_INVAL, "HF_ENDPOINT must be an http(s) URL");
	const char *host = strstr(hs->endpoint, "://") + 3;
	size_t ol = (size_t)(host - hs->endpoint) + strcspn(host, "/?#");
	if (ol >= sizeof hs->origin)
		return tfs_fail(d, TFS_ERR_INVAL, "HF_ENDPOINT is too long");
	memcpy(hs->origin, hs->endpoint, ol);
	return TFS_OK;
}

/* Whether PATH names a file (1) or a directory (0): the cache says,
 * offline (or once the Hub gave no answer), else the listing. */
static tfs_err path_kind(struct hf_store *hs, const char *repo_dir, const char *spec, int *is_file,
			 struct tfs_diag *d)
{
	tfs_err e = hs->offline ? TFS_OK : list_repo(hs, d);
	if (hs->offline || (e && fall_back(hs, repo_dir, spec, d))) {
		int hsz = 0;
		uint64_t sz = 0;
		char *p = tfs_hf_cached(hs->snapshot, hs->ref.path, &hsz, &sz);
		*is_file = p != NULL;
		free(p);
		return TFS_OK;
	}
	if (e)
		return e;
	*is_file = 0;
	for (size_t i = 0; i < hs->files.n; i++)
		if (strcmp(hs->files.name[i], hs->ref.path) == 0)
			*is_file = 1;
	return TFS_OK;
}

static tfs_err resolve(const char *spec, const struct tfs_opts *o, struct tfs_store **out, char **target,
		       struct tfs_diag *d)
{
	tfs_err e = tfs_remote_configure(o, d);
	if (e)
		return e;
	struct hf_store *hs = calloc(1, sizeof *hs);
	char *home = tfs_hf_home(), *repo_dir = NULL;
	*target = NULL;
	if (!hs || !home) {
		free(hs);
		free(home);
		return tfs_fail(d, TFS_ERR_NOMEM, "out of memory");
	}
	hs->base.ops = &hf_store_ops;
	pthread_mutex_init(&hs->lock, NULL);
	if ((e = tfs_hub_parse_ref(spec, &hs->ref, d)))
		goto fail;
	if ((e = set_endpoint(hs, o, d)))
		goto fail;
	const char *off = getenv("HF_HUB_OFFLINE");
	hs->offline = off && (strcmp(off, "1") == 0 || strcasecmp(off, "true") == 0 ||
			      strcasecmp(off, "yes") == 0 || strcasecmp(off, "on") == 0);
	/* A token file given is checked even offline, where no token is sent. */
	const char *tf = tfs_opts_get(o, "token_file");
	if ((!hs->offline || (tf && *tf)) && (e = tfs_hf_token(home, tf, &hs->auth, d)))
		goto fail;
	if (hs->offline) {
		free(hs->auth);
		hs->auth = NULL;
	}
	repo_dir = tfs_hf_cache_repo_dir(&hs->ref, home);
	int path_is_file;
	if ((e = pin(hs, repo_dir, &path_is_file, d)) && !fall_back(hs, repo_dir, spec, d))
		goto fail;
	if (e && (e = pin(hs, repo_dir, &path_is_file, d)))
		goto fail;
	if (repo_dir) {
		size_t n = strlen(repo_dir) + 64;
		char *snap = malloc(n);
		struct stat st;
		if (snap) {
			snprintf(snap, n, "%s/snapshots/%s", repo_dir, hs->commit);
			if (stat(snap, &st) == 0 && S_ISDIR(st.st_mode))
				hs->snapshot = snap;
			else
				free(snap);
		}
	}
	if (*hs->ref.path && path_is_file < 0 && (e = path_kind(hs, repo_dir, spec, &path_is_file, d)))
		goto fail;
	if (path_is_file == 1) {
		const char *slash = strrchr(hs->ref.path, '/');
		hs->root = strndup(hs->ref.path, slash ? (size_t)(slash - hs->ref.path) + 1 : 0);
		*target = strdup(slash ? slash + 1 : hs->ref.path);
	} else {
		size_t n = strlen(hs->ref.path);
		hs->root = malloc(n + 2);
		if (hs->root)
			snprintf(hs->root, n + 2, "%s%s", hs->ref.path, n ? "/" : "");
	}
	/* Messages name files as hf://ORG/REPO@COMMIT/PATH; user.source is
	 * the resolve URL at the commit. */
	char pre[4600];
	snprintf(pre, sizeof pre, "hf://%s%s@%s/%s", strcmp(hs->ref.type, "datasets") == 0 ? "datasets/" : "",
		 hs->ref.repo, hs->commit, hs->root ? hs->root : "");
	hs->base.prefix = strdup(pre);
	hs->base.location = strdup(spec);
	if (!hs->root || !hs->base.prefix || !hs->base.location || (path_is_file == 1 && !*target)) {
		e = tfs_fail(d, TFS_ERR_NOMEM, "out of memory");
		goto fail;
	}
	free(home);
	free(repo_dir);
	*out = &hs->base;
	return TFS_OK;
fail:
	free(*target);
	*target = NULL;
	free(home);
	free(repo_dir);
	store_close(&hs->base);
	return e;
}

/* What an fstab line cannot say through the environment. */
static const struct tfs_opt_spec hf_opts[] = {
	{"hf_endpoint", 1, "hf: the Hub's address (or HF_ENDPOINT)", "URL", TFS_OPT_URL},
	{"token_file", 1, "hf: a file holding the Hub token (else HF_TOKEN, $HF_HOME/token)", "PATH",
	 TFS_OPT_PATH},
	{NULL, 0, NULL, NULL, 0},
};

static const struct tfs_opt_spec hf_env[] = {
	TFS_REMOTE_ENV,
	{"HF_ENDPOINT", 1, NULL, NULL, TFS_OPT_URL},
	{"HF_HOME", 1, NULL, NULL, TFS_OPT_PATH},
	{"HF_HUB_CACHE", 1, NULL, NULL, TFS_OPT_PATH},
	{"XDG_CACHE_HOME", 1, NULL, NULL, TFS_OPT_PATH},
	{NULL, 0, NULL, NULL, 0},
};

const struct tfs_source_driver tfs_source_hf = {
	.name = "hf",
	.schemes = "hf://",
	.usage = "hf://ORG/REPO[@REV][/PATH] (the Hugging Face Hub)",
	.env_help =
		"HF_TOKEN (or HUGGING_FACE_HUB_TOKEN), HF_ENDPOINT, HF_HOME, HF_HUB_CACHE, HF_HUB_OFFLINE",
	.claims = claims,
	.resolve = resolve,
	.opts = hf_opts,
	.env = hf_env,
	.shared_opts = tfs_remote_opts,
	.start = tfs_remote_start,
	.stop = tfs_remote_stop,
	.warm = tfs_remote_warm,
	.counters = tfs_remote_counters,
	.notice = tfs_remote_notice,
};
