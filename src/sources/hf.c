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

#include "sources/hfapi.h"
#include "sources/hflocal.h"
#include "sources/hub.h"
#include "core/url.h"
#include "sources/remote.h"
#include "sources/rlayer.h"
#include "sources/xet.h"
#include "sources/xetcas.h"

struct hf_store {
	struct tfs_store base;
	struct tfs_rlayer *layer; /* the mount's remote layer */
	struct tfs_hf_api api;    /* the repository, the Hub's address, the token */
	char commit[41];
	int offline;
	char *snapshot;           /* the cache's snapshots/<commit>, when it exists */
	char *tree;               /* the repository's cache directory, resolved */
	char *root;               /* the directory PATH named ("" or "sub/") */
	struct tfs_dirlist files; /* the repository at the commit */
	int listed;
	int said_no_oid;      /* the line of no_lfs_oid(), said once */
	pthread_mutex_t lock; /* relocations and cas (files open in parallel) */
	struct relocation *relocations;
	/* Xet (sources/xet.h): -o xet=off; the Hub has none for the
	 * repository (its token endpoint said 404); the CAS's client. */
	int xet_off, no_xet;
	struct tfs_xet_cas *cas;
};

/* The whole repository at the commit, once. */
static tfs_err list_repo(struct hf_store *hs, struct tfs_diag *d)
{
	if (hs->listed)
		return TFS_OK;
	tfs_err e = tfs_hf_list(&hs->api, hs->commit, &hs->files, d);
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
		tfs_quote_path(q, sizeof q, path), hs->api.endpoint);
}

static tfs_err relocate(void *ctx, char **url, struct tfs_diag *d)
{
	struct relocation *r = ctx;
	struct tfs_hf_head h;
	tfs_err e = tfs_hf_head(&r->hs->api, r->hs->commit, r->full, &h, d);
	if (!e)
		*url = h.url;
	return e;
}

/* A file the local Hugging Face cache holds for the commit: no network
 * at all. The blob's name is its ETag in the cache's layout. */
static tfs_err open_cached(struct hf_store *hs, const char *local, const char *loc, struct tfs_source **out,
			   struct tfs_diag *d)
{
	/* A cached file is a link into the repository's blobs/: one that
	 * leads out of the repository's cache directory (planted there, or
	 * in a copied tree) is refused, as -o originals refuses one out of a
	 * local source's tree, so a root mount never serves what it points at.
	 * That directory, resolved once, is the only root: a blobs/ that is
	 * itself a link out of it is refused the same way (taken as a second
	 * root, a blobs/ -> / that another user planted in a shared cache
	 * made every file of the machine the repository's). */
	if (!hs->tree)
		return tfs_fail(d, TFS_ERR_OPEN,
				"the Hugging Face cache's directory of %s cannot be resolved",
				hs->api.ref.repo);
	tfs_err e = tfs_source_open_within(local, hs->tree, out, d);
	if (e == TFS_ERR_INVAL)
		e = TFS_ERR_OPEN; /* the source unreadable (exit 3), its message kept */
	if (e)
		return e;
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
		return tfs_fail(d, TFS_ERR_NOMEM, "out of memory");
	}
	return TFS_OK;
}

/* ---- Xet ---- */

/* The repository's Xet token, asked of the Hub with the Hub's token (the
 * CAS client's tfs_xet_token_fn). */
static tfs_err xet_token(void *ctx, char **body, size_t *len, long *status, struct tfs_diag *d)
{
	struct hf_store *hs = ctx;
	char *url = tfs_hf_api_url(&hs->api, "xet-read-token", hs->commit, NULL), what[400], rn[300];
	if (!url)
		return tfs_fail(d, TFS_ERR_NOMEM, "out of memory");
	snprintf(what, sizeof what, "the Xet token of %s", tfs_hf_repo_shown(&hs->api, rn, sizeof rn));
	tfs_err e = tfs_hf_api_get(&hs->api, url, what, body, len, NULL, 0, d);
	*status = e == TFS_ERR_NOENT ? 404 : 0;
	free(url);
	return e;
}

