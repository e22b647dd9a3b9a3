/* The digests of a tree's files worked out so far, kept for the life of
 * the tree (views/tree_digest.h works them out). */
#ifndef TFS_HASHES_H
#define TFS_HASHES_H

#include <stddef.h>
#include <stdint.h>

enum tfs_digest_algo {
	TFS_DIGEST_SHA256, /* OpenSSL's libcrypto: the CPU's SHA instructions */
	TFS_DIGEST_XXH64,  /* libxxhash, seed 0, as xxh64sum and llama-gguf-hash */
	TFS_DIGEST_COUNT,
};

/* Hex digits of a digest, without the NUL. */
size_t tfs_digest_hex_len(enum tfs_digest_algo a);
const char *tfs_digest_name(enum tfs_digest_algo a); /* "sha256", "xxh64" */

/* A digest as lowercase hex and a NUL: sha (32 bytes) for SHA-256, xxh
 * for XXH64 (big-endian, as xxh64sum prints it). */
void tfs_digest_hex(enum tfs_digest_algo a, const unsigned char *sha, uint64_t xxh, char *hex);

struct tfs_digests;
struct tfs_digests *tfs_digests_new(uint32_t nnodes);
void tfs_digests_free(struct tfs_digests *s);

/* 1 and the lowercase hex (and a NUL) of node ino's digest when known. */
int tfs_digests_get(struct tfs_digests *s, uint32_t ino, enum tfs_digest_algo a, char *hex);
/* Keeps a digest: sha (32 bytes) for SHA-256, xxh for XXH64. Dropped
 * quietly when memory runs out (it is worked out again when asked). */
void tfs_digests_put(struct tfs_digests *s, uint32_t ino, enum tfs_digest_algo a, const unsigned char *sha,
		     uint64_t xxh);

/* The key under which a tensor's digest is kept in its source's memo
 * (tfs_source_memo_get): the algorithm, the view (float32 or stored
 * bytes, the NPY header's length) and the stored range. */
void tfs_digest_memo_key(enum tfs_digest_algo a, int converted, uint32_t npy, uint64_t begin, uint64_t end,
			 char *out, size_t cap);

/* A memo's value back into a digest: 0 when it is one. */
int tfs_digest_parse(enum tfs_digest_algo a, const char *hex, unsigned char *sha, uint64_t *xxh);

#endif
