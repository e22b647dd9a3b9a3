/* Every element type tensorfs knows, whatever container it came from: the
 * 22 of safetensors (also the names bintensors, tensorsafe, PyTorch and
 * numpy types map to), and the block-quantized types of ggml (GGUF). One
 * table, so that views and inspect never ask which format a tensor is from.
 *
 * A type is either plain (`bits` per element, packed when under 8) or a
 * block type (`block` elements in `block_bytes` bytes). */
#ifndef TFS_DTYPE_H
#define TFS_DTYPE_H

#include <stddef.h>
#include <stdint.h>

enum tfs_dtype {
	/* safetensors, in its declaration order (the writer's order too) */
	TFS_DT_BOOL,
	TFS_DT_F4,
	TFS_DT_F6_E2M3,
	TFS_DT_F6_E3M2,
	TFS_DT_U8,
	TFS_DT_I8,
	TFS_DT_F8_E5M2,
	TFS_DT_F8_E4M3,
	TFS_DT_F8_E8M0,
	TFS_DT_F8_E4M3FNUZ,
	TFS_DT_F8_E5M2FNUZ,
	TFS_DT_I16,
	TFS_DT_U16,
	TFS_DT_F16,
	TFS_DT_BF16,
	TFS_DT_I32,
	TFS_DT_U32,
	TFS_DT_F32,
	TFS_DT_C64,
	TFS_DT_F64,
	TFS_DT_I64,
	TFS_DT_U64,
	TFS_DT_SAFETENSORS_END,
	/* complex128: PyTorch's ComplexDouble, numpy's complex128 */
	TFS_DT_C128 = TFS_DT_SAFETENSORS_END,
	/* ggml's block types (formats/gguf.c maps ggml type ids to these) */
	TFS_DT_Q4_0,
	TFS_DT_Q4_1,
	TFS_DT_Q5_0,
	TFS_DT_Q5_1,
	TFS_DT_Q8_0,
	TFS_DT_Q8_1,
	TFS_DT_Q2_K,
	TFS_DT_Q3_K,
	TFS_DT_Q4_K,
	TFS_DT_Q5_K,
	TFS_DT_Q6_K,
	TFS_DT_Q8_K,
	TFS_DT_IQ2_XXS,
	TFS_DT_IQ2_XS,
	TFS_DT_IQ3_XXS,
	TFS_DT_IQ1_S,
	TFS_DT_IQ4_NL,
	TFS_DT_IQ3_S,
	TFS_DT_IQ2_S,
	TFS_DT_IQ4_XS,
	TFS_DT_IQ1_M,
	TFS_DT_TQ1_0,
	TFS_DT_TQ2_0,
	TFS_DT_MXFP4,
	TFS_DT_NVFP4,
	TFS_DT_COUNT,
	TFS_DT_UNKNOWN = 0xffff, /* a type name passed through as text */
};

struct tfs_dtype_info {
	const char *name;     /* as user.dtype shows it */
	uint8_t bits;         /* plain types: bits per element; 0 for blocks */
	uint16_t block;       /* block types: elements per block */
	uint16_t block_bytes; /* block types: bytes per block */
	const char *npy;      /* numpy descr, or NULL: served as raw uint8 */
	uint8_t decodes;      /* convert=f32 decodes it */
};

const struct tfs_dtype_info *tfs_dtype_info(unsigned dt);
const char *tfs_dtype_name(unsigned dt);

/* Looks a name up among the safetensors names only (what its reader
 * accepts); TFS_DT_UNKNOWN otherwise. */
unsigned tfs_dtype_lookup_safetensors(const char *s, size_t len);

/* A ggml type id (GGUF's tensor type) as one of ours in *dt
 * set; or TFS_DT_UNKNOWN in *dt with *removed naming a type ggml once had
 * and took out (Q4_2...), or NULL for an id ggml's table does not hold. */
void tfs_dtype_from_ggml(uint32_t id, unsigned *dt, const char **removed);

/* The ggml type id of one of ours, or -1 when ggml has none (U16, the F8
 * family...). */
int64_t tfs_dtype_to_ggml(unsigned dt);

/* Bytes of `elems` elements, or UINT64_MAX when that is not a whole number
 * of bytes (packed types), not whole blocks, or overflows. */
uint64_t tfs_dtype_bytes(unsigned dt, uint64_t elems);

/* Elements per unit of stored bytes, for reading ranges: a unit is one
 * element for byte types, a block for block types, and for packed
 * sub-byte types the smallest whole group (F4: 2 in 1 byte; F6: 4 in 3). */
void tfs_dtype_unit(unsigned dt, uint32_t *elems, uint32_t *bytes);

/* One element of a plain float type (`bits` its stored bits) as float32
 * bits, NaN payloads and signs kept: the f32 view, dequantization's scales
 * and the tests decode through it. */
uint32_t tfs_decode_one(unsigned dtype, unsigned bits);

#endif