/* The repository's CAS client, made by the first Xet file. */
static struct tfs_xet_cas *store_cas(struct hf_store *hs)
{
	char rn[300];
	pthread_mutex_lock(&hs->lock);
	if (!hs->cas)
		tfs_xet_cas_new(hs->layer->http, &hs->layer->xet, tfs_hf_repo_shown(&hs->api, rn, sizeof rn),
				xet_token, hs, &hs->cas);
	struct tfs_xet_cas *c = hs->cas;
	pthread_mutex_unlock(&hs->lock);
	return c;
}

/* A file the Hub names by its Xet hash, read from its xorbs; 1 in
 * *lfs_route when it is to be read through the LFS route instead (-o
 * xet=off, no Xet for it at the Hub or its CAS, an empty file). */
static tfs_err open_xet(struct hf_store *hs, const struct tfs_hf_head *h, const char *loc, int *lfs_route,
			struct tfs_source **out, struct tfs_diag *d)
{
	int fallback = 0;
	struct tfs_xet_cas *cas = NULL;
	*lfs_route = hs->xet_off || __atomic_load_n(&hs->no_xet, __ATOMIC_RELAXED) || !h->has_size ||
		     h->size == 0 || !tfs_xet_hash_ok(h->xet_hash);
	if (!*lfs_route && !(cas = store_cas(hs)))
		return tfs_fail(d, TFS_ERR_NOMEM, "out of memory");
	if (*lfs_route)
		return TFS_OK;
	struct tfs_xet_spec xs = {
		.hash = h->xet_hash,
		.size = h->size,
		.location = loc,
		.etag = *h->etag ? h->etag : NULL,
		.revision = hs->commit,
		.cas = cas,
	};
	tfs_err e = tfs_xet_open(hs->layer, &xs, out, &fallback, d);
	if (e && fallback) {
		__atomic_store_n(&hs->no_xet, 1, __ATOMIC_RELAXED);
		*lfs_route = 1;
		return TFS_OK;
	}
	return e;
}

/* A file read from the network: HEAD at the Hub says where its bytes are
 * (the CDN) and which version; the listing's size (has_size, size) must
 * agree. *lfs: an LFS file whose answer lost its X-Linked-Etag. */
