/* The tensors' files (views/tensor.c): each tensor's stored bytes (raw),
 * after an NPY header (-o format=npy: NAME.npy), or decoded to float32
 * (-o convert=f32), as the mount's options say; their extended attributes
 * (user.dtype, user.shape...) and the hashes of every file worked out so
 * far (views/tree_digest.h). What the other views ask of a tensor's file. */
#ifndef TFS_TENSOR_H
#define TFS_TENSOR_H

#include <stddef.h>
#include <stdint.h>

#include "views/tensorfiles.h"
#include "views/tree.h"

/* What a tensor's file is, as its xattrs and its directory's table say it.
 * user.dtype: "F32" when converted, else the stored dtype. */
const char *tfs_node_dtype(const struct tfs_tree *t, const struct tfs_node *n, size_t *len);
/* user.shape, "[3,4]": at most tfs_node_shape_max() bytes, no NUL. */
size_t tfs_node_shape_max(const struct tfs_tree *t, const struct tfs_node *n);
size_t tfs_node_shape(const struct tfs_tree *t, const struct tfs_node *n, char *out);
/* user.offsets, "[begin,end]" (absolute, in the shard): no NUL. */
#define TFS_OFFSETS_MAX 48
size_t tfs_node_offsets(const struct tfs_tree *t, const struct tfs_node *n, char *out);

#endif
