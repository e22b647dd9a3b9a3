/* The FUSE low-level glue: the only place that speaks errno. */
#ifndef TFS_FUSE_H
#define TFS_FUSE_H

#define FUSE_USE_VERSION 312
#include <fuse_lowlevel.h>
#include <stdbool.h>
#include <sys/types.h>

#include "model/model.h"
#include "views/tree.h"

struct tfs_fs {
	const struct tfs_model *m;
	const struct tfs_tree *tree;
	uid_t uid;
	gid_t gid;
	bool direct_io;
	bool nosplice; /* asked for by the user */
	bool splice;   /* granted by the kernel at INIT */
	/* Called once, by the first request after INIT: the kernel sends no
	 * request before INIT is complete, which is when mount-wide settings
	 * (readahead) stop being overwritten. */
	void (*after_init)(void *ctx);
	void *after_init_ctx;
	int after_init_done;
	double timeout;
	/* Drops pages behind sequential readers of generated files; NULL
	 * (no -o export, or direct_io) keeps every page (fuse/behind.h). */
	struct tfs_behind *behind;
	/* -o export_cache: generated files through the page cache even where
	 * direct I/O could keep shared mmap (fuse/kinit.h). */
	bool export_cache;
};

extern const struct fuse_lowlevel_ops tfs_fuse_ops;

int tfs_errno(tfs_err e);

#endif
