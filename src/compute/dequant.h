/* ggml's block-quantized types to float32, as ggml's reference
 * dequantize_row_* functions (ggml-org/ggml src/ggml-quants.c) compute
 * them, operation for operation, so that the bits agree. */
#ifndef TFS_DEQUANT_H
#define TFS_DEQUANT_H

/* Whether tfs_dequant_block knows the type. */
int tfs_dequant_known(unsigned dtype);

/* Decodes one block of `dtype` (tfs_dtype_info(dtype)->block elements)
 * into y. */
void tfs_dequant_block(unsigned dtype, const unsigned char *blk, float *y);

#endif
