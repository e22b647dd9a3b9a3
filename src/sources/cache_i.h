/* The block cache's insides, shared by its files: sources/cache.c (the
 * table, memory, loading, the workers), sources/cache_read.c (the read
 * path and read-ahead), sources/cache_warm.c (the warm-up, and starting
 * the threads) and sources/cache_whole.c (files downloaded whole); each
 * uses cache.c's and none the others'. Below them, the block store
 * (sources/bstore.h: the disk cache) is reached through its ops only.
 * Nothing else includes this. */
#ifndef TFS_CACHE_I_H
#define TFS_CACHE_I_H

#include <pthread.h>
#include <stdint.h>

#include "sources/bstore.h"
#include "sources/cache.h"

#define BLK ((uint64_t)TFS_CACHE_BLOCK)
/* Requests in flight at most (-o concurrency=) and blocks per request
 * (-o part_size=): CDNs and S3 cap each connection well below the link,
 * so a fast load keeps many ranges in flight (Run:ai's streamer uses 32,
 * gcsfuse 16 per file, mountpoint-s3 8 MiB parts). */
#define WORKERS_DEFAULT 32
#define WORKERS_MAX 256
#define RUN_DEFAULT 16 /* 4 MiB: docs/remote.md, "Loading a model fast" */
#define RUN_MAX 256    /* 64 MiB */
/* The in-flight limit starts here and grows by one with every part that
 * arrives without a retry, halving on one (a 503, SlowDown, a reset). */
#define ALLOWED_START 4
#define STREAMS 4
/* A read this close to where a reader stopped continues its stream: the
 * kernel's readahead (4 MiB on a tensorfs mount) sends a sequential
 * reader's requests several at once, handled by several threads, so they
 * arrive out of order by up to its window. (At 1 MiB, reads of one stream
 * were taken for new ones, the window kept starting over, and 1 GiB from
 * s3rver took 1,070 requests of 512 KiB.) */
#define STREAM_SLACK (4ull << 20)
/* Larger reads (a header, an index, read once) bypass the cache: one
 * request straight into the reader's buffer. FUSE reads are far smaller. */
#define DIRECT_MIN (4ull << 20)
/* A block whose failure a reader received answers the next lookup of it
 * with that failure, without a request, if it comes within this long:
 * when a read fails, the kernel asks again at once for the page it needed
 * (after its readahead failed), and that second ask must not run all the
 * retries again. Any later read, and any read of a block whose prefetch
 * failed with no reader waiting (the server may have healed since), tries
 * the network anew. */
#define FAIL_HOLD_NS 1000000000ll

enum { LOADING, READY, FAILED };

struct blk {
	struct tfs_cfile *f;
	uint64_t idx;
	int state;
	tfs_err err;
	unsigned pins;
	int in_table;
	int64_t failed_at; /* FAILED: when a reader received it (ns) */
	int held;          /* FAILED and received by a reader */
	int unread;        /* prefetched, not read through yet */
	/* Bytes of it served so far: only a block read through is recycled
	 * at once, others when the budget needs their room. */
	uint32_t served;
	uint32_t len;
	char *data; /* its bytes (from the disk cache too: read and checked) */
	struct blk *hnext, *lprev, *lnext;
	char msg[200]; /* why it failed */
};

struct stream {
	uint64_t next;   /* where the reader stopped */
	unsigned hits;   /* reads in a row that continued it */
	uint64_t window; /* bytes to keep fetched ahead of it */
	uint64_t ahead;  /* first block not yet scheduled */
	uint64_t spill;  /* ... and of the file after this one */
	uint64_t used;
	uint64_t limit; /* the end of the object it reads in */
	int crossed;    /* it went on from one object into the next */
};

struct tfs_cfile {
	struct tfs_cache *c;
	uint64_t size, nblocks;
	tfs_fetch_fn fetch;
	void *ctx;
	struct tfs_bfile *lf; /* its blocks in the store below, or NULL */
	struct stream st[STREAMS];
	uint64_t clock;
	unsigned refs; /* the owner's, and one per queued job */
	/* The file a loader reads after this one (the next shard), where a
	 * stream's read-ahead goes on past this file's end. */
	struct tfs_cfile *next, *prev;
	struct tfs_cfile *all_next; /* every file, for the warm-up */
	uint64_t warmed;            /* of its bytes, counted in c->warm_done */
	int64_t last_seq;           /* when a stream last moved forward in it */
	int keep;                   /* tfs_cfile_keep: what was read is kept */
};

