/* tensorfs --verify: every tensor's hash, checked against a manifest. */
#ifndef TFS_VERIFY_H
#define TFS_VERIFY_H

#include <stdio.h>

#include "fs/mount.h"
#include "tools/tools.h"
#include "core/opts.h"
#include "model/model.h"

/* Hashes every tensor file of `tree` (a flat tree of the model built with
 * the views' options `opts`: -o format=npy's .npy files; NULL, the raw
 * bytes), SHA-256 or XXH64 when xxh64, on every core. Without a
 * manifest, prints one (sha256sum's form) to out; with one (sha256sum,
 * xxh64sum or llama-gguf-hash output), one line per mismatch. Files whose
 * server vouches for their SHA-256 (the Hub's LFS oid) are checked whole.
 * Returns the exit code (docs/troubleshooting.md, "Exit codes"). */
int tfs_verify(const struct tfs_tree *tree, const struct tfs_opts *opts, const char *source,
	       const char *manifest, int xxh64, int json, FILE *out, struct tfs_tool_result *res);

#endif
