/* Hashes of the bytes a file of the tree serves (in its view: raw, .npy or
 * float32), for the user.hash.* attributes, the __sha256sums__ manifests and
 * --verify. Each is worked out when first asked for and kept for the life
 * of the tree. */
#ifndef TFS_TREE_DIGEST_H
#define TFS_TREE_DIGEST_H

#include <stddef.h>
#include <stdint.h>

#include "core/err.h"
#include "compute/hashes.h"

struct tfs_tree;

/* The digest of node `ino`'s file as lowercase hex (tfs_digest_hex_len
 * digits and a NUL into hex). */
tfs_err tfs_digest_node(const struct tfs_tree *t, uint32_t ino, enum tfs_digest_algo a, char *hex,
			struct tfs_diag *d);

/* 1 and the hex when it was worked out already (answering without reading
 * any data), else 0. */
int tfs_digest_known(const struct tfs_tree *t, uint32_t ino, enum tfs_digest_algo a, char *hex);

/* The digests of `count` nodes, on up to `threads` threads, each thread
 * holding one read buffer. progress(ctx, bytes) is called after each
 * node (from any thread, serialised). Stops at the first error. */
tfs_err tfs_digest_nodes(const struct tfs_tree *t, const uint32_t *inos, size_t count, enum tfs_digest_algo a,
			 unsigned threads, void (*progress)(void *ctx, uint64_t bytes), void *ctx,
			 struct tfs_diag *d);

#endif
