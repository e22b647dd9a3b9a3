/* The Hugging Face Hub's conventions, parsed without touching the network:
 * hf:// references, the tree listing and revision answers of its API, and
 * the checks every name from the network must pass. The hf:// driver
 * (sources/hf.c) does the requests; the fuzzer feeds these directly. */
#ifndef TFS_HUB_H
#define TFS_HUB_H

#include <stddef.h>

#include "core/err.h"
#include "core/source.h"

struct tfs_hub_ref {
	char type[16];   /* "models" or "datasets" */
	char repo[256];  /* ORG/REPO */
	char rev[256];   /* as given (decoded), "main" by default */
	char path[4096]; /* in the repository, "" for none */
};

/* hf://[models/|datasets/]ORG/REPO[@REV][/PATH], REV percent-decoded
 * (refs%2Fpr%2F1 is refs/pr/1). */
tfs_err tfs_hub_parse_ref(const char *spec, struct tfs_hub_ref *r, struct tfs_diag *d);

/* A relative path from the network that is safe to use as a name: not
 * empty, not absolute, no empty, "." or ".." segment, no control
 * character, at most 4096 bytes. */
int tfs_hub_safe_path(const char *p, size_t n);

/* One page of GET /api/{type}/{repo}/tree/{rev}?recursive=true: a JSON
 * array of entries; every file's path and size (its LFS size when it has
 * one) is added to out. A path that is not safe refuses the page. */
tfs_err tfs_hub_parse_tree(const char *json, size_t n, struct tfs_dirlist *out, struct tfs_diag *d);

/* GET /api/{type}/{repo}/revision/{rev}: its "sha", 40 hex digits. */
tfs_err tfs_hub_parse_revision(const char *json, size_t n, char sha[41], struct tfs_diag *d);

/* Whether s is a full commit id (40 lower-case hex digits). */
int tfs_hub_is_commit(const char *s);

#endif
