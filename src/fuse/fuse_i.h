/* What the FUSE glue's files share: the request's filesystem and the
 * inode's node. Not for the rest of tensorfs (fuse/fuse.h is). */
#ifndef TFS_FUSE_I_H
#define TFS_FUSE_I_H

#include "fuse/fuse.h"

/* The first request after INIT also runs the after-INIT hook (see
 * struct tfs_fs): every operation goes through here. */
static inline struct tfs_fs *tfs_fs_of(fuse_req_t req)
{
	struct tfs_fs *fs = fuse_req_userdata(req);
	if (fs->after_init && !__atomic_load_n(&fs->after_init_done, __ATOMIC_ACQUIRE) &&
	    !__atomic_exchange_n(&fs->after_init_done, 1, __ATOMIC_ACQ_REL))
		fs->after_init(fs->after_init_ctx);
	return fs;
}

static inline const struct tfs_node *tfs_node_of(const struct tfs_fs *fs, fuse_ino_t ino)
{
	if (ino < 1 || ino >= fs->tree->nnodes)
		return NULL;
	return &fs->tree->nodes[ino];
}

/* The extended attributes (fuse/xattr.c). */
void tfs_fuse_getxattr(fuse_req_t req, fuse_ino_t ino, const char *name, size_t size);
void tfs_fuse_listxattr(fuse_req_t req, fuse_ino_t ino, size_t size);

#endif
