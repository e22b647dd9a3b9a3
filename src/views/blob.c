/* A file whose bytes the tree holds in memory (__metadata__.json, made
 * the first time it is looked at). */
#include "views/tree.h"
#include "views/view.h"

static uint64_t size(const struct tfs_tree *t, const struct tfs_node *n)
{
	const char *data;
	size_t len;
	return tfs_tree_blob(t, n->ref, &data, &len) ? 0 : len;
}

static tfs_err pieces(const struct tfs_tree *t, const struct tfs_node *n, uint64_t off, size_t len,
		      struct tfs_pieces *out)
{
	const char *data;
	size_t dl;
	tfs_err e = tfs_tree_blob(t, n->ref, &data, &dl);
	if (e)
		return e;
	if (off > dl || len > dl - off)
		return TFS_ERR_NOMEM; /* could not be made when its size was asked for */
	return tfs_pieces_mem(out, data + off, len);
}

const struct tfs_view_ops tfs_view_blob = {
	.name = "blob",
	.size = size,
	.pieces = pieces,
};
