/* The FUSE low-level glue: the only place that speaks errno. */
#ifndef TFS_FUSE_H
#define TFS_FUSE_H

#define FUSE_USE_VERSION 312
#include <fuse_lowlevel.h>
#include <stdbool.h>
#include <sys/types.h>

#include "tfs_model.h"
#include "tfs_tree.h"

struct tfs_fs {
	const struct tfs_model *m;
	const struct tfs_tree *tree;
	uid_t uid;
	gid_t gid;
	bool direct_io;
	bool nosplice;  /* asked for by the user */
	bool splice;    /* granted by the kernel at INIT */
	double timeout;
};

extern const struct fuse_lowlevel_ops tfs_fuse_ops;

int tfs_errno(tfs_err e);

#endif
