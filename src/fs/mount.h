/* The one pipeline from a SOURCE to what is shown: the model (sources and
 * formats, model/model.h), the metadata edits applied to every shard's
 * table (-o edits=), then the file tree of the views (views/tree.h). The
 * mount, --inspect, --verify, --stats and diff all open a checkpoint here,
 * so each of them sees the same checkpoint. */
#ifndef TFS_MOUNT_H
#define TFS_MOUNT_H

#include "core/err.h"
#include "core/opts.h"
#include "model/model.h"
#include "views/tree.h"

struct tfs_mount_opts {
	const char *source;                 /* as the sources take it (absolute if a path) */
	const char *shown;                  /* SOURCE as messages name it (no secret) */
	const struct tfs_model_opts *model; /* the source drivers' and formats' options */
	const char *edits;                  /* -o edits=FILE (absolute), or NULL */
	/* Whether to build the tree: the mount's (the views' options, the
	 * layout); the tools take the model alone. */
	int tree;
	enum tfs_layout layout;
	const struct tfs_opts *opts;
};

struct tfs_mount {
	struct tfs_model model;
	struct tfs_tree tree; /* empty without opts.tree */
};

/* On failure, one line for the user in *line (quoted, without the
 * "tensorfs: " prefix) and nothing to free. */
#define TFS_MOUNT_LINE_MAX (TFS_DIAG_MAX + 1100)
tfs_err tfs_mount_open(const struct tfs_mount_opts *o, struct tfs_mount *out, char *line, size_t cap);
void tfs_mount_close(struct tfs_mount *m);

#endif
