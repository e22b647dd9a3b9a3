/* The chunk cache of Xet files on disk (-o cache_dir=): decompressed
 * chunks kept by their xorb's hash and index, so that any file, revision
 * or repository of any mount sharing the directory finds every chunk it
 * shares with what was read before, however it was fetched.
 *
 * One file per xorb, DIR/tensorfs-v1/xet/HH/HASH: a 64-byte record per
 * chunk at a fixed place (index * 64), then the chunk's bytes at a fixed
 * slot (4 MiB + index * 128 KiB, the largest chunk), a sparse file whose
 * holes are the chunks not held. A record says the chunk's length, a
 * checksum of its bytes (XXH3, seeded by the xorb and the index) and its
 * Xet hash, and sums itself: a record or a slot torn by a crash, damaged,
 * or written by two mounts at once is found out when read, dropped, and
 * the chunk fetched again. Bounded by -o cache_max= together with the
 * block cache's files in the same directory (allocated bytes, not
 * apparent sizes), evicting whole xorbs and block files, least recently
 * read first. */
#ifndef TFS_XORBCACHE_H
#define TFS_XORBCACHE_H

#include <stddef.h>
#include <stdint.h>

#include "compute/xethash.h"
#include "core/err.h"

struct tfs_xorbcache;

/* DIR/tensorfs-v1/xet, made (DIR/tensorfs-v1 is made and checked by the
 * block cache's store first), measured with the rest of DIR/tensorfs-v1. */
tfs_err tfs_xorbcache_open(const char *dir, uint64_t max, struct tfs_xorbcache **out, struct tfs_diag *d);
void tfs_xorbcache_free(struct tfs_xorbcache *x);

/* What the index of a xorb says of its chunks [a, b): lens[i] the length
 * of chunk a + i (0: not held), hashes[i] its hash when has[i]. How many
 * it holds. */
unsigned tfs_xorbcache_index(struct tfs_xorbcache *x, const uint8_t xorb[TFS_XET_HASH_LEN], uint32_t a,
			     uint32_t b, uint32_t *lens, uint8_t (*hashes)[TFS_XET_HASH_LEN], uint8_t *has);

/* A xorb's file, for reading its chunks: -1 when there is none. */
int tfs_xorbcache_open_xorb(struct tfs_xorbcache *x, const uint8_t xorb[TFS_XET_HASH_LEN]);
/* Chunk c, of len bytes, into buf: 1 when it is there whole and checks
 * out (the bytes checked are the bytes in buf), else 0, and its record is
 * dropped. */
int tfs_xorbcache_get(struct tfs_xorbcache *x, int fd, const uint8_t xorb[TFS_XET_HASH_LEN], uint32_t c,
		      uint32_t len, uint8_t *buf);
/* The same, into the pieces v[0..n) (len bytes in all): a chunk read
 * straight into the buffers it is served from. */
struct iovec;
int tfs_xorbcache_getv(struct tfs_xorbcache *x, int fd, const uint8_t xorb[TFS_XET_HASH_LEN], uint32_t c,
		       uint32_t len, const struct iovec *v, int n);
/* Done reading: the xorb was read now (its age for eviction). */
void tfs_xorbcache_close_xorb(int fd);

/* Keeps chunks [c, c + n) of a xorb, data[i] and lens[i] each (hashes
 * NULL: not known). Failures are silent: a chunk not kept is fetched
 * again. */
void tfs_xorbcache_put(struct tfs_xorbcache *x, const uint8_t xorb[TFS_XET_HASH_LEN], uint32_t c, uint32_t n,
		       const uint32_t *lens, const uint8_t *const *data,
		       const uint8_t (*hashes)[TFS_XET_HASH_LEN]);

/* Forgets a xorb (its chunks were found wrong). */
void tfs_xorbcache_drop(struct tfs_xorbcache *x, const uint8_t xorb[TFS_XET_HASH_LEN]);

#endif
