/* Views of a tensor for tools: an NPY header in front of the bytes, and
 * exact float32 decoding of the narrow float dtypes. No FUSE here. */
#ifndef TFS_CONVERT_H
#define TFS_CONVERT_H

#include <stddef.h>
#include <stdint.h>

#include "core/table.h"

/* Whether -o convert=f32 decodes this dtype (BF16, F16, the F8, F6 and F4
 * families, ggml's Q4_0...Q6_K and MXFP4); other dtypes are served as
 * stored. */
int tfs_converts(unsigned dtype);

/* Bytes the tensor's file shows: the stored bytes, or 4 per element when
 * converted. */
uint64_t tfs_view_size(const struct tfs_table *h, const struct tfs_tensor *t, int convert);

/* Writes the NPY header for the tensor into out (which needs
 * tfs_npy_header_max(t) bytes) and returns its length, a multiple of 64.
 * numpy-native dtypes keep their type; BF16 and the F8 family are shown as
 * unsigned integers of their width; packed sub-byte tensors (F4, F6) and
 * unknown dtypes as their raw bytes, uint8 of shape (nbytes,); ggml block
 * types as uint8 of shape (blocks, bytes per block); converted
 * dtypes as little-endian float32 in their shape. */
size_t tfs_npy_header(const struct tfs_table *h, const struct tfs_tensor *t, int convert, char *out,
		      size_t cap);
size_t tfs_npy_header_max(const struct tfs_tensor *t);

/* Decodes elements [first, first + n) of a tensor stored as `dtype` from
 * `src`, the stored bytes from tfs_stored_range() (they start at the unit
 * that holds element `first`: the element, the byte of a packed pair, the
 * three bytes of four F6 elements, the block), into float32 bit patterns,
 * little-endian in memory. */
void tfs_decode_f32(unsigned dtype, const unsigned char *src, uint64_t first, size_t n, uint32_t *out);

/* Stored byte range [*b, *e) (relative to the tensor) of the whole units
 * (see tfs_dtype_unit) that hold elements [first, first + n). */
void tfs_stored_range(unsigned dtype, uint64_t first, uint64_t n, uint64_t *b, uint64_t *e);

#endif
