/* The inode table: every file and directory of a mount, built once before
 * the mount appears and never changed, so the FUSE side needs no locks.
 * Inode numbers are node indexes (1 is the root, as FUSE requires). */
#ifndef TFS_TREE_H
#define TFS_TREE_H

#include <pthread.h>
#include <stdint.h>
#include <stddef.h>

#include "core/err.h"

#include "model/model.h"
#include "views/originals.h"

#define TFS_META_NAME "__metadata__.json"
#define TFS_INDEX_NAME "__index__.json"
/* Every directory's table of its entries (README, "The table in every
 * directory"). Names of this shape are reserved by the name mapping. */
#define TFS_TABLE_NAME "__tensors__.tsv"
/* Appended to a tensor's file name in the tree layout when a directory has
 * the same name (tensors "a.b" and "a.b.c"). Components never hold '.', so
 * no component can produce it. */
#define TFS_CONFLICT_SUFFIX ".tensor"
/* -o sums: every directory holding tensor files gets a manifest of their
 * SHA-256s that `sha256sum -c` reads (views/sums.c). */
#define TFS_SUMS_NAME "__sha256sums__.txt"
/* Files beside every tensor file (-o stats, -o pictures) are named by
 * their views (views/view.h, beside). */
/* -o export's generated files: D.safetensors beside every directory D,
 * and the root's. */
#define TFS_EXPORT_SUFFIX ".safetensors"
#define TFS_EXPORT_ROOT "model.safetensors"
/* A root directory that would take the root file's name ("model", as in
 * model.layers.0...) gets this suffix instead. */
#define TFS_EXPORT_CLASH_SUFFIX ".dir.safetensors"
/* -o export of a model whose metadata is typed (GGUF): one GGUF file of it
 * all (views/gguffile.c). */
#define TFS_GGUF_ROOT "model.gguf"
/* -o max_shard_size: the re-sharded set, shards and index, in this
 * directory of the root (views/reshard.c). */
#define TFS_RESHARD_DIR "__shards__"
/* -o zarr: the Zarr store, in this directory of the root (views/zarr.c). */
#define TFS_ZARR_DIR "__zarr__"

enum tfs_layout { TFS_LAYOUT_FLAT, TFS_LAYOUT_TREE };

/* How a tensor's file shows it (README, "Views for tools"). */
enum {
	TFS_VIEW_NPY = 1, /* NAME.npy: an NPY header, then the data */
	TFS_VIEW_F32 = 2, /* narrow float dtypes decoded to float32 */
};
#define TFS_NPY_SUFFIX ".npy"

enum tfs_node_kind {
	TFS_NODE_DIR = 1,
	TFS_NODE_TENSOR,
	TFS_NODE_BLOB,     /* synthetic file with bytes held in memory */
	TFS_NODE_TABLE,    /* a directory's __tensors__.tsv, made when read */
	TFS_NODE_EXPORT,   /* -o export: a directory as one safetensors file */
	TFS_NODE_ORIGINAL, /* -o originals: one of the source's own files */
	TFS_NODE_SUMS,     /* -o sums: a directory's TFS_SUMS_NAME */
	TFS_NODE_STATS,    /* -o stats: a tensor's statistics */
	TFS_NODE_GGUF,     /* -o export of a GGUF model: model.gguf */
	TFS_NODE_RESHARD,  /* -o max_shard_size: the re-sharded set */
	TFS_NODE_PICTURE,  /* -o pictures: a picture of a tensor */
	TFS_NODE_ZARR,     /* -o zarr: a file of __zarr__/ (views/zarr.c) */
	TFS_NODE_KINDS
};

struct tfs_node {
	const char *fname; /* NUL-terminated; never holds '/' or NUL */
	uint32_t fname_len;
	uint32_t parent;
	uint32_t shard; /* tensor: which shard */
	uint32_t ref;   /* tensor: index in the shard's header; blob: blob
			     * index; dir: number of subdirectories; table:
			     * its slot in the listing state; export: its slot
			     * in the exports' state; original: its index;
			     * sums, stats, picture: its slot in the
			     * view's state */
	uint32_t first; /* dir: first index into children; tensor: the
			     * length of its NPY header (0 without one);
			     * export, sums: the directory it covers;
			     * stats, picture: the tensor's node */
	uint32_t count; /* dir: number of children */
	uint8_t kind;
};

/* A synthetic file's bytes. __metadata__.json is made when first looked
 * at (a GGUF vocabulary of 150,000 strings must not cost the mount). */
struct tfs_blob {
	char *data;
	size_t len;
	int ready;
};

