/* The inode table: every file and directory of a mount, built once before
 * the mount appears and never changed, so the file-system side needs no
 * locks. Inode numbers are node indexes (1 is the root, as FUSE requires).
 *
 * The tree makes the directories of the layout and a file per tensor;
 * every other file is a view's (views/view.h), added through the
 * registry: the tree knows no view by name.
 *
 * A view's directory may be *generated* (tfs_tree_generate): its entries
 * are files the view names and finds when asked (a Zarr array's chunks),
 * never nodes, so it costs one node however many entries it has (at most
 * TFS_TREE_GENERATED_MAX). Their inode numbers are worked out, above every
 * node's: the directory's node in the high 32 bits, the entry's index in
 * the low ones (tfs_tree_gen_ino); tfs_tree_node gives a node for either
 * kind of number. */
#ifndef TFS_TREE_H
#define TFS_TREE_H

#include <pthread.h>
#include <stdint.h>
#include <stddef.h>

#include "core/err.h"
#include "core/opts.h"

#include "model/model.h"

/* Appended to a tensor's file name in the tree layout when a directory has
 * the same name (tensors "a.b" and "a.b.c"). Components never hold '.', so
 * no component can produce it. */
#define TFS_CONFLICT_SUFFIX ".tensor"

enum tfs_layout { TFS_LAYOUT_FLAT, TFS_LAYOUT_TREE };

/* A node's kind is its view's index in the registry (views/view.h); these
 * two are the tree's own. */
enum { TFS_NODE_DIR = 1, TFS_NODE_TENSOR = 2 };
/* At most this many views are registered. */
#define TFS_VIEWS_MAX 24

struct tfs_node {
	const char *fname; /* NUL-terminated; never holds '/' or NUL */
	uint32_t fname_len;
	uint32_t parent;
	uint32_t shard; /* tensor: which shard; generated dir: its number of
			     * entries */
	uint32_t ref;   /* tensor: index in the shard's header; dir: number
			     * of subdirectories; a view's file: the view's
			     * (its slot in the view's state); generated dir:
			     * the view's; a generated entry: its index */
	uint32_t first; /* dir: first index into children; tensor: the
			     * length of its own bytes before the tensor's
			     * (an NPY header, 0 without); a file beside a
			     * tensor's or named after a node: that node; a
			     * generated entry: its directory's ref */
	uint32_t count; /* dir: number of children (none when generated) */
	uint8_t kind;
	uint8_t gen; /* dir: the kind of the view generating its entries, or 0 */
};

struct tfs_tree {
	const struct tfs_model *m;
	struct tfs_node *nodes; /* [0] unused, [1] root */
	uint32_t nnodes;
	uint32_t *children;
	char *fnames;    /* mapped names that are not the tensor names */
	uint32_t *slots; /* node index keyed by (parent, fname); 0 empty */
	size_t nslots;
	uint64_t total_bytes; /* the tensors' and the sized files' bytes, for statfs */
	uint64_t generated;   /* entries of generated directories, for statfs */
	/* Each wanted view's state, by kind (views/view.h); NULL for a view
	 * the options do not want. */
	void *vstate[TFS_VIEWS_MAX];
	/* How the tensors' files show their tensors (TFS_FORM_*). */
	unsigned form;
	/* The digests of its files worked out so far (views/tree_digest.h). */
	struct tfs_digests *digests;
};

struct tfs_tree_opts {
	enum tfs_layout layout;
	/* The views' -o options as the command line collected them (views/
	 * view.h, opts), or NULL: the tensors' files alone, named as in a
	 * plain mount (the unit tests' and fuzzers' plainest tree; --verify
	 * builds its trees with the command line's options, so that it hashes
	 * the files a mount with them shows). */
	const struct tfs_opts *opts;
};

/* ---- for a view's files (views/view.h: at_root, per_dir) ---- */

#define TFS_TREE_ROOT 1u
struct tfs_tree_add;

/* A file of the view's kind with its `ref`, or with dir set a directory
 * (whose node index *out gets, if out), under node `parent`, named `name`
 * (a plain name, TFS_NAME_MAX bytes at most, living as long as the tree:
 * a literal, or held by the view's state). */
tfs_err tfs_tree_add_node(struct tfs_tree_add *a, uint32_t parent, const char *name, int dir, uint32_t ref,
			  uint32_t *out);

/* The state of a view with one file in some directories (the tables, the
 * sums), first member of the view's own: a lock and one slot of `size`
 * bytes per file, indexed by the file's ref. */
struct tfs_dir_files {
	pthread_mutex_t lock;
	uint32_t n;
	size_t cap, size;
	void *slots;
};
/* A zeroed state of state_size bytes (struct tfs_dir_files first), its
 * slots of slot_size bytes; NULL when out of memory. */
void *tfs_dir_files_new(size_t state_size, size_t slot_size);
/* Frees the state, calling each (if not NULL) on every slot first. */
void tfs_dir_files_free(struct tfs_dir_files *f, void (*each)(void *slot));
/* The file `name` in `dir` with a new zeroed slot (*slot, if slot). */
tfs_err tfs_dir_files_add(struct tfs_dir_files *f, struct tfs_tree_add *a, uint32_t dir, const char *name,
			  void **slot);
