/* The paths and files a user names (SOURCE, MOUNTPOINT, -o cache_dir=,
 * logfile=, edits=, token_file=, credentials files, manifests): made
 * absolute once, before the daemon leaves the caller's working directory
 * for /, and opened one way, which a hostile file or another local user
 * cannot turn against the mount (a FIFO that blocks it, a link into
 * someone else's files, a file too large to read whole).
 *
 * `what` names the path in messages as the user gave it: "-o edits" makes
 * "-o edits=PATH: ...", a `what` that ends in a space ("manifest ") makes
 * "manifest PATH: ...", and NULL leaves the name out (the caller adds
 * its own). */
#ifndef TFS_USERFILE_H
#define TFS_USERFILE_H

#include <stddef.h>
#include <stdint.h>
#include <sys/stat.h>

#include "core/err.h"

/* path made absolute against the working directory, in *out (malloc'd):
 * as it is when absolute, else the working directory, '/', and path
 * (leading "./" dropped). Symlinks are not resolved: the file may not exist
 * yet (a log file, a cache directory), and what a link names is decided
 * when it is opened. TFS_ERR_INVAL for an empty path or a working
 * directory that is gone. */
tfs_err tfs_path_absolute(const char *what, const char *path, char **out, struct tfs_diag *d);

/* Opens path for reading (O_RDONLY, O_CLOEXEC, O_NOCTTY), as a regular
 * file of at most max bytes (0: any size), in *fd, with its fstat in *st
 * (set, when it exists, for the caller's own message even when refused).
 * Nothing else is opened for reading at all: each part of the path is
 * looked at first through an O_PATH descriptor, so a FIFO never blocks and
 * a device is never opened; the file's type and size are checked on the
 * descriptor that is read.
 * Every symbolic link on the way is followed as Linux's
 * fs.protected_symlinks=1 would, whatever that setting is here: a link in
 * a sticky directory that others may write (/tmp) is followed only when it
 * belongs to the caller or to the directory's owner, never when another
 * user planted it.
 * within: NULL, or an absolute directory without symlinks the file must
 * lie in once every link is followed (what -o originals shows).
 * Errors: TFS_ERR_NOENT (no such file), TFS_ERR_NOTREG (not a regular
 * file), TFS_ERR_INVAL (too large, a link refused, outside `within`),
 * TFS_ERR_OPEN (any other reason, errno's words). */
tfs_err tfs_file_open(const char *what, const char *path, uint64_t max, const char *within, int *fd,
		      struct stat *st, struct tfs_diag *d);

/* The whole file, opened as tfs_file_open does, in *buf (malloc'd and
 * NUL-terminated; *len bytes, which may hold NULs). A file that grows past
 * max while being read is refused as too large. */
tfs_err tfs_file_read(const char *what, const char *path, size_t max, char **buf, size_t *len,
		      struct tfs_diag *d);

/* Opens path to append to it (a log), creating it with mode 0600: never
 * through a symbolic link at its last part (O_NOFOLLOW) nor through a link
 * refused as above, only a regular file, only one that belongs to the
 * caller (the mounting user), and made 0600 if it was not. TFS_ERR_INVAL
 * when refused, TFS_ERR_OPEN when it cannot be opened. */
tfs_err tfs_file_append(const char *what, const char *path, int *fd, struct tfs_diag *d);

/* What a file is now, cheaply (one stat, following links: what a read
 * would open): to tell that a file re-read during a mount (a token file, a
 * credentials file) was replaced or rewritten since. All zero when there
 * is none. */
struct tfs_stamp {
	uint64_t dev, ino, size;
	int64_t mtime_ns, ctime_ns;
};
void tfs_file_stamp(const char *path, struct tfs_stamp *s);
static inline int tfs_stamp_same(const struct tfs_stamp *a, const struct tfs_stamp *b)
{
	return a->dev == b->dev && a->ino == b->ino && a->size == b->size && a->mtime_ns == b->mtime_ns &&
	       a->ctime_ns == b->ctime_ns;
}

#endif
