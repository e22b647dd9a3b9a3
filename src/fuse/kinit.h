/* One kernel capability libfuse 3.14 cannot ask for.
 *
 * Linux 6.6 (FUSE protocol 7.39) lets a file opened with FOPEN_DIRECT_IO
 * still be mapped MAP_SHARED, if the daemon's INIT reply says
 * FUSE_DIRECT_IO_ALLOW_MMAP. libfuse 3.14 keeps 32-bit capability masks and
 * has no name for that bit (it is bit 36), so it never sends it. This shim
 * routes the session's /dev/fuse traffic through libfuse's documented
 * custom-I/O hooks and adds the bit to the INIT reply when, and only when,
 * the kernel offered it in the INIT request. Everything else passes
 * through unchanged.
 *
 * Why it matters: a generated file (-o export) read through the page cache
 * costs the reader a fresh page per 4 KiB, which halved cp's speed; direct
 * I/O avoids that, and with this bit np.memmap and safetensors' loader
 * (MAP_SHARED) still work on it. */
#ifndef TFS_KINIT_H
#define TFS_KINIT_H

#include <stdbool.h>

struct fuse_session;

/* After fuse_session_mount, before the loop. 0, or -1 if libfuse refused
 * the hooks (the session then goes on without them). */
int tfs_kinit_attach(struct fuse_session *se);

/* True once the INIT reply carried FUSE_DIRECT_IO_ALLOW_MMAP: direct_io
 * files of this mount can be mapped shared. No request but INIT arrives
 * before that reply, so every open sees the final answer. */
bool tfs_kinit_dio_mmap(void);

#endif
