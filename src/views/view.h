/* Views: how the tensor table is shown as files. A view is one whole
 * plug-in, declared in its own file by a struct tfs_view_ops: its -o
 * options, whether a mount wants it, the root names it reserves, the files
 * it adds (at the root, per directory, beside each tensor's file, and
 * directories of its own anywhere, one per tensor if it likes, whose
 * entries it may name on demand: docs/architecture.md, "Adding a view"),
 * each file's size and pieces, its extended attributes, and whether its
 * files are generated (the page-cache policy follows from that). The tree
 * (views/tree.h) and the file-system core (fs/) ask the registry
 * (views/registry.c) and know no view by name: adding a view is its file
 * and one line there. */
#ifndef TFS_VIEW_H
#define TFS_VIEW_H

#include <stddef.h>
#include <stdint.h>

#include "core/err.h"
#include "core/source.h"

struct tfs_tree;
struct tfs_node;
struct tfs_model;
struct tfs_table;
struct tfs_tensor;
struct tfs_tree_opts;
struct tfs_tree_add;

/* A piece of a file: `len` bytes at mem, or, where mem is NULL, bytes
 * [off, off + len) of src, inside an object (a tensor) that ends at limit
 * (a remote source reads ahead from there). */
struct tfs_piece {
	const void *mem;
	struct tfs_source *src;
	uint64_t off, limit;
	size_t len;
};

/* Where a view puts the pieces of a read: up to `max` pieces (past that,
 * the bytes are copied into `out`, the last piece growing), `out` for the
 * bytes a view makes (at most the read's length in all), `scratch` for
 * what it needs meanwhile (stored bytes being decoded: reset by each use). */
struct tfs_pieces {
	struct tfs_piece *v;
	unsigned n, max;
	char *out;
	size_t used, cap;
	char *scratch;
	size_t scratch_cap;
	/* A larger scratch (the old one's contents are lost), or NULL. */
	char *(*grow)(size_t need);
};

/* Scratch of at least `need` bytes, or NULL. No piece may point into it. */
char *tfs_pieces_scratch(struct tfs_pieces *p, size_t need);

/* Room in `out` for len bytes the view makes, then to be added with
 * tfs_pieces_mem; NULL when there is none (the caller sized it wrong). */
void *tfs_pieces_room(struct tfs_pieces *p, size_t len);
tfs_err tfs_pieces_mem(struct tfs_pieces *p, const void *mem, size_t len);
tfs_err tfs_pieces_src(struct tfs_pieces *p, struct tfs_source *src, uint64_t off, size_t len,
		       uint64_t limit);

/* Bytes [o, o + len) of tensor t (stored in src) as float32, as
 * -o convert=f32 shows it, appended to out: only the stored units that
 * hold those elements are read (into out's scratch) and decoded. */
struct tfs_tensor;
tfs_err tfs_f32_pieces(struct tfs_source *src, const struct tfs_tensor *t, uint64_t o, size_t len,
		       struct tfs_pieces *out);

/* The view's flags. */
enum {
	/* Its files are made from others (a safetensors file of a directory):
	 * read in 1 MiB blocks, their pages never kept (direct I/O where the
	 * kernel still lets them be mapped, else dropped behind a sequential
	 * reader), and any shard changed makes them unreadable. */
	TFS_VIEWF_GENERATED = 1u,
	/* Its files are added before the tensors' (their inode numbers never
	 * move a tensor's): __metadata__.json is always inode 2. */
	TFS_VIEWF_FIRST = 2u,
	/* Its files come first in their directory's listing. */
	TFS_VIEWF_LEAD = 4u,
};

struct tfs_view_ops {
	const char *name;
	unsigned flags; /* TFS_VIEWF_* */

	/* ---- options ---- */
	/* Optional: its -o options, NULL-terminated by name; the command line
	 * collects them (tfs_tree_opts, opts) and --help lists them. An option
	 * of another view's that this one follows too is listed here without
	 * help (gguf's model.gguf comes with -o export): --help and the
	 * lookup take the declaring view's; a view reads no option it does
	 * not list. */
	const struct tfs_opt_spec *opts;
	/* Optional: the options' values checked before anything is opened;
	 * TFS_ERR_INVAL with one line ("-o format= takes raw or npy..."). */
	tfs_err (*check)(const struct tfs_opts *o, struct tfs_diag *d);
	/* Whether a tree with these options has the view's files; NULL:
	 * always. A tree whose opts is NULL (tree.h: struct tfs_tree_opts) has
	 * only the views that are always there. */
	int (*wanted)(const struct tfs_tree_opts *o);
	/* Optional, for a view whose files are generated: whether the options
	 * ask that generated files go through the page cache after all
	 * (-o export_cache): then nothing is direct I/O, and pages are dropped
	 * behind a sequential reader instead. */
	int (*keep_pages)(const struct tfs_opts *o);
	/* Optional, when wanted: names of the root its files take under these
	 * options (NULL-terminated): a tensor's file of such a name has its
	 * first '.' or '_' escaped (model.gguf -> model%2Egguf). */
	const char *const *(*reserves)(const struct tfs_tree_opts *o);
	/* Bytes every directory's name leaves free for the name of a file
	 * named after it (D.dir.safetensors), wanted or not: a tensor's path
	 * never depends on the options. */
	unsigned dir_room;

