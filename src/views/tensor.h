/* The tensors' files (views/tensor.c): each tensor's stored bytes (raw),
 * after an NPY header (-o format=npy: NAME.npy), or decoded to float32
 * (-o convert=f32), as the mount's options say; their extended attributes
 * (user.dtype, user.shape...) and the hashes of every file worked out so
 * far (views/digest.h). What the other views ask of a tensor's file. */
#ifndef TFS_TENSOR_H
#define TFS_TENSOR_H

#include <stddef.h>
#include <stdint.h>

#include "views/convert.h"
#include "views/tree.h"

#define TFS_NPY_SUFFIX ".npy"

/* How a tensor's file shows it (README, "Views for tools"). */
enum {
	TFS_VIEW_NPY = 1, /* NAME.npy: an NPY header, then the data */
	TFS_VIEW_F32 = 2, /* narrow float dtypes decoded to float32 */
};

/* The tensor view's state (the tree's vstate[TFS_NODE_TENSOR]). */
struct tfs_tensor_files {
	unsigned view; /* TFS_VIEW_* */
	struct tfs_digests *digests;
};

static inline const struct tfs_tensor_files *tfs_tensor_files(const struct tfs_tree *t)
{
	return (const struct tfs_tensor_files *)t->vstate[TFS_NODE_TENSOR];
}

/* Converted: served as float32 (convert=f32 and a dtype it decodes). */
static inline int tfs_node_converted(const struct tfs_tree *t, const struct tfs_node *n)
{
	return (tfs_tensor_files(t)->view & TFS_VIEW_F32) && tfs_converts(tfs_node_tensor(t, n)->dtype);
}

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
