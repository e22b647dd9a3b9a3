/* The inode tree while it is built: shared by views/tree.c (the nodes)
 * and views/tree_names.c (their names). Private to those two. */
#ifndef TFS_TREE_I_H
#define TFS_TREE_I_H

#include "views/tree.h"

/* Building state: names before they are mapped, and the directory index
 * keyed by raw component bytes (two components must never share a directory
 * because their mapped names happen to meet). */
struct build {
	struct tfs_tree *t;
	const char **raw; /* per node: raw name bytes (not NUL-terminated) */
	uint32_t *raw_len;
	uint8_t *conflict; /* per node: tensor whose name a directory has */
	size_t cap;
	uint32_t *dslots; /* directory node keyed by (parent, raw) */
	size_t ndslots, ndirs;
	const struct tfs_model *m;
	const struct tfs_tree_opts *o;
	size_t npy_len; /* of the .npy suffix, 0 without format=npy */
	uint32_t root, first_user;
	uint64_t *foff; /* per node: its name's offset in t->fnames */
	size_t fcap, flen;
	uint32_t *late; /* hashed names that met another */
	uint32_t nlate;
	/* The suffixes of the wanted views with a file beside every tensor's
	 * (".stats.json", ".png"), found once by add_beside. */
	const char *beside[TFS_NODE_KINDS];
	unsigned nbeside;
};

tfs_err tfs_tree_node_new(struct build *b, uint32_t *out);
/* Inserts node `ni` into the lookup index; 0, or the node that has its name. */
uint32_t tfs_tree_slot_insert(struct tfs_tree *t, uint32_t ni);

/* The naming steps, in this order, once every node is added. */
tfs_err tfs_tree_name_files(struct build *b);
tfs_err tfs_tree_index_names(struct build *b, struct tfs_diag *d);
tfs_err tfs_tree_name_beside(struct build *b, struct tfs_diag *d);
/* Whether node ni's kind is a view's with a file beside every tensor's. */
int tfs_tree_is_beside(const struct tfs_tree *t, uint32_t ni);

#endif