	/* ---- its files, added when the tree is built ---- */
	/* Optional: the view's state for the tree (NULL: out of memory), kept
	 * in the tree's vstate[kind] (kind: its registry index, its files'
	 * node kind) and freed with the tree. */
	void *(*state_new)(const struct tfs_model *m, const struct tfs_tree_opts *o);
	void (*state_free)(void *state);
	/* Optional, each in this order, after the tensors' files (before them
	 * with TFS_VIEWF_FIRST): files and directories of the root, and any
	 * of the view's own anywhere (a directory per tensor: the tensors'
	 * nodes are all there); for every directory the layout makes (the
	 * root first) (views/tree.h: tfs_tree_add_*). A failure says why in
	 * d, but for memory. */
	tfs_err (*at_root)(struct tfs_tree_add *a, void *state, struct tfs_diag *d);
	tfs_err (*per_dir)(struct tfs_tree_add *a, void *state, uint32_t dir);
	/* Optional: a file beside every tensor's file NAME: NAME followed by
	 * `beside` (".png"), or `beside_long` with the tensor's node number
	 * for its %u when NAME leaves no room. Its node's `first` is the
	 * tensor's node, `ref` its number among them (0, 1...). In the flat
	 * layout a tensor whose own name ends so is shown with that '.' as
	 * %2E. */
	const char *beside;
	const char *beside_long;
	/* Optional: the name of a file added named after another node
	 * (tfs_tree_add_after: D.safetensors beside directory D), from that
	 * node's name; its length (at most TFS_NAME_MAX). */
	size_t (*name_after)(const struct tfs_tree *t, const struct tfs_node *n, const char *of,
			     size_t of_len, char *out);
	/* For a view with generated directories (views/tree.h:
	 * tfs_tree_generate): the name of entry i (below its count) of
	 * directory node dir into out (TFS_NAME_MAX + 1 bytes), its length;
	 * and whether an entry is named name[0..len), which (*i). Each entry
	 * is a file read through size and pieces, with a node made for it. */
	size_t (*entry_name)(const struct tfs_tree *t, const struct tfs_node *dir, uint32_t i, char *out);
	int (*entry_find)(const struct tfs_tree *t, const struct tfs_node *dir, const char *name, size_t len,
			  uint32_t *i);
	/* Optional: a warning about the tree to say once at mount (what the
	 * view cannot show), into buf; 0 when there is none. */
	int (*notice)(const struct tfs_tree *t, const void *state, char *buf, size_t cap);

	/* ---- reading ---- */
	uint64_t (*size)(const struct tfs_tree *t, const struct tfs_node *n);
	/* The pieces of [off, off + len), a range inside the file. */
	tfs_err (*pieces)(const struct tfs_tree *t, const struct tfs_node *n, uint64_t off, size_t len,
			  struct tfs_pieces *out);
	/* Optional: whether the file can be opened now (a generated file
	 * checks it can be made); TFS_OK if so. Each open that succeeds is
	 * followed by one release (optional) when the file is closed: what a
	 * reader reads in several requests (a picture) is kept until then. */
	tfs_err (*open)(const struct tfs_tree *t, const struct tfs_node *n);
	void (*release)(const struct tfs_tree *t, const struct tfs_node *n);

	/* ---- extended attributes (user.* only) ---- */
	/* Optional: the names the file has, each NUL-terminated, into out (at
	 * most cap bytes); their length. */
	size_t (*xattr_list)(const struct tfs_tree *t, const struct tfs_node *n, char *out, size_t cap);
	/* Optional: attribute `name`'s value into buf (cap bytes), or with buf
	 * NULL only its length (nothing worked out that the length does not
	 * need: a hash's length is known). TFS_ERR_NODATA when the file has
	 * no such attribute, TFS_ERR_TOOBIG when it is over cap. */
	tfs_err (*xattr_get)(const struct tfs_tree *t, const struct tfs_node *n, const char *name, char *buf,
			     size_t cap, size_t *len);
};

/* The registry (views/registry.c), indexed by node kind: NULL for kind 0
 * and for directories (TFS_NODE_DIR), the tensors' files' view at
 * TFS_NODE_TENSOR, then every other. */
extern const struct tfs_view_ops *const tfs_views[];
extern const unsigned tfs_nviews;

static inline const struct tfs_view_ops *tfs_view_of_kind(unsigned kind)
{
	return kind < tfs_nviews ? tfs_views[kind] : NULL;
}

/* The kind of the view named `name`, or 0 (tests, tools). */
unsigned tfs_view_kind(const char *name);

/* Whether some view takes mount option `name`; the k-th of every view's
 * options, NULL past the last (for --help). */
const struct tfs_opt_spec *tfs_view_opt(const char *name, size_t len);
const struct tfs_opt_spec *tfs_view_opt_at(size_t k);

/* Every view's check of its options' values; the first failure. */
tfs_err tfs_views_check(const struct tfs_opts *o, struct tfs_diag *d);

/* Whether some view's options ask generated files through the page cache
 * (keep_pages). */
int tfs_views_keep_pages(const struct tfs_opts *o);

/* Every view's notice about the tree, one call of say() each. */
void tfs_views_notice(const struct tfs_tree *t, void (*say)(void *ctx, const char *line), void *ctx);

#endif