static inline void *tfs_dir_file(const struct tfs_dir_files *f, uint32_t ref)
{
	return (char *)f->slots + (size_t)ref * f->size;
}
/* A file of the view's kind named after node `of` by the view's `name`
 * (views/view.h), under `parent`. */
tfs_err tfs_tree_add_after(struct tfs_tree_add *a, uint32_t parent, uint32_t of, uint32_t ref, uint32_t *out);
/* At most this many entries in a generated directory: as many as a remote
 * listing may hold (sources/remote.h), and what a file manager can show. */
#define TFS_TREE_GENERATED_MAX 1000000u
/* Directory `dir`, made by this view (tfs_tree_add_node) with nothing
 * added under it, has `count` entries
 * (TFS_TREE_GENERATED_MAX at most, else TFS_ERR_TOOBIG) that the view
 * names and finds on demand (views/view.h: entry_name, entry_find): each
 * a file of the view's kind whose node (made when asked, never kept) has
 * `parent` dir, `ref` its index and `first` the directory's `ref`. */
tfs_err tfs_tree_generate(struct tfs_tree_add *a, uint32_t dir, uint32_t ref, uint32_t count);
/* What every directory's name leaves free for a file named after it
 * (views/view.h: dir_room; D.dir.safetensors): the most any view asks,
 * wanted or not. A view naming directories of its own as the tree layout
 * does (-o zarr's groups) leaves as much. */
size_t tfs_tree_dir_room(void);
/* Bytes of a file whose size is known now, counted in the mount's size. */
void tfs_tree_add_bytes(struct tfs_tree_add *a, uint64_t bytes);
/* The tree being built (its nodes so far) and its model and options. */
const struct tfs_tree *tfs_tree_add_tree(const struct tfs_tree_add *a);
const struct tfs_tree_opts *tfs_tree_add_opts(const struct tfs_tree_add *a);
/* Whether directory `dir` holds a tensor's file (not only directories). */
int tfs_tree_add_holds_tensors(const struct tfs_tree_add *a, uint32_t dir);

/* ---- the tree ---- */

tfs_err tfs_tree_build(const struct tfs_model *m, const struct tfs_tree_opts *o, struct tfs_tree *out,
		       struct tfs_diag *d);
void tfs_tree_free(struct tfs_tree *t);

/* Returns the child's node index, or 0 (nodes only: not a generated
 * directory's entries). */
uint32_t tfs_tree_lookup(const struct tfs_tree *t, uint32_t parent, const char *name, size_t len);

/* The inode number of a generated directory's entry i. */
static inline uint64_t tfs_tree_gen_ino(uint32_t dir, uint32_t i)
{
	return (uint64_t)dir << 32 | i;
}
/* The node of inode ino: the tree's own, or a generated directory's entry
 * made into *tmp; NULL when there is none. */
const struct tfs_node *tfs_tree_node(const struct tfs_tree *t, uint64_t ino, struct tfs_node *tmp);
/* The inode of `name` in directory `parent` (generated or not), or 0. */
uint64_t tfs_tree_find(const struct tfs_tree *t, uint32_t parent, const char *name, size_t len);
/* Entry i of directory dir: its name (*name: the node's, or made into buf
 * of TFS_NAME_MAX + 1 bytes), its inode; 0 past the last. */
int tfs_tree_entry(const struct tfs_tree *t, uint32_t dir, uint64_t i, char *buf, const char **name,
		   uint64_t *ino);
/* Entries of directory dir. */
static inline uint64_t tfs_tree_entries(const struct tfs_tree *t, uint32_t dir)
{
	const struct tfs_node *d = &t->nodes[dir];
	return d->gen ? d->shard : d->count;
}

/* The size of the file that a node shows, through its view. */
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

/* Whether the tree holds a view's files that are generated
 * (TFS_VIEWF_GENERATED). */
int tfs_tree_generates(const struct tfs_tree *t);

/* ---- the tensors' files (views/tree_tensor.c) ---- */

/* How a tensor's file shows its tensor (docs/views.md), from -o format
 * and -o convert: the tree's own options, which the tensors' view
 * declares (tfs_tree_tensor_opts) and checks (tfs_tree_tensor_check). */
enum {
	TFS_FORM_NPY = 1, /* NAME.npy: an NPY header, then the data */
	TFS_FORM_F32 = 2, /* narrow float dtypes decoded to float32 */
};
#define TFS_NPY_SUFFIX ".npy"
extern const struct tfs_opt_spec tfs_tree_tensor_opts[];
tfs_err tfs_tree_tensor_check(const struct tfs_opts *o, struct tfs_diag *d);
/* The form these options ask for (o may be NULL: stored bytes). */
unsigned tfs_tree_form(const struct tfs_opts *o);
/* The length of the bytes a tensor's file has before the tensor's (its
 * NPY header; 0 without one), into *first. */
tfs_err tfs_tree_npy_len(unsigned form, const struct tfs_table *h, const struct tfs_tensor *ts,
			 uint32_t *first);

/* Converted: served as float32 (convert=f32 and a dtype it decodes). */
int tfs_node_converted(const struct tfs_tree *t, const struct tfs_node *n);
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
