/* What the hf:// source finds on this machine (sources/hflocal.h): the
 * Hugging Face home, the token, and the files of the Hugging Face cache,
 * laid out as huggingface_hub lays them out. */
#include "sources/hflocal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <limits.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/userfile.h"

/* ---- environment ---- */

static char *env_path(const char *var, const char *fallback_var, const char *tail)
{
	const char *v = getenv(var);
	if (v && *v)
		return strdup(v);
	const char *base = fallback_var ? getenv(fallback_var) : NULL;
	char buf[4096];
	if (base && *base) {
		snprintf(buf, sizeof buf, "%s/%s", base, tail);
		return strdup(buf);
	}
	return NULL;
}

/* $HF_HOME, else ${XDG_CACHE_HOME:-~/.cache}/huggingface */
char *tfs_hf_home(void)
{
	char *h = env_path("HF_HOME", "XDG_CACHE_HOME", "huggingface");
	if (h)
		return h;
	const char *home = getenv("HOME");
	char buf[4096];
	snprintf(buf, sizeof buf, "%s/.cache/huggingface", home && *home ? home : "/root");
	return strdup(buf);
}

/* Why byte c cannot be in a token (a header value), or NULL. */
static const char *bad_byte(unsigned char c)
{
	return c == 0      ? "a NUL byte"
	       : c == '\n' ? "a line feed"
	       : c == '\r' ? "a carriage return"
	       : c == ' '  ? "a space"
	       : c < 0x20  ? "a control character"
	       : c == 0x7f ? "a control character"
	       : c >= 0x80 ? "a byte that is not ASCII"
			   : NULL;
}

void tfs_hf_token_free(char *auth)
{
	if (auth)
		explicit_bzero(auth, strlen(auth));
	free(auth);
}

/* The token file's bytes in *buf: none (TFS_OK, *buf NULL) when the
 * default file is not there; a refusal is TFS_ERR_INVAL. */
static tfs_err read_file(const char *path, int is_default, char *what, size_t wn, char **buf, size_t *n,
			 struct tfs_diag *d)
{
	char q[TFS_QPATH_MAX];
	snprintf(what, wn, is_default ? "the Hub token file %s" : "-o token_file=%s",
		 tfs_quote_path(q, sizeof q, path));
	tfs_err e = tfs_file_read(is_default ? "the Hub token file " : "-o token_file", path,
				  TFS_HF_TOKEN_FILE_MAX, buf, n, d);
	if (e == TFS_ERR_NOENT && is_default)
		return TFS_OK; /* no token: public repositories */
	return e == TFS_OK || e == TFS_ERR_NOMEM ? e : TFS_ERR_INVAL;
}

/* "Authorization: Bearer T" in *auth from the n bytes of t (a file's
 * bytes: its one newline dropped), or the refusal, naming `what`. */
static tfs_err take(const char *what, const char *t, size_t n, int from_file, char **auth, struct tfs_diag *d)
{
	if (from_file && n && t[n - 1] == '\n')
		n--; /* echo's newline */
	if (n == 0)
		return tfs_fail(d, TFS_ERR_INVAL, "%s: refused: holds no token", what);
	if (n > TFS_HF_TOKEN_MAX)
		return tfs_fail(
			d, TFS_ERR_INVAL,
			"%s: refused: the token is %zu bytes, longer than a request carries (%zu); a token is never cut",
			what, n, (size_t)TFS_HF_TOKEN_MAX);
	for (size_t i = 0; i < n; i++)
		if (bad_byte((unsigned char)t[i]))
			return tfs_fail(
				d, TFS_ERR_INVAL,
				"%s: refused: the token holds %s (byte %zu); a token is printable ASCII without spaces, and is never trimmed or cut",
				what, bad_byte((unsigned char)t[i]), i + 1);
	/* (Copied, not printed: printf may stage it on the stack.) */
	static const char bearer[] = "Authorization: Bearer ";
	if (!(*auth = malloc(sizeof bearer + n)))
		return tfs_fail(d, TFS_ERR_NOMEM, "out of memory");
	memcpy(*auth, bearer, sizeof bearer - 1);
	memcpy(*auth + sizeof bearer - 1, t, n);
	(*auth)[sizeof bearer - 1 + n] = 0;
	return TFS_OK;
}

