/* The inode tree while it is built: shared by views/tree.c (the nodes)
 * and views/tree_names.c (their names and the lookup index). Private to
 * those two. */
#ifndef TFS_TREE_I_H
#define TFS_TREE_I_H

#include "core/hash.h"
#include "views/tree.h"

/* Per node while building (struct build, flags). */
enum {
	NODE_CONFLICT = 1, /* a tensor whose name a directory has */
};

/* Building state: names before they are mapped, and the directory index
 * keyed by raw component bytes (two components must never share a directory
 * because their mapped names happen to meet). */
struct build {
	struct tfs_tree *t;
	const char **raw; /* per node: raw name bytes (not NUL-terminated) */
	uint32_t *raw_len;
	uint8_t *flags; /* per node: NODE_* */
	size_t cap;
	uint32_t *dslots; /* directory node keyed by (parent, raw) */
	size_t ndslots, ndirs;
	const struct tfs_model *m;
	const struct tfs_tree_opts *o;
	const char *suffix; /* of every tensor's file (".npy"), or "" */
	size_t suffix_len;
	size_t dir_room; /* what a directory's name leaves free */
	uint32_t root, first_user;
	uint32_t layout_end; /* nodes before it: the root, the tensors, their directories */
	uint64_t *foff;      /* per node: its name's offset in t->fnames */
	size_t fcap, flen;
	uint8_t *holds; /* per directory of the layout: it holds a tensor's file */
	uint32_t *late; /* hashed names that met another */
	uint32_t nlate;
	/* The root names the wanted views take, and the suffixes of the
	 * wanted views with a file beside every tensor's (".png"). */
	const char *reserved[TFS_VIEWS_MAX * 2];
	unsigned nreserved;
	const char *beside[TFS_VIEWS_MAX];
	unsigned nbeside;
};

static inline uint64_t tfs_tree_key_hash(uint32_t parent, const char *name, size_t len)
{
	return tfs_hash(name, len, tfs_hash_seed ^ ((uint64_t)parent * 0x9e3779b97f4a7c15ull));
}

/* Inserts node `ni` into the lookup index; 0, or the node that has its name. */
uint32_t tfs_tree_slot_insert(struct tfs_tree *t, uint32_t ni);

/* The naming steps, in this order, once every node is added. */
tfs_err tfs_tree_name_files(struct build *b);
tfs_err tfs_tree_index_names(struct build *b, struct tfs_diag *d);
tfs_err tfs_tree_name_beside(struct build *b, struct tfs_diag *d);

#endif
