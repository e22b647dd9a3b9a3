/* The manifests --verify checks against: sha256sum or xxh64sum output, or
 * llama-gguf-hash's. Hostile input: fuzzed (tests/fuzz/fuzz_manifest.c). */
#ifndef TFS_MANIFEST_H
#define TFS_MANIFEST_H

#include <stddef.h>

#include "core/err.h"
#include "views/hashes.h"

/* One checked line: the hash of one tensor (or of one flat mount's file). */
struct tfs_manifest_entry {
	enum tfs_digest_algo a;
	char hex[65]; /* lowercase */
	char *name;
	size_t line;
};

struct tfs_manifest {
	struct tfs_manifest_entry *e;
	size_t n, cap;
	size_t bad; /* lines that are no checksum line */
};

/* Parses text[0, len) in place (text must hold len + 1 bytes). Lines it
 * does not check (comments, llama-gguf-hash's whole-model line and its
 * sha1, xxh3 and uuid lines) are skipped; lines of no known form are
 * counted in `bad`. TFS_ERR_INVAL when no line can be checked. */
tfs_err tfs_manifest_parse(char *text, size_t len, struct tfs_manifest *m, struct tfs_diag *d);
void tfs_manifest_free(struct tfs_manifest *m);

#endif
