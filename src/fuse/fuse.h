/* The FUSE low-level glue: each request turned into one call of the
 * file-system core (fs/fs.h) and its answer into one reply; the only
 * place that speaks errno. */
#ifndef TFS_FUSE_H
#define TFS_FUSE_H

#define FUSE_USE_VERSION 312
#include <fuse_lowlevel.h>
#include <pthread.h>
#include <stdbool.h>
#include <sys/types.h>

#include "fs/fs.h"

struct tfs_fs {
	struct tfs_fs_core core;
	bool nosplice; /* asked for by the user; core.splice: granted at INIT */
	/* Called once, by the first request after INIT: the kernel sends no
	 * request before INIT is complete, which is when mount-wide settings
	 * (readahead) stop being overwritten. */
	void (*after_init)(void *ctx);
	void *after_init_ctx;
	int after_init_done;
	double timeout;
	/* Drops pages behind sequential readers of generated files; NULL
	 * (no generated files, or direct_io) keeps every page (fuse/behind.h). */
	struct tfs_behind *behind;
	/* The open files (struct tfs_handle), under their lock. */
	pthread_mutex_t open_lock;
	struct tfs_handle *open;
};

/* After the session ends: the files still open (no release came) closed. */
void tfs_fuse_close_all(struct tfs_fs *fs);

extern const struct fuse_lowlevel_ops tfs_fuse_ops;

int tfs_errno(tfs_err e);

#endif
