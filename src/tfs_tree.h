/* The inode table: every file and directory of a mount, built once before
 * the mount appears and never changed, so the FUSE side needs no locks.
 * Inode numbers are node indexes (1 is the root, as FUSE requires). */
#ifndef TFS_TREE_H
#define TFS_TREE_H

#include <stdint.h>
#include <stddef.h>

#include "tfs_err.h"
#include "tfs_header.h"

#define TFS_META_NAME "__metadata__.json"

enum tfs_node_kind {
	TFS_NODE_DIR = 1,
	TFS_NODE_TENSOR,
	TFS_NODE_BLOB, /* synthetic file with bytes held in memory */
};

struct tfs_node {
	const char *fname;  /* NUL-terminated; never holds '/' or NUL */
	uint32_t fname_len;
	uint32_t parent;
	uint32_t ref;       /* tensor: index in the header; blob: blob index */
	uint32_t first;     /* dir: first index into children */
	uint32_t count;     /* dir: number of children */
	uint8_t kind;
};

struct tfs_blob {
	char *data;
	size_t len;
};

struct tfs_tree {
	const struct tfs_header *h;
	struct tfs_node *nodes; /* [0] unused, [1] root */
	uint32_t nnodes;
	uint32_t *children;
	char *fnames;           /* mapped names that differ from tensor names */
	uint32_t *slots;        /* node index keyed by (parent, fname); 0 empty */
	size_t nslots;
	struct tfs_blob blobs[4];
	uint32_t nblobs;
	uint64_t total_bytes;   /* sum of all file sizes, for statfs */
};

tfs_err tfs_tree_build(const struct tfs_header *h, struct tfs_tree *out,
		       struct tfs_diag *d);
void tfs_tree_free(struct tfs_tree *t);

/* Returns the child's node index, or 0. */
uint32_t tfs_tree_lookup(const struct tfs_tree *t, uint32_t parent,
			 const char *name, size_t len);

/* The size of the file that a node shows. */
uint64_t tfs_node_size(const struct tfs_tree *t, const struct tfs_node *n);

/* __metadata__ as pretty-printed JSON ("{}" when absent or null), with a
 * trailing newline. Written here rather than with json-c because json-c
 * keys are C strings: a key holding U+0000 would be cut short. */
tfs_err tfs_meta_json(const struct tfs_header *h, char **out, size_t *len);

/* Appends a JSON string literal for `s` to a growing buffer. */
tfs_err tfs_json_str(char **buf, size_t *len, size_t *cap, const char *s, size_t n);

#endif
