/* Views: how the tensor table is shown as files. Each kind of file of the
 * tree (a tensor's file in its raw, .npy or float32 form, __metadata__.json,
 * a directory's __tensors__.tsv, an -o export file, one of the source's own
 * files) has one view driver that gives the file's size and, for any range
 * of it, the pieces it is made of: memory, or a range of a source. The FUSE
 * side asks the node's view and writes the pieces out (spliced, mapped or
 * copied); it knows no view by name. Adding a view is adding its driver
 * file, a node kind and one line in views/registry.c. */
#ifndef TFS_VIEW_H
#define TFS_VIEW_H

#include <stddef.h>
#include <stdint.h>

#include "core/err.h"
#include "core/source.h"

struct tfs_tree;
struct tfs_node;
struct tfs_model;
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

/* A large generated file: read in 1 MiB blocks, and its pages dropped
 * behind a sequential reader (or direct I/O where it may still be mapped). */
#define TFS_VIEWF_GENERATED 1u

struct tfs_view_ops {
	const char *name;
	unsigned flags; /* TFS_VIEWF_* */
	uint64_t (*size)(const struct tfs_tree *t, const struct tfs_node *n);
	/* The pieces of [off, off + len), a range inside the file. */
	tfs_err (*pieces)(const struct tfs_tree *t, const struct tfs_node *n, uint64_t off, size_t len,
			  struct tfs_pieces *out);
	/* Optional: whether the file can be opened now (a generated file
	 * checks its sources); TFS_OK if so. Each open that succeeds is
	 * followed by one release (optional) when the file is closed: what a
	 * reader reads in several requests (a picture) is kept until then. */
	tfs_err (*open)(const struct tfs_tree *t, const struct tfs_node *n);
	void (*release)(const struct tfs_tree *t, const struct tfs_node *n);
	/* Optional: the view's state for the tree, made for `count` nodes of
	 * its kind when the tree is built, freed with the tree. */
	void *(*state_new)(uint32_t count);
	void (*state_free)(void *state);
	/* Optional: a warning about the tree to say once at mount (what the
	 * view cannot show), into buf; 0 when there is none. */
	int (*notice)(const struct tfs_tree *t, char *buf, size_t cap);
	/* Optional: adds the view's own files to a tree being built, after
	 * the tensors (views/tree.h, tfs_tree_add_node), or nothing when the
	 * options or the model do not call for them. `state` is the view's
	 * (state_new(0)), kept in the tree's vstate[kind]. */
	tfs_err (*add)(const struct tfs_model *m, const struct tfs_tree_opts *o, void *state,
		       struct tfs_tree_add *a, struct tfs_diag *d);
	/* Optional, for a view with a file beside every tensor file NAME
	 * when wanted(o): that file is NAME followed by `beside` (".png"),
	 * or `beside_long` with the tensor's node number for its %u when
	 * NAME leaves no room (a shape the name mapping reserves). Its node's
	 * `first` is the tensor's node, `ref` its slot in the view's state
	 * (state_new(number of tensor files)), kept in the tree's vstate. */
	const char *beside;
	const char *beside_long;
	int (*wanted)(const struct tfs_tree_opts *o);
	/* Optional: the view's own mount options (-o stats), NULL-terminated
	 * by name; the command line takes them as it takes the source
	 * drivers', and the tree's options carry them (tfs_tree_opts, opts). */
	const struct tfs_opt_spec *opts;
};

/* Whether some view takes mount option `name`; the k-th of every view's
 * options, NULL past the last (for --help). */
const struct tfs_opt_spec *tfs_view_opt(const char *name, size_t len);
const struct tfs_opt_spec *tfs_view_opt_at(size_t k);

/* Every view's notice about the tree, one call of say() each. */
void tfs_views_notice(const struct tfs_tree *t, void (*say)(void *ctx, const char *line), void *ctx);

/* The drivers by node kind (views/registry.c); NULL for a directory.
 * views/tree.h asks them (tfs_node_size, tfs_node_pieces). */
extern const struct tfs_view_ops *const tfs_views[];
extern const unsigned tfs_nviews;

static inline const struct tfs_view_ops *tfs_view_of_kind(unsigned kind)
{
	return kind < tfs_nviews ? tfs_views[kind] : NULL;
}

#endif
