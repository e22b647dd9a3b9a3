/* The block cache of remote files: what a remote source reads through.
 *
 * A file is cut into aligned blocks. A block is fetched once however many
 * readers want it (the others wait for it), kept in memory under a byte
 * budget (least recently used first out), and, with a cache directory, kept
 * on disk too: one file per block, written atomically, checksummed, keyed
 * by the file's URL and pinned version, checked on every read
 * (docs/remote.md, "The disk cache"), evicted oldest first under a byte limit,
 * shared safely by several mounts; a block read from there is read once
 * into memory, checked against its checksum, and served from there.
 *
 * A reader moving forward grows a prefetch window (two blocks, doubling on
 * every sequential read up to a cap) that worker threads fetch ahead of it
 * in parts of several blocks, one range request per part, within the memory
 * budget; a block is served as soon as its bytes have landed, before the
 * rest of its part; a random reader gets only the blocks it asked for.
 *
 * A cache is an object (struct tfs_cache) its users hold by pointer: its
 * memory, its workers, and below it a block store (sources/bstore.h), the
 * disk cache, which it reaches through that store's ops alone. It knows
 * nothing of HTTP: its files' bytes come through their fetch functions
 * (the seam the unit tests drive, tests/unit/test_cache.c). */
#ifndef TFS_CACHE_H
#define TFS_CACHE_H

#include <stddef.h>
#include <stdint.h>

#include "core/err.h"
#include "core/source.h"

#define TFS_CACHE_BLOCK (256u << 10)
#define TFS_CACHE_DEFAULT_MEM (256ull << 20)
#define TFS_CACHE_DEFAULT_DISK (10ull << 30)

struct tfs_cache_cfg {
	uint64_t mem_bytes;  /* -o cache_size= */
	const char *dir;     /* -o cache_dir=, or NULL */
	uint64_t disk_bytes; /* -o cache_max= */
	unsigned workers;    /* -o concurrency= */
	uint64_t part_bytes; /* -o part_size= */
	int warm;            /* -o warm */
	/* How many tries of the fetches failed and were tried again so far
	 * (a 503, SlowDown, a reset): the in-flight limit halves on every
	 * part during which it grew, as TCP and the S3 clients do. NULL: never. */
	uint64_t (*retried)(void *ctx);
	void *retried_ctx;
};

/* Fetches bytes [off, off + len) of the file from the network into the
 * buffers (in order); no retry is owed beyond the HTTP layer's. Tells
 * progress(arg, n) whenever the first n bytes are in place and final
 * (of the pinned version), so that a reader waiting for the start of a
 * part is served before its end arrives. */
typedef tfs_err (*tfs_fetch_fn)(void *ctx, const struct tfs_iov *iov, unsigned niov, uint64_t off,
				uint64_t len, void (*progress)(void *arg, uint64_t n), void *arg);

struct tfs_cache;
struct tfs_cfile;
struct tfs_bstore;

/* The cache's options (cache_size, cache_dir, cache_max, concurrency,
 * part_size, warm), checked; cfg->dir points into o. */
tfs_err tfs_cache_parse(const struct tfs_opts *o, struct tfs_cache_cfg *cfg, struct tfs_diag *d);
/* A cache of cfg's sizes (cfg->dir is not looked at) over `lower` (the
 * disk cache, or NULL), which it then owns. */
tfs_err tfs_cache_new(const struct tfs_cache_cfg *cfg, struct tfs_bstore *lower, struct tfs_cache **out,
		      struct tfs_diag *d);
/* How long a failure a reader received answers the next read of its
 * block (or of a file downloaded whole) without a fetch: the kernel's
 * immediate re-read of the page a failed read needed, one second. The
 * unit tests set it, to check both sides of it with no race against the
 * clock. */
void tfs_cache_set_hold(struct tfs_cache *c, int64_t ns);
/* The mount goes: the workers and the warm-up stop taking work, and no
 * more is queued (a read still in flight fetches its own blocks); what
 * they fetch fails fast once the fetches are stopped too. */
void tfs_cache_stop(struct tfs_cache *c);
/* Once every file of it is freed: stops it, waits for its threads, frees
 * its memory and the store below. */
void tfs_cache_free(struct tfs_cache *c);

/* A file of `size` bytes in cache c; `key` names its bytes for the store
 * below (the URL and the pinned version: a new version is a new key), or
 * is NULL for a file whose fetch keeps its bytes on disk itself (a Xet
 * file's chunks, sources/xorbcache.h). */
struct tfs_cfile *tfs_cfile_new(struct tfs_cache *c, const char *key, uint64_t size, tfs_fetch_fn fetch,
				void *ctx);
/* After every read of it has returned. */
void tfs_cfile_free(struct tfs_cfile *f);

/* Reads exactly `len` bytes at `off` (within the file), part of an object
 * (a tensor) that ends at `limit` (the file's size for anything else). A
 * stream's read-ahead stops one part past that end until the stream has
 * gone on from one object into the next; from then on it runs past each
 * end, into the next ones and the chained file: a reader of one tensor
 * does not pay for the model's next hundred megabytes, a loader reading
 * the checkpoint through keeps its pipe full. A range larger than a
 * quarter of the memory budget (a header, an index) is fetched straight
 * into buf, not cached. */
tfs_err tfs_cfile_read(struct tfs_cfile *f, void *buf, size_t len, uint64_t off, uint64_t limit,
		       struct tfs_diag *d);

