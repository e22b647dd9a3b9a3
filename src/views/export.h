/* -o export: a safetensors file generated for every directory (D gets the
 * sibling D.safetensors) and for the whole mount (model.safetensors). The
 * header is made here; the data bytes are the tensors' own files, read
 * where they are. docs/views.md, "Exported safetensors files", has the layout.
 *
 * Nothing is made at mount time. The first time a file's size is asked
 * for, its tensors are ordered and its header written; the header and the
 * order are kept in a cache bounded in bytes (TFS_EXPORT_BUDGET) and made
 * again, the same bytes, when a read needs them after being dropped. */
#ifndef TFS_EXPORT_H
#define TFS_EXPORT_H

#include <stddef.h>
#include <stdint.h>

#include "core/err.h"

struct tfs_tree;
struct tfs_node;
struct tfs_exports;

/* Headers and orders kept at once, in bytes (the one in use always is);
 * the environment's TENSORFS_EXPORT_BUDGET_MB, when set, instead. */
#define TFS_EXPORT_BUDGET ((size_t)128 << 20)

/* Whether a tensor's file goes into the exports: its dtype as the mount
 * shows it is one safetensors has, and its name is UTF-8. */
int tfs_export_includes(const struct tfs_tree *t, const struct tfs_node *n);

/* How many tensors the exports leave out; `first` gets the first one's
 * quoted name and why, for a warning. */
uint64_t tfs_export_left_out(const struct tfs_tree *t, char *first, size_t firstsz);

/* The generated file's size; 0 when it cannot be made (see _check). */
uint64_t tfs_export_size(const struct tfs_tree *t, const struct tfs_node *n);

/* TFS_OK when the file can be read; else the reason, logged once
 * (a header over safetensors' 100,000,000-byte limit, no memory). */
tfs_err tfs_export_check(const struct tfs_tree *t, const struct tfs_node *n);

/* One piece of a read: header bytes (mem != NULL), or `len` bytes at `off`
 * of tensor node `node`'s data as the mount shows it (after any NPY
 * header: the view's own bytes). */
struct tfs_export_piece {
	const char *mem;
	uint32_t node;
	uint64_t off;
	size_t len;
};

typedef tfs_err (*tfs_export_fn)(void *ctx, const struct tfs_export_piece *p);

/* Calls fn for the pieces of [off, off + len) in order (clipped to the
 * file); stops at the first error fn returns. */
tfs_err tfs_export_walk(const struct tfs_tree *t, const struct tfs_node *n, uint64_t off, size_t len,
			tfs_export_fn fn, void *ctx);

#endif
