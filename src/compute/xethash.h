/* The hashes of Xet, the Hugging Face Hub's storage (its public spec,
 * "hashing"): a chunk's hash is BLAKE3 keyed with the spec's data key; a
 * xorb's hash is the Merkle tree over its chunks' (hash, length) pairs,
 * each inner node BLAKE3 keyed with the node key over lines
 * "HEX : LENGTH\n" of its children (2 to 9 of them, a group ending at a
 * child whose hash is 0 mod 4 once it has 3); a file's hash is that tree
 * over all its chunks, keyed once more with 32 zero bytes. */
#ifndef TFS_XETHASH_H
#define TFS_XETHASH_H

#include <stddef.h>
#include <stdint.h>

#include "core/err.h"

#define TFS_XET_HASH_LEN 32
#define TFS_XET_HEX_LEN 64

/* A Merkle leaf or node: its hash and the bytes under it. */
struct tfs_xet_node {
	uint8_t hash[TFS_XET_HASH_LEN];
	uint64_t len;
};

void tfs_xet_chunk_hash(const void *data, size_t len, uint8_t out[TFS_XET_HASH_LEN]);

/* The root over n leaves, in place: v[0..n) is overwritten (v[0] ends as
 * the root); n = 0 gives the all-zero hash, as the spec says. */
void tfs_xet_merkle(struct tfs_xet_node *v, size_t n, uint8_t out[TFS_XET_HASH_LEN]);
/* The xorb hash of n chunks (v overwritten). */
void tfs_xet_xorb_hash(struct tfs_xet_node *v, size_t n, uint8_t out[TFS_XET_HASH_LEN]);
/* The file hash of n chunks (v overwritten): zero for an empty file. */
void tfs_xet_file_hash(struct tfs_xet_node *v, size_t n, uint8_t out[TFS_XET_HASH_LEN]);

/* The spec's text form: each 8-byte word of the hash as a little-endian
 * number, printed as 16 lowercase hex digits (so the bytes of each word
 * appear reversed). out holds 65 bytes. */
void tfs_xet_hash_hex(const uint8_t h[TFS_XET_HASH_LEN], char out[TFS_XET_HEX_LEN + 1]);
/* Exactly 64 hex digits (either case) in that form, or TFS_ERR_FORMAT. */
tfs_err tfs_xet_hash_parse(const char *s, size_t len, uint8_t out[TFS_XET_HASH_LEN]);

#endif
