/* The byte source behind a mount.
 *
 * Every read of tensor bytes goes through this interface so that sources
 * other than a local file (HTTP range requests are planned) can be added
 * without touching the FUSE glue or the format layer. */
#ifndef TFS_SOURCE_H
#define TFS_SOURCE_H

#include <stdint.h>
#include <stddef.h>
#include <sys/types.h>

#include "tfs_err.h"

/* What identifies the bytes of a source, to tell whether it changed. */
struct tfs_identity {
	uint64_t size;
	uint64_t dev, ino;
	int64_t mtime_sec, mtime_nsec;
	int64_t ctime_sec, ctime_nsec;
};

struct tfs_source;

struct tfs_source_ops {
	/* Reads exactly `len` bytes at absolute offset `off`, looping over
	 * short transfers. Fewer bytes available than asked is TFS_ERR_SHORT,
	 * never a partial success: a caller must not serve bytes that are not
	 * there. */
	tfs_err (*pread)(struct tfs_source *s, void *buf, size_t len, uint64_t off);
	/* The identity now (re-read from the source, not cached). */
	tfs_err (*identity)(struct tfs_source *s, struct tfs_identity *id);
	void (*close)(struct tfs_source *s);
};

struct tfs_source {
	const struct tfs_source_ops *ops;
	/* Absolute path or URL, for user.source and messages. */
	char *location;
	/* Identity when opened: the size that validation was done against. */
	struct tfs_identity id;
	/* A descriptor the bytes can be spliced from, or -1. */
	int fd;
};

static inline tfs_err tfs_source_pread(struct tfs_source *s, void *buf,
				       size_t len, uint64_t off)
{
	return s->ops->pread(s, buf, len, off);
}

void tfs_source_close(struct tfs_source *s);

/* Opens a local file read-only. `path` is kept as given for messages;
 * location becomes its absolute, symlink-free form. */
tfs_err tfs_source_open_file(const char *path, struct tfs_source **out,
			     struct tfs_diag *d);

/* A source over bytes in memory (not copied), for tests and the fuzzer. */
tfs_err tfs_source_open_mem(const void *data, size_t len, const char *name,
			    struct tfs_source **out);

#endif