/* The same, with the stream's read-ahead stopped at `fence` (UINT64_MAX:
 * none), where the read-ahead across files (sources/readahead.h) knows
 * the reader goes elsewhere; it then stays out of the chained file too. */
tfs_err tfs_cfile_read_fenced(struct tfs_cfile *f, void *buf, size_t len, uint64_t off, uint64_t limit,
			      uint64_t fence, struct tfs_diag *d);

/* The bytes of [off, off + len) as they sit in the cache's memory, pinned
 * until tfs_cfile_unmap(token): iov
 * needs room for len / TFS_CACHE_BLOCK + 2 entries, and len must be under
 * 4 MiB. For a reply written straight from the cache, with no copy. */
struct tfs_cmap;
tfs_err tfs_cfile_map(struct tfs_cfile *f, uint64_t off, size_t len, uint64_t limit, struct tfs_iov *iov,
		      unsigned *niov, struct tfs_cmap **token, struct tfs_diag *d);
tfs_err tfs_cfile_map_fenced(struct tfs_cfile *f, uint64_t off, size_t len, uint64_t limit, uint64_t fence,
			     struct tfs_iov *iov, unsigned *niov, struct tfs_cmap **token,
			     struct tfs_diag *d);
void tfs_cfile_unmap(struct tfs_cmap *token);

/* Fetches [off, off + len) ahead of a reader predicted to read it (the
 * read-ahead across files), in whole parts, within the memory budget;
 * nothing before the mount is up. */
void tfs_cfile_prefetch(struct tfs_cfile *f, uint64_t off, uint64_t len);
/* What a stream keeps fetched ahead at most, and the part size. */
void tfs_cache_shape(struct tfs_cache *c, uint64_t *window, uint64_t *part);

/* A small memo kept beside the file's blocks in the disk cache, across
 * mounts: values worked out from its bytes (a tensor's hash), by key.
 * Without cache_dir, nothing is kept. get: 1 and the value (NUL-ended,
 * at most cap - 1 bytes) when known. Keys and values hold no tab or
 * newline. */
int tfs_cfile_memo_get(struct tfs_cfile *f, const char *key, char *val, size_t cap);
void tfs_cfile_memo_put(struct tfs_cfile *f, const char *key, const char *val);

/* The mount is up (in the process that serves it): prefetching may start.
 * Before, reads fetch only what they ask for, so that nothing runs in the
 * background when the daemon forks. */
void tfs_cache_start(struct tfs_cache *c);

/* Reading f to its end is followed by reading next (the next shard): a
 * stream's read-ahead goes on into it, and the warm-up takes them in that
 * order. */
void tfs_cfile_chain(struct tfs_cfile *f, struct tfs_cfile *next);

/* A file whose server ignores Range requests (it answers 200 with the
 * whole file): downloaded whole, once, into memory while the files kept
 * so fit cache_size, else into an unnamed file in cache_dir (within
 * cache_max), else refused with one line saying what to add. */
struct tfs_cwhole;

/* Fetches bytes [off, off + len) of such a file into buf: the whole file
 * (off 0, len its size) in one download, telling progress(arg, n) as its
 * first n bytes land and going on from *in_place after a failure; any
 * other range from the start of an answer, stopped there. On failure the
 * diag says why. */
typedef tfs_err (*tfs_whole_fetch_fn)(void *ctx, void *buf, uint64_t off, uint64_t len,
				      void (*progress)(void *arg, uint64_t n), void *arg, uint64_t *in_place,
				      struct tfs_diag *d);

/* Room for the file in cache c (`what` names it in messages). */
tfs_err tfs_cwhole_new(struct tfs_cache *c, const char *what, uint64_t size, tfs_whole_fetch_fn fetch,
		       void *ctx, struct tfs_cwhole **out, struct tfs_diag *d);
/* The files open so: how many, and their bytes, in memory and on disk. */
void tfs_cwhole_totals(struct tfs_cache *c, unsigned *nmem, uint64_t *mem, unsigned *ndisk, uint64_t *disk);
/* After every read of it has returned. */
void tfs_cwhole_free(struct tfs_cwhole *w);
/* The bytes of [off, off + len) in place, once they have landed (the
 * download starts with the first read that needs it); until the mount is
 * up (tfs_cache_start), TFS_ERR_UNHANDLED. Valid until the file is freed. */
tfs_err tfs_cwhole_at(struct tfs_cwhole *w, uint64_t off, size_t len, const void **p, struct tfs_diag *d);
/* The same, copied; until the mount is up, from the start of an answer. */
tfs_err tfs_cwhole_read(struct tfs_cwhole *w, void *buf, size_t len, uint64_t off, struct tfs_diag *d);

/* f's blocks are read by readers that keep no copy (struct
 * tfs_source_ops, keep): a block read through is no longer recycled
 * first, but kept, least recently used first out, for the next reader. */
void tfs_cfile_keep(struct tfs_cfile *f);

/* The warm-up (-o warm): bytes in the disk cache so far, of all the
 * remote files' bytes; *on says whether it was asked for. */
void tfs_cache_warm_status(struct tfs_cache *c, uint64_t *done, uint64_t *total, int *on);
/* Blocks readers asked for that were cached, were not, and came from the
 * disk cache, since the mount began. */
void tfs_cache_counters(struct tfs_cache *c, uint64_t *hits, uint64_t *misses, uint64_t *disk_hits);

#endif
