/* Drop-behind for sequential readers of generated files, when those are
 * read through the page cache: -o export_cache, or a kernel before 6.6
 * (otherwise they are direct I/O, fuse/kinit.h).
 *
 * A buffered FUSE file keeps its own page cache: a cp of a generated
 * file would leave a second copy of the checkpoint in memory, and taking
 * a fresh page for every 4 KiB of it was most of the copy's cost (cp of
 * the 1 GiB bench export, 8 interleaved runs on a 2-core VM: median
 * 1.85 s without dropping, 1.12 s with, 0.53 s for the source). When one
 * open file is read sequentially, the pages well behind the reader are
 * dropped again, so the reader reuses a few megabytes of memory.
 *
 * Dropping is asked of the kernel by a thread of its own: the kernel may
 * wait on pages whose reads are still being answered, which a request
 * handler must never do (with -s it would wait on itself). */
#ifndef TFS_BEHIND_H
#define TFS_BEHIND_H

#include <stddef.h>
#include <stdint.h>

#include "core/err.h"

struct fuse_session;
struct tfs_behind;

/* At least what is kept behind the furthest request of a sequential
 * reader, and the furthest from it, either way, that a read may land and
 * still count as sequential (readahead requests arrive out of order);
 * both grow with the mount's readahead. */
#define TFS_BEHIND_MIN_KEEP ((uint64_t)8 << 20)
#define TFS_BEHIND_MIN_GAP ((uint64_t)8 << 20)

/* One open file's sequential run. */
struct tfs_stream {
	uint64_t end;                   /* the furthest byte the run has read */
	uint64_t dropped;               /* the run began here, or was dropped up to here */
	struct tfs_stream *prev, *next; /* open streams, freed with b */
};

/* Starts the thread: after any fork, in the process that serves.
 * readahead: the mount's readahead in bytes. */
tfs_err tfs_behind_start(struct tfs_behind **out, struct fuse_session *se, uint64_t readahead);
/* Before the unmount: asks the thread to end and waits a moment for it.
 * Drops not yet made are forgotten. A drop can wait in the kernel on a
 * page whose read will now never be answered; the unmount ends the
 * connection, which ends that wait. */
void tfs_behind_end(struct tfs_behind *b);
/* After the unmount, before the session is destroyed. */
void tfs_behind_free(struct tfs_behind *b);

/* A stream for a newly opened file, NULL without memory; closed on
 * release, or freed with b when the mount ends with files still open. */
struct tfs_stream *tfs_behind_open(struct tfs_behind *b);
void tfs_behind_close(struct tfs_behind *b, struct tfs_stream *s);

/* A read of [off, off + len) of inode ino through stream s: extends or
 * restarts the run, and queues a drop when enough lies behind it. */
void tfs_behind_read(struct tfs_behind *b, struct tfs_stream *s, uint64_t ino, uint64_t off, size_t len);

#endif