struct job {
	struct tfs_cfile *f;
	uint64_t first, n;
	int warm; /* the warm-up's: recyclable once on disk */
	struct job *next;
};

struct tfs_cache {
	pthread_mutex_t lock;
	pthread_cond_t changed; /* a block left LOADING */
	pthread_cond_t work;    /* a job was queued */
	int started;
	int stopping; /* tfs_cache_stop: atomic, read without the lock */
	uint64_t (*retried)(void *ctx);
	void *retried_ctx;
	pthread_t *threads; /* the workers, joined by tfs_cache_free */
	pthread_t warm_thread;
	int warm_running;
	int64_t hold_ns; /* FAIL_HOLD_NS, or the tests' (tfs_cache_set_hold) */
	uint64_t mem, used;
	struct blk **tab;
	size_t nslots;
	struct blk lru;      /* lnext: most recent; lprev: least */
	struct job *jh, *jt; /* read-ahead, first come first served */
	struct job *wh, *wt; /* the warm-up's, when no read-ahead waits */
	unsigned nwarm_jobs; /* queued or running */
	unsigned nworkers, want_workers, run;
	unsigned allowed, active; /* in-flight limit and jobs running */
	uint64_t window_max;
	int warm; /* -o warm */
	uint64_t warm_total, warm_done;
	struct tfs_cfile *files; /* all_next list, in the order they opened */
	/* Block buffers are cut from 8 MiB chunks asking for huge pages, and
	 * a freed block's buffer is kept for the next one: a fresh 256 KiB
	 * malloc is an mmap whose 64 pages each fault in, which cost a
	 * sequential read over loopback half its speed. Kept buffers are
	 * counted in `used`. */
	char **pool;
	size_t npool, cpool;
	char *chunk, *chunk_end;
	char **chunks; /* every chunk, freed with the cache */
	size_t nchunks, cchunks;
	struct tfs_bstore *lower; /* the disk cache, or NULL */
	/* Blocks readers asked for: already cached, or fetched (of which
	 * from the disk cache: atomic, counted outside the lock). */
	uint64_t hits, misses, disk_hits;
	/* Files downloaded whole (sources/cache_whole.c), kept in memory
	 * (within mem) and in the cache directory (within lower->max). */
	uint64_t whole_mem, whole_disk;
	unsigned whole_nmem, whole_ndisk;
};

/* sources/cache.c; all under c->lock but now_ns and load. */
struct blk *tfs_cache_find(struct tfs_cache *c, const struct tfs_cfile *f, uint64_t idx);
int tfs_cache_make_room(struct tfs_cache *c, uint64_t need, int for_prefetch);
struct blk *tfs_cache_blk_new(struct tfs_cache *c, struct tfs_cfile *f, uint64_t idx);
void tfs_cache_lru_front(struct tfs_cache *c, struct blk *b);
void tfs_cache_lru_back(struct tfs_cache *c, struct blk *b);
void tfs_cache_file_unref(struct tfs_cache *c, struct tfs_cfile *f);
void tfs_cache_enqueue(struct tfs_cache *c, struct tfs_cfile *f, struct job *j, int warm);
int64_t tfs_cache_now_ns(void);
/* Loads blocks[0..n) (consecutive, LOADING, pinned by the caller), then
 * drops the caller's pins (not under c->lock). */
void tfs_cache_load(struct tfs_cfile *f, struct blk **blocks, uint64_t n);
void tfs_cache_unpin(struct tfs_cache *c, struct blk *b);
void tfs_cache_table_remove(struct tfs_cache *c, struct blk *b);
void tfs_cache_blk_free(struct tfs_cache *c, struct blk *b);
/* The workers (under c->lock, once). */
void tfs_cache_start_workers(struct tfs_cache *c);
/* Whether tfs_cache_stop was called (any thread). */
static inline int tfs_cache_stopping(const struct tfs_cache *c)
{
	return __atomic_load_n(&c->stopping, __ATOMIC_ACQUIRE);
}

#endif
