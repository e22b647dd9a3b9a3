/* BLAKE3 (the hash, keyed mode and extendable output), written from the
 * BLAKE3 paper's description: Xet names every chunk, xorb and file by a
 * keyed BLAKE3, and Debian 12 packages no BLAKE3 library. Portable C, one
 * thread, with the one call's whole chunks compressed many at once where
 * the CPU can; incremental: update in any pieces gives the one-shot
 * result. */
#ifndef TFS_BLAKE3_H
#define TFS_BLAKE3_H

#include <stddef.h>
#include <stdint.h>

#define TFS_BLAKE3_KEY_LEN 32
#define TFS_BLAKE3_OUT_LEN 32
/* Enough chaining values for 2^54 chunks (16 EiB of input). */
#define TFS_BLAKE3_STACK 54

struct tfs_blake3 {
	uint32_t key[8];
	uint32_t cv[8];    /* the chaining value of the chunk being read */
	uint64_t chunk;    /* that chunk's number */
	uint8_t block[64]; /* input not yet compressed */
	uint8_t block_len; /* bytes in block */
	uint8_t blocks;    /* blocks of this chunk compressed so far */
	uint8_t flags;     /* the mode's flag (keyed or not) */
	uint8_t stack_len; /* chaining values of finished subtrees */
	uint32_t stack[TFS_BLAKE3_STACK][8];
};

/* key: 32 bytes for the keyed mode, or NULL for the plain hash. */
void tfs_blake3_init(struct tfs_blake3 *h, const uint8_t *key);
void tfs_blake3_update(struct tfs_blake3 *h, const void *data, size_t len);
/* Any number of output bytes (32 is the hash); h is left as it was, so
 * more input may follow. */
void tfs_blake3_final(const struct tfs_blake3 *h, uint8_t *out, size_t out_len);

/* One call: the 32-byte (keyed, with key) hash of data; its whole
 * chunks 16 or 8 at a time where the CPU has AVX-512 or AVX2 (chosen at
 * run time): 4 times the portable path's speed on a Xet chunk here. */
void tfs_blake3(const uint8_t *key, const void *data, size_t len, uint8_t out[TFS_BLAKE3_OUT_LEN]);
/* How many chunks this CPU hashes at once (16, 8, or 1); and the one call
 * with that number chosen (1: the portable path; one the CPU lacks must
 * not be asked for), for the tests to compare the paths. */
int tfs_blake3_lanes(void);
void tfs_blake3_with(int lanes, const uint8_t *key, const void *data, size_t len,
		     uint8_t out[TFS_BLAKE3_OUT_LEN]);

#endif