struct tfs_tree {
	const struct tfs_model *m;
	struct tfs_node *nodes; /* [0] unused, [1] root */
	uint32_t nnodes;
	uint32_t *children;
	char *fnames;    /* mapped names that are not the tensor names */
	uint32_t *slots; /* node index keyed by (parent, fname); 0 empty */
	size_t nslots;
	struct tfs_blob blobs[2];
	uint32_t nblobs;
	pthread_mutex_t blob_lock;
	uint64_t total_bytes;        /* sum of the tensor and blob sizes, for statfs */
	unsigned view;               /* TFS_VIEW_* */
	struct tfs_listing *listing; /* the tables' state, or NULL without */
	uint32_t ntables;
	struct tfs_exports *exports; /* -o export's state, or NULL without */
	uint32_t nexports;
	struct tfs_originals *originals; /* -o originals, or NULL without */
	struct tfs_sums *sums;           /* -o sums' state, or NULL without */
	uint32_t nsums;
	struct tfs_digests *digests; /* the files' hashes, as they are worked out */
	/* The state of each view that adds its own files (views/view.h, add),
	 * by node kind. */
	void *vstate[TFS_NODE_KINDS];
};

struct tfs_tree_opts {
	enum tfs_layout layout;
	unsigned view; /* TFS_VIEW_* */
	int tables;    /* a TFS_TABLE_NAME in every directory */
	int export;    /* -o export: D.safetensors beside every directory */
	int originals; /* -o originals: the source's own files in __files__ */
	int sums;      /* -o sums: a TFS_SUMS_NAME in every directory with tensors */
	/* The views' own options as the command line collected them
	 * (views/view.h, opts: -o stats, -o pictures), or NULL. */
	const struct tfs_opts *opts;
	uint64_t max_shard_size; /* -o max_shard_size: the re-sharded set; 0 without */
};

/* For a view's `add` (views/view.h): a file of the view's kind with its
 * `ref`, or with dir set a directory (whose index *out gets), under node
 * `parent` (TFS_TREE_ROOT for the root). `name` must live as long as the
 * tree (the view's state can hold it). */
#define TFS_TREE_ROOT 1u
struct tfs_tree_add;
tfs_err tfs_tree_add_node(struct tfs_tree_add *a, uint32_t parent, const char *name, int dir, uint32_t ref,
			  uint32_t *out);

tfs_err tfs_tree_build(const struct tfs_model *m, const struct tfs_tree_opts *o, struct tfs_tree *out,
		       struct tfs_diag *d);
void tfs_tree_free(struct tfs_tree *t);

/* Returns the child's node index, or 0. */
uint32_t tfs_tree_lookup(const struct tfs_tree *t, uint32_t parent, const char *name, size_t len);

/* The size of the file that a node shows, through its view (views/view.h).
 * A table's is worked out the first time it is asked for. */
uint64_t tfs_node_size(const struct tfs_tree *t, const struct tfs_node *n);
/* The pieces of [off, off + len) of the node's file (inside its size),
 * through its view. */
struct tfs_pieces;
tfs_err tfs_node_pieces(const struct tfs_tree *t, const struct tfs_node *n, uint64_t off, size_t len,
			struct tfs_pieces *out);

static inline const struct tfs_tensor *tfs_node_tensor(const struct tfs_tree *t, const struct tfs_node *n)
{
	return &t->m->shards[n->shard].h.t[n->ref];
}

/* What a tensor's file is, as its xattrs and its directory's table say it.
 * Converted: served as float32 (convert=f32 and a dtype it decodes). */
int tfs_node_converted(const struct tfs_tree *t, const struct tfs_node *n);
/* user.dtype: "F32" when converted, else the stored dtype. */
const char *tfs_node_dtype(const struct tfs_tree *t, const struct tfs_node *n, size_t *len);
/* user.shape, "[3,4]": at most tfs_node_shape_max() bytes, no NUL. */
size_t tfs_node_shape_max(const struct tfs_tree *t, const struct tfs_node *n);
size_t tfs_node_shape(const struct tfs_tree *t, const struct tfs_node *n, char *out);
/* user.offsets, "[begin,end]" (absolute, in the shard): no NUL. */
#define TFS_OFFSETS_MAX 48
size_t tfs_node_offsets(const struct tfs_tree *t, const struct tfs_node *n, char *out);

/* A blob's bytes, made on first use; TFS_ERR_NOMEM when they cannot be. */
tfs_err tfs_tree_blob(const struct tfs_tree *t, uint32_t ref, const char **data, size_t *len);

#endif