tfs_err tfs_hf_token_file(const char *path, int is_default, char **auth, struct tfs_diag *d)
{
	char what[TFS_QPATH_MAX + 64], *buf = NULL;
	size_t n = 0;
	*auth = NULL;
	tfs_err e = read_file(path, is_default, what, sizeof what, &buf, &n, d);
	if (!e && buf)
		e = take(what, buf, n, 1, auth, d);
	if (buf) {
		explicit_bzero(buf, n);
		free(buf);
	}
	return e;
}

tfs_err tfs_hf_token(const char *home, const char *file, char **auth, char **from, int *from_default,
		     struct tfs_diag *d)
{
	const char *t;
	*auth = NULL;
	if (from)
		*from = NULL;
	if (from_default)
		*from_default = 0;
	if (!(file && *file) && (t = getenv("HF_TOKEN")) && *t)
		return take("HF_TOKEN", t, strlen(t), 0, auth, d);
	if (!(file && *file) && (t = getenv("HUGGING_FACE_HUB_TOKEN")) && *t)
		return take("HUGGING_FACE_HUB_TOKEN", t, strlen(t), 0, auth, d);
	char path[4200];
	int is_default = !(file && *file);
	if (is_default) {
		snprintf(path, sizeof path, "%s/token", home);
		file = path;
	}
	tfs_err e = tfs_hf_token_file(file, is_default, auth, d);
	/* The file is read again when it changes; the default one is watched
	 * even when it is not there yet (a `huggingface-cli login` during the
	 * mount). */
	if (!e && from && !(*from = strdup(file))) {
		tfs_hf_token_free(*auth);
		*auth = NULL;
		e = tfs_fail(d, TFS_ERR_NOMEM, "out of memory");
	}
	if (!e && from_default)
		*from_default = is_default;
	return e;
}

/* ---- the Hugging Face cache ---- */

char *tfs_hf_cache_repo_dir(const struct tfs_hub_ref *ref, const char *home)
{
	char *hub = getenv("HF_HUB_CACHE") && *getenv("HF_HUB_CACHE") ? strdup(getenv("HF_HUB_CACHE")) : NULL;
	char buf[4096], repo[300];
	if (!hub) {
		snprintf(buf, sizeof buf, "%s/hub", home);
		hub = strdup(buf);
	}
	if (!hub)
		return NULL;
	/* models--org--name, datasets--org--name */
	size_t o = 0;
	for (const char *p = ref->repo; *p && o + 3 < sizeof repo; p++) {
		if (*p == '/') {
			repo[o++] = '-';
			repo[o++] = '-';
		} else {
			repo[o++] = *p;
		}
	}
	repo[o] = 0;
	snprintf(buf, sizeof buf, "%s/%s--%s", hub, ref->type, repo);
	free(hub);
	return strdup(buf);
}

/* What is wrong with the repository's directory st (resolved: real), or
 * NULL: whoever may change it chooses the bytes a mount serves. */
static const char *untrusted(const struct stat *st, const char *real, char *why, size_t n)
{
	uid_t me = geteuid();
	if (!S_ISDIR(st->st_mode))
		snprintf(why, n, "not a directory");
	else if (st->st_uid != me && st->st_uid != 0)
		snprintf(why, n, "%s belongs to uid %u, not to the mounting user (uid %u) nor root", real,
			 (unsigned)st->st_uid, (unsigned)me);
	else if ((st->st_mode & (S_IWGRP | S_IWOTH)) && !(st->st_mode & S_ISVTX))
		snprintf(why, n, "%s may be written by others (and is not sticky)", real);
	else
		return NULL;
	return why;
}

