/* The tensors' view's state and what every view may ask of it without
 * calling into views/tensor.c (digest.c keeps its hashes there). */
#ifndef TFS_TENSORFILES_H
#define TFS_TENSORFILES_H

#include "compute/convert.h"
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

#endif
