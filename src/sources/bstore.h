/* A store of blocks below the block cache's memory (sources/cache.h): the
 * memory store asks it for a block before fetching one, and hands it every
 * block fetched. The disk cache (sources/cache_disk.c, -o cache_dir=) is
 * one; another (a shared cache daemon, object storage) would be another
 * file with these ops, and the memory store would not change. The memory
 * store reaches it only through the ops; it reaches nothing of the memory
 * store's. */
#ifndef TFS_BSTORE_H
#define TFS_BSTORE_H

#include <stddef.h>
#include <stdint.h>

#include "core/err.h"

struct tfs_bstore;
/* One file's blocks in a store, by the key the file was opened with. */
struct tfs_bfile;

struct tfs_bstore_ops {
	/* The file whose bytes `key` names (its URL and pinned version: a
	 * new version is a new key), or NULL (out of memory: its blocks are
	 * then neither looked for nor kept). */
	struct tfs_bfile *(*open)(struct tfs_bstore *s, const char *key);
	void (*close)(struct tfs_bfile *f);
	/* Block idx, of len bytes, when the store has it whole and checked:
	 * 1, and its bytes in buf, the very bytes that were checked (what
	 * the reader is served). 0 when it has not (a damaged copy is
	 * dropped). Called by many threads at once. */
	int (*get)(struct tfs_bfile *f, uint64_t idx, uint32_t len, char *buf);
	/* Keeps block idx. Failures are silent: a block not kept is fetched
	 * again. */
	void (*put)(struct tfs_bfile *f, uint64_t idx, const void *data, uint32_t len);
	/* Whether it holds block idx of len bytes, without reading it (the
	 * warm-up skips such blocks). */
	int (*has)(struct tfs_bfile *f, uint64_t idx, uint32_t len);
	/* A small memo beside the file's blocks: values worked out from its
	 * bytes, by key (tfs_cfile_memo_get). */
	int (*memo_get)(struct tfs_bfile *f, const char *key, char *val, size_t cap);
	void (*memo_put)(struct tfs_bfile *f, const char *key, const char *val);
	/* An unnamed file in the store's room, for a file downloaded whole
	 * (sources/cache_whole.c): gone when closed. -1 (errno set) when it
	 * cannot. */
	int (*scratch)(struct tfs_bstore *s);
	/* Before any file was opened in it. */
	void (*free)(struct tfs_bstore *s);
};

struct tfs_bstore {
	const struct tfs_bstore_ops *ops;
	const char *where; /* for messages (the directory) */
	uint64_t max;      /* bytes it keeps at most (-o cache_max=) */
};

/* The disk cache (sources/cache_disk.c): DIR/tensorfs-v1, made and
 * checked (it must be the user's alone), at most max bytes, shared safely
 * by several mounts. */
tfs_err tfs_disk_store_open(const char *dir, uint64_t max, struct tfs_bstore **out, struct tfs_diag *d);

#endif
