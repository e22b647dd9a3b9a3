/* What a cache directory's files take, and their eviction: the disk cache's
 * blocks (sources/cache_disk.c) and the chunk cache's xorbs
 * (sources/xorbcache.c) live under one DIR/tensorfs-v1 and one cache_max,
 * shared with other mounts, so each measures the whole directory and
 * evicts its oldest files, whichever store wrote them. */
#ifndef TFS_CACHEDIR_H
#define TFS_CACHEDIR_H

#include <stdint.h>

/* The bytes the regular files under dir take on disk (allocated, not
 * apparent: a xorb's file is sparse), at most `depth` levels down, never
 * through a link. */
uint64_t tfs_cachedir_used(const char *dir, int depth);

/* One eviction pass: dir measured, then its oldest files (by mtime; a
 * memo is kept: it outlives the blocks it was worked out from) removed
 * while it takes more than `keep` bytes. Returns what it takes then. */
uint64_t tfs_cachedir_trim(const char *dir, int depth, uint64_t keep);

#endif