tfs_err tfs_hf_cache_repo_trust(const char *dir, char **tree, struct tfs_diag *d)
{
	char cur[PATH_MAX], target[PATH_MAX], why[PATH_MAX + 128], q[TFS_QPATH_MAX];
	const char *slash = strrchr(dir, '/');
	char *hub = slash ? strndup(dir, (size_t)(slash - dir)) : NULL;
	char *base = hub ? realpath(*hub ? hub : "/", NULL) : NULL;
	tfs_err e = TFS_OK;
	*tree = NULL;
	free(hub);
	if (!base)
		return TFS_OK; /* no cache */
	snprintf(cur, sizeof cur, "%s/%s", base, slash + 1);
	free(base);
	/* Links from the repository's entry on: only the user's or root's. */
	struct stat st;
	for (int links = 0; !e; links++) {
		if (lstat(cur, &st) != 0)
			return TFS_OK; /* no cache of the repository */
		if (!S_ISLNK(st.st_mode))
			break;
		ssize_t k = readlink(cur, target, sizeof target - 1);
		if (st.st_uid != geteuid() && st.st_uid != 0)
			snprintf(
				why, sizeof why,
				"%s is a symbolic link of uid %u: only the mounting user's or root's is followed",
				cur, (unsigned)st.st_uid);
		else if (links >= 40 || k <= 0)
			snprintf(why, sizeof why, "%s: too many symbolic links, or one that cannot be read",
				 cur);
		else
			why[0] = 0;
		if (*why)
			e = TFS_ERR_OPEN;
		else if ((target[k] = 0, target[0] == '/'))
			snprintf(cur, sizeof cur, "%s", target);
		else
			snprintf(strrchr(cur, '/') + 1, sizeof cur - (size_t)(strrchr(cur, '/') + 1 - cur),
				 "%s", target);
	}
	char *real = e ? NULL : realpath(cur, NULL);
	if (!e && (!real || stat(real, &st) != 0)) {
		snprintf(why, sizeof why, "cannot be resolved");
		e = TFS_ERR_OPEN;
	} else if (!e && untrusted(&st, real, why, sizeof why)) {
		e = TFS_ERR_OPEN;
	}
	if (e) {
		free(real);
		return tfs_fail(d, e, "the Hugging Face cache's %s: refused: %s",
				tfs_quote_path(q, sizeof q, dir), why);
	}
	*tree = real;
	return TFS_OK;
}

/* A file of the cached snapshot: a complete regular file (downloads are
 * renamed into place when done), of the listed size when there is one. */
char *tfs_hf_cached(const char *snapshot, const char *full, int *has_size, uint64_t *size)
{
	if (!snapshot)
		return NULL;
	size_t n = strlen(snapshot) + strlen(full) + 2;
	char *p = malloc(n);
	struct stat st;
	if (!p)
		return NULL;
	snprintf(p, n, "%s/%s", snapshot, full);
	if (stat(p, &st) != 0 || !S_ISREG(st.st_mode) || (*has_size && (uint64_t)st.st_size != *size)) {
		free(p);
		return NULL;
	}
	*has_size = 1;
	*size = (uint64_t)st.st_size;
	return p;
}

/* The commit the Hugging Face cache's refs/REV names, or "" (no cache, no
 * such ref, or a REV that would leave refs/). */
void tfs_hf_cached_ref(const char *repo_dir, const char *rev, char *sha, size_t n)
{
	char p[4600];
	sha[0] = 0;
	if (!repo_dir || strstr(rev, ".."))
		return;
	snprintf(p, sizeof p, "%s/refs/%s", repo_dir, rev);
	/* (A FIFO there must not block the mount: opened as a user's file.) */
	char *text;
	size_t len;
	struct tfs_diag d;
	if (tfs_file_read(NULL, p, 4096, &text, &len, &d) == TFS_OK) {
		snprintf(sha, n, "%s", text);
		free(text);
	}
	sha[strcspn(sha, "\r\n")] = 0;
}