static tfs_err open_remote(struct hf_store *hs, const char *full, const char *loc, int has_size,
			   uint64_t size, int *lfs, struct tfs_source **out, struct tfs_diag *d)
{
	struct tfs_hf_head h;
	tfs_err e = tfs_hf_head(&hs->api, hs->commit, full, &h, d);
	*lfs = !e && h.lfs && !h.linked_etag;
	if (!e && *h.commit && strcmp(h.commit, hs->commit) != 0)
		e = tfs_fail(d, TFS_ERR_OPEN, "the Hub served commit %s for %s, not the pinned %s", h.commit,
			     full, hs->commit);
	if (!e && has_size && h.has_size && h.size != size)
		e = tfs_fail(d, TFS_ERR_OPEN, "the Hub's listing and HEAD disagree on the size of %s", full);
	int lfs_route = 1;
	if (!e && *h.xet_hash) {
		e = open_xet(hs, &h, loc, &lfs_route, out, d);
		if (e || !lfs_route) {
			free(h.url);
			return e;
		}
	}
	struct relocation *rl = e ? NULL : calloc(1, sizeof *rl);
	if (!e && (!rl || !(rl->full = strdup(full))))
		e = tfs_fail(d, TFS_ERR_NOMEM, "out of memory");
	if (!e) {
		rl->hs = hs;
		struct tfs_remote_spec s = {
			.url = h.url,
			.location = loc,
			.authorize = tfs_hf_authorize,
			.auth_ctx = &hs->api,
			.etag = *h.etag ? h.etag : NULL,
			.revision = hs->commit,
			.has_size = h.has_size,
			.size = h.size,
			.relocate = tfs_hf_same_origin(&hs->api, h.url) ? NULL : relocate,
			.relocate_ctx = rl,
		};
		e = tfs_remote_open(hs->layer, &s, out, d);
		if (!e) {
			/* (A file of the git repository itself, served by the
			 * Hub, has neither route.) */
			if (h.lfs)
				__atomic_fetch_add(&hs->layer->xet.lfs_files, 1, __ATOMIC_RELAXED);
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
	char *loc = tfs_hf_resolve_url(&hs->api, hs->commit, full);
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
	if (!loc)
		e = tfs_fail(d, TFS_ERR_NOMEM, "out of memory");
	else if (local)
		e = open_cached(hs, local, loc, out, d);
	else if (hs->offline)
		e = tfs_fail(d, TFS_ERR_NOENT,
			     "HF_HUB_OFFLINE=1, and the Hugging Face cache does not hold %s at commit %s",
			     full, hs->commit);
	else
		e = open_remote(hs, full, loc, has_size, size, &lfs, out, d);
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
	tfs_xet_cas_free(hs->cas);
	pthread_mutex_destroy(&hs->lock);
	tfs_hf_api_free(&hs->api);
	free(hs->snapshot);
	free(hs->tree);
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
	if (hs->offline || !hs->api.no_answer || (!repo_dir && !hs->snapshot))
		return 0;
	char sha[64] = "", p[4600];
	const char *rev = hs->api.ref.rev;
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
	/* (The token stays: files opened before are read with it, and
	 * offline, the store sends nothing.) */
	hs->offline = 1;
	return 1;
}

/* The commit REV names, pinned once. */
static tfs_err pin(struct hf_store *hs, const char *repo_dir, int *path_is_file, struct tfs_diag *d)
{
	const char *rev = hs->api.ref.rev;
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
				rev, tfs_hf_repo_shown(&hs->api, (char[300]){0}, 300));
		memcpy(hs->commit, sha, 41);
		return TFS_OK;
	}
	if (*hs->api.ref.path) {
		/* A file: its HEAD gives the commit (X-Repo-Commit). A
		 * directory has no HEAD: the revision API says instead. */
		struct tfs_hf_head h;
		struct tfs_diag hd;
		tfs_err e = tfs_hf_head(&hs->api, rev, hs->api.ref.path, &h, &hd);
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
	char *url = tfs_hf_api_url(&hs->api, "revision", rev, NULL), *body = NULL;
	size_t len;
	if (!url)
		return tfs_fail(d, TFS_ERR_NOMEM, "out of memory");
	char what[600], rn[300];
	snprintf(what, sizeof what, "revision '%s' of %s", rev, tfs_hf_repo_shown(&hs->api, rn, sizeof rn));
	tfs_err e = tfs_hf_api_get(&hs->api, url, what, &body, &len, NULL, 0, d);
	free(url);
	if (!e)
		e = tfs_hub_parse_revision(body, len, hs->commit, d);
	free(body);
	return e;
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
		char *p = tfs_hf_cached(hs->snapshot, hs->api.ref.path, &hsz, &sz);
		*is_file = p != NULL;
		free(p);
		return TFS_OK;
	}
	if (e)
		return e;
	*is_file = 0;
	for (size_t i = 0; i < hs->files.n; i++)
		if (strcmp(hs->files.name[i], hs->api.ref.path) == 0)
			*is_file = 1;
	return TFS_OK;
}

/* The cache's snapshots/<commit> of the repository, when it exists. */
static char *snapshot(const char *repo_dir, const char *commit)
{
	if (!repo_dir)
		return NULL;
	size_t n = strlen(repo_dir) + 64;
	char *snap = malloc(n);
	struct stat st;
	if (!snap)
		return NULL;
	snprintf(snap, n, "%s/snapshots/%s", repo_dir, commit);
	if (stat(snap, &st) == 0 && S_ISDIR(st.st_mode))
		return snap;
	free(snap);
	return NULL;
}

/* What the mount is told besides SOURCE: the Hub's address, -o xet=,
 * HF_HUB_OFFLINE, and the token. */
