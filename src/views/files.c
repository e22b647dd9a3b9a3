/* The view of one of the source's own files (-o originals, in __files__):
 * its bytes as views/originals.c reads them. */
#include "views/originals.h"
#include "views/tree.h"
#include "views/view.h"

static uint64_t original_size(const struct tfs_tree *t, const struct tfs_node *n)
{
	return tfs_originals_size(t->originals, n->ref);
}

static tfs_err original_pieces(const struct tfs_tree *t, const struct tfs_node *n, uint64_t off, size_t len,
			       struct tfs_pieces *out)
{
	char *to = tfs_pieces_room(out, len);
	if (!to)
		return TFS_ERR_NOMEM;
	tfs_err e = tfs_originals_read(t->originals, n->ref, to, len, off);
	return e ? e : tfs_pieces_mem(out, to, len);
}

const struct tfs_view_ops tfs_view_original = {
	.name = "original",
	.size = original_size,
	.pieces = original_pieces,
};
