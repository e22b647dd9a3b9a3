/* The exit codes of tensorfs, one per class of failure: the mount's and
 * the tools' (src/tools/), which link without FUSE. */
#ifndef TFS_EXIT_H
#define TFS_EXIT_H

/* Exit codes, one per class of failure (docs/troubleshooting.md, "Exit codes"). */
enum {
	TFS_EXIT_OK = 0,
	TFS_EXIT_INTERNAL = 1, /* out of memory, unexpected library failure */
	TFS_EXIT_USAGE = 2,    /* bad arguments or options */
	TFS_EXIT_SOURCE = 3,   /* the source cannot be opened or read */
	TFS_EXIT_FORMAT = 4,   /* the source is not a valid checkpoint */
	TFS_EXIT_MOUNT = 5,    /* the mount point or FUSE itself failed */
	TFS_EXIT_MISMATCH = 6, /* --verify: a hash differs from the manifest or the server's */
};

#endif