static tfs_err take_settings(struct hf_store *hs, const struct tfs_opts *o, const char *home,
			     struct tfs_diag *d)
{
	tfs_err e = tfs_hf_set_endpoint(&hs->api, o, d);
	if (e)
		return e;
	const char *xo = tfs_opts_get(o, "xet");
	if (xo && strcmp(xo, "on") != 0 && strcmp(xo, "off") != 0)
		return tfs_fail(d, TFS_ERR_INVAL, "-o xet= takes on or off, not '%s'", xo);
	hs->xet_off = xo && strcmp(xo, "off") == 0;
	const char *off = getenv("HF_HUB_OFFLINE");
	hs->offline = off && (strcmp(off, "1") == 0 || strcasecmp(off, "true") == 0 ||
			      strcasecmp(off, "yes") == 0 || strcasecmp(off, "on") == 0);
	/* A token file given is checked even offline, where no token is sent. */
	const char *tf = tfs_opts_get(o, "token_file");
	char *auth = NULL, *from = NULL;
	int from_default = 0;
	if ((!hs->offline || (tf && *tf)) && (e = tfs_hf_token(home, tf, &auth, &from, &from_default, d)))
		return e;
	if (hs->offline) {
		tfs_hf_token_free(auth); /* offline, nothing is sent */
		free(from);
	} else {
		tfs_hf_set_token(&hs->api, auth, from, from_default);
	}
	return TFS_OK;
}

static tfs_err resolve(const char *spec, const struct tfs_opts *o, struct tfs_sources *ss,
		       struct tfs_store **out, char **target, struct tfs_diag *d)
{
	struct tfs_rlayer *layer;
	tfs_err e = tfs_sources_remote(ss, &layer, d);
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
	hs->layer = layer;
	hs->api.http = layer->http;
	pthread_mutex_init(&hs->lock, NULL);
	pthread_mutex_init(&hs->api.auth_lock, NULL);
	if ((e = tfs_hub_parse_ref(spec, &hs->api.ref, d)))
		goto fail;
	if ((e = take_settings(hs, o, home, d)))
		goto fail;
	/* The repository's directory, resolved once and trusted: the only
	 * root of what the cache serves. */
	char *named = tfs_hf_cache_repo_dir(&hs->api.ref, home);
	e = named ? tfs_hf_cache_repo_trust(named, &repo_dir, d)
		  : tfs_fail(d, TFS_ERR_NOMEM, "out of memory");
	free(named);
	if (e)
		goto fail;
	int path_is_file;
	if ((e = pin(hs, repo_dir, &path_is_file, d)) && !fall_back(hs, repo_dir, spec, d))
		goto fail;
	if (e && (e = pin(hs, repo_dir, &path_is_file, d)))
		goto fail;
	hs->snapshot = snapshot(repo_dir, hs->commit);
	hs->tree = repo_dir ? strdup(repo_dir) : NULL;
	if (*hs->api.ref.path && path_is_file < 0 && (e = path_kind(hs, repo_dir, spec, &path_is_file, d)))
		goto fail;
	if (path_is_file == 1) {
		const char *slash = strrchr(hs->api.ref.path, '/');
		hs->root = strndup(hs->api.ref.path, slash ? (size_t)(slash - hs->api.ref.path) + 1 : 0);
		*target = strdup(slash ? slash + 1 : hs->api.ref.path);
	} else {
		size_t n = strlen(hs->api.ref.path);
		hs->root = malloc(n + 2);
		if (hs->root)
			snprintf(hs->root, n + 2, "%s%s", hs->api.ref.path, n ? "/" : "");
	}
	/* Messages name files as hf://ORG/REPO@COMMIT/PATH; user.source is
	 * the resolve URL at the commit. */
	char pre[4600];
	snprintf(pre, sizeof pre, "hf://%s%s@%s/%s",
		 strcmp(hs->api.ref.type, "datasets") == 0 ? "datasets/" : "", hs->api.ref.repo, hs->commit,
		 hs->root ? hs->root : "");
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
	{"xet", 1, "hf: on (default): read Xet files from their xorbs; off: through the LFS route", "on|off",
	 0},
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
	.remote = 1,
};
