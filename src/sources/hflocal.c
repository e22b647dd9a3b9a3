/* What the hf:// source finds on this machine (sources/hflocal.h): the
 * Hugging Face home, the token, and the files of the Hugging Face cache,
 * laid out as huggingface_hub lays them out. */
#include "sources/hflocal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

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

/* -o token_file=, then HF_TOKEN, then HUGGING_FACE_HUB_TOKEN, then
 * $HF_HOME/token. */
char *tfs_hf_token(const char *home, const char *file)
{
	const char *t = file && *file ? NULL : getenv("HF_TOKEN");
	if (!(file && *file) && (!t || !*t))
		t = getenv("HUGGING_FACE_HUB_TOKEN");
	char buf[4096];
	if (!t || !*t) {
		if (file && *file)
			snprintf(buf, sizeof buf, "%s", file);
		else
			snprintf(buf, sizeof buf, "%s/token", home);
		FILE *f = fopen(buf, "r");
		if (!f)
			return NULL;
		size_t n = fread(buf, 1, sizeof buf - 1, f);
		fclose(f);
		buf[n] = 0;
		t = buf;
	}
	/* Only the token's own characters: no header can be smuggled in. */
	size_t a = 0, n = strlen(t);
	while (a < n && (t[a] == ' ' || t[a] == '\n' || t[a] == '\r' || t[a] == '\t'))
		a++;
	while (n > a && (t[n - 1] == ' ' || t[n - 1] == '\n' || t[n - 1] == '\r' || t[n - 1] == '\t'))
		n--;
	if (n == a)
		return NULL;
	for (size_t i = a; i < n; i++)
		if ((unsigned char)t[i] <= 0x20 || t[i] == 0x7f)
			return NULL;
	char *h = malloc(n - a + 32);
	if (h)
		snprintf(h, n - a + 32, "Authorization: Bearer %.*s", (int)(n - a), t + a);
	return h;
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
	FILE *f = fopen(p, "r");
	if (f) {
		if (!fgets(sha, (int)n, f))
			sha[0] = 0;
		fclose(f);
	}
	sha[strcspn(sha, "\r\n")] = 0;
}
