/* Xet's serialized chunks, as a xorb holds them and a ranged fetch of it
 * returns them: an 8-byte header (u8 version 0, u24 little-endian
 * compressed size, u8 compression type, u24 uncompressed size), then the
 * payload: 0 stored, 1 one LZ4 frame, 2 one LZ4 frame of the bytes split
 * into four planes (every 4th byte from 0, then from 1, ...; the first
 * planes take the remainder), which the decoder interleaves back.
 *
 * Strict, for bytes off the network: a size past the spec's bounds (128
 * KiB uncompressed, 256 KiB compressed), a stored chunk whose two sizes
 * differ, a payload cut short, an LZ4 frame that does not end exactly at
 * the compressed size or does not give exactly the uncompressed size
 * (more is never written), a frame's own checksum that fails: refused,
 * with one line saying which chunk and why. */
#ifndef TFS_XETCHUNK_H
#define TFS_XETCHUNK_H

#include <stddef.h>
#include <stdint.h>

#include "core/err.h"

#define TFS_XET_CHUNK_HEADER 8
#define TFS_XET_CHUNK_MAX (128u * 1024)
#define TFS_XET_CHUNK_COMP_MAX (2 * TFS_XET_CHUNK_MAX)

enum tfs_xet_comp {
	TFS_XET_STORED = 0,
	TFS_XET_LZ4 = 1,
	TFS_XET_BG4_LZ4 = 2,
};

struct tfs_xet_chunk_hdr {
	uint32_t comp_len, raw_len;
	uint8_t type;
};

/* The header at p of `avail` bytes, checked, and that its payload is
 * there in full. */
tfs_err tfs_xet_chunk_header(const uint8_t *p, size_t avail, struct tfs_xet_chunk_hdr *h, struct tfs_diag *d);

/* A decoder: an LZ4 frame context and a plane buffer, one per thread. */
struct tfs_xet_dec;
struct tfs_xet_dec *tfs_xet_dec_new(void);
void tfs_xet_dec_free(struct tfs_xet_dec *x);

/* One chunk at p: its bytes to out (outcap at least its uncompressed
 * size), *used the bytes it took from p, *raw the bytes written. */
tfs_err tfs_xet_chunk_decode(struct tfs_xet_dec *x, const uint8_t *p, size_t avail, uint8_t *out,
			     size_t outcap, size_t *used, size_t *raw, struct tfs_diag *d);

/* A run of chunks as one fetch returns them: exactly `nchunks` chunks
 * filling the n bytes exactly, their bytes one after another into out
 * (outcap; *raw their total); lens (NULL or nchunks entries) gets each
 * chunk's uncompressed size. */
tfs_err tfs_xet_decode_run(struct tfs_xet_dec *x, const uint8_t *in, size_t n, uint32_t nchunks, uint8_t *out,
			   size_t outcap, uint32_t *lens, size_t *raw, struct tfs_diag *d);

/* The byte planes of type 2: regroup (decoding) and split (encoding,
 * for the tests), n bytes from in to out (not overlapping). */
void tfs_xet_bg4_regroup(const uint8_t *in, size_t n, uint8_t *out);
void tfs_xet_bg4_split(const uint8_t *in, size_t n, uint8_t *out);

#endif
