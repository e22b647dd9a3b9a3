/* The remote layer of one mount: what its remote files read through and
 * share. An HTTP client (policy, counters, connections, the abort), the
 * block cache in memory over the disk cache (-o cache_dir=), and the
 * read-ahead across files (sources/readahead.h), which learns from the
 * reads which tensor a reader opens next. Made from the remote drivers'
 * shared options by the first remote driver that resolves a SOURCE of the
 * mount (tfs_sources_remote), handed to every remote file it opens, and
 * freed with the mount's sources (tfs_sources_free): two mounts in one
 * process share nothing.
 *
 * struct tfs_sources (core/source.h) is defined here: what the sources of
 * one mount share, of which the remote layer is the part the remote
 * drivers make. The registry (sources/registry.c) walks it; this file and
 * the drivers fill it; nothing here calls the registry. */
#ifndef TFS_RLAYER_H
#define TFS_RLAYER_H

#include <pthread.h>
#include <stdint.h>

#include "core/err.h"
#include "core/opts.h"
#include "core/source.h"

struct tfs_http;
struct tfs_cache;
struct tfs_ra;
struct tfs_xorbcache;

/* What the Hub's files of the mount did, counted atomically by the Hub
 * driver and the Xet reader (sources/hf.c, sources/xet.c): files read over
 * Xet and through the LFS route, requests to the Hub's Xet token and the
 * CAS, xorb ranges fetched and their bytes, and the chunks' bytes served
 * from the chunk cache and fetched. */
struct tfs_xet_counts {
	uint64_t xet_files, lfs_files, cas_requests, xorb_requests, xorb_bytes, chunk_cached, chunk_fetched;
};

struct tfs_rlayer {
	struct tfs_http *http;
	struct tfs_cache *cache;
	struct tfs_ra *ra;
	/* The chunk cache of Xet files (sources/xorbcache.h), with
	 * -o cache_dir=, else NULL. */
	struct tfs_xorbcache *xcache;
	struct tfs_xet_counts xet;
	/* -o proxy=, and the same without its password, for messages. */
	char *proxy, *proxy_shown;
};

struct tfs_sources {
	const struct tfs_opts *opts; /* the mount's options, outliving it */
	pthread_mutex_t lock;        /* making the remote layer */
	struct tfs_rlayer *remote;   /* NULL until a remote driver asks */
	int stopped;                 /* since tfs_sources_stop (atomic) */
};

/* The remote layer of the mount's sources, made from their options on
 * the first call (a bad option: TFS_ERR_INVAL, with one line). */
tfs_err tfs_sources_remote(struct tfs_sources *ss, struct tfs_rlayer **out, struct tfs_diag *d);

/* The layer's part of the mount's life (sources/registry.c calls them):
 * the mount is up (prefetching may start); the mount goes (transfers end
 * now); freed, once every file it opened is closed. */
void tfs_rlayer_start(struct tfs_rlayer *l);
void tfs_rlayer_stop(struct tfs_rlayer *l);
void tfs_rlayer_free(struct tfs_rlayer *l);
/* Adds its counters to *c; the warm-up's progress (1 when asked for);
 * its notice (files downloaded whole), 0 when none. */
void tfs_rlayer_counters(struct tfs_rlayer *l, struct tfs_counters *c);
int tfs_rlayer_warm(struct tfs_rlayer *l, uint64_t *done, uint64_t *total);
int tfs_rlayer_notice(struct tfs_rlayer *l, char *buf, size_t cap);
/* The model's tensors, for the read-ahead across files (see
 * tfs_sources_objects). */
void tfs_rlayer_objects(struct tfs_rlayer *l, const struct tfs_object *objs, size_t n);
/* A read of [off, off + len) of s (within an object ending at limit)
 * told to the read-ahead across files: what the reader reads next, in
 * any of the mount's files, is prefetched (each file's `prefetch`), and
 * the result is where s's own read-ahead stops. */
uint64_t tfs_rlayer_follow(struct tfs_rlayer *l, struct tfs_source *s, uint64_t off, uint64_t len,
			   uint64_t limit);

/* The options every remote driver takes (listed once, for the drivers
 * whose `remote` is set). */
extern const struct tfs_opt_spec tfs_remote_opts[];

#endif
