/* What the hf:// source (sources/hf.c) finds on this machine rather than
 * on the Hub: the Hugging Face home, the token, and the Hugging Face
 * cache (HF_HUB_CACHE, hub/models--ORG--NAME/{refs,snapshots}), which a
 * mount reads before the network and falls back to without one. */
#ifndef TFS_HFLOCAL_H
#define TFS_HFLOCAL_H

#include <stdint.h>

#include "sources/httpc.h"
#include "sources/hub.h"

/* $HF_HOME, else ${XDG_CACHE_HOME:-~/.cache}/huggingface (malloc'd). */
char *tfs_hf_home(void);

/* "Authorization: Bearer TOKEN" (malloc'd) in *auth from -o token_file=,
 * else HF_TOKEN, else HUGGING_FACE_HUB_TOKEN, else HOME/token; NULL when
 * there is none. A token is printable ASCII without spaces: one holding
 * anything else (a CR, a NUL, a space), a file that is not a regular one
 * or holds over TFS_HF_TOKEN_FILE_MAX bytes, is refused (TFS_ERR_INVAL,
 * one line naming where it came from), and so is one over
 * TFS_HF_TOKEN_MAX bytes: never trimmed, cut or dropped. A file may end
 * with one newline, as `echo TOKEN > FILE` writes it.
 * *from (when not NULL): the file it is read from (malloc'd), to be read
 * again when it changes (tfs_hf_token_file), also HOME/token when it is
 * not there yet, and *from_default (when not NULL) 1 for HOME/token;
 * NULL when it came from the environment. */
#define TFS_HF_TOKEN_FILE_MAX 4096
/* The longest token a request carries whole (its Authorization line in
 * struct tfs_http_creds): a longer one, from the environment, is refused. */
#define TFS_HF_TOKEN_MAX (TFS_HTTP_CRED_MAX - sizeof "Authorization: Bearer ")
tfs_err tfs_hf_token(const char *home, const char *file, char **auth, char **from, int *from_default,
		     struct tfs_diag *d);

/* The token of the file path, as tfs_hf_token reads it: is_default for
 * HOME/token, which may be absent (TFS_OK, *auth NULL), where -o
 * token_file= must be there. */
tfs_err tfs_hf_token_file(const char *path, int is_default, char **auth, struct tfs_diag *d);

/* Frees a token (auth) or a buffer that held one (NULL: nothing), wiped
 * first: freed memory keeps its bytes, and a daemon's memory may be read
 * (a core dump, /proc/PID/mem). */
void tfs_hf_token_free(char *auth);

/* The cache's directory of the repository (malloc'd). */
char *tfs_hf_cache_repo_dir(const struct tfs_hub_ref *ref, const char *home);

/* The repository's directory dir of the cache, resolved, in *tree
 * (malloc'd; NULL when there is none): whoever may change it chooses
 * what a mount serves, so a symbolic link there (and any it leads to) is
 * followed only when it is the mounting user's or root's, and the
 * directory must be theirs and written by no one else unless sticky.
 * Else TFS_ERR_OPEN, one line naming it and why. */
tfs_err tfs_hf_cache_repo_trust(const char *dir, char **tree, struct tfs_diag *d);

/* SNAPSHOT/FULL when it is a complete regular file, of *size bytes when
 * *has_size (then both set), else NULL (malloc'd). */
char *tfs_hf_cached(const char *snapshot, const char *full, int *has_size, uint64_t *size);

/* The commit the cache's refs/REV names, or "" (no cache, no such ref, or
 * a REV that would leave refs/). */
void tfs_hf_cached_ref(const char *repo_dir, const char *rev, char *sha, size_t n);

#endif
