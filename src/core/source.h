/* Where the bytes come from: sources, stores and source drivers.
 *
 * A source is one file's bytes, read at absolute offsets. A store is where
 * the files of a checkpoint live (a local directory, an HTTP base URL, a
 * Hub repository at a commit, an S3 prefix): it opens files by their name
 * in it and lists a directory of it. A source driver turns the SOURCE
 * argument into a store and the name in it that SOURCE points at. Nothing
 * above this layer knows which kind it talks to; adding one is adding a
 * driver file and one line in sources/registry.c. */
#ifndef TFS_SOURCE_H
#define TFS_SOURCE_H

#include <stdint.h>
#include <stddef.h>
#include <sys/types.h>

#include "core/err.h"
#include "core/opts.h"

/* What identifies the bytes of a source, to tell whether it changed. */
struct tfs_identity {
	uint64_t size;
	uint64_t dev, ino;
	int64_t mtime_sec, mtime_nsec;
	int64_t ctime_sec, ctime_nsec;
};

struct tfs_source;

/* A piece of memory, or, where p is NULL, `len` bytes of the open file
 * fd at foff (a map() may give those: a disk cache's block files, spliced
 * into the reply without passing through memory). */
struct tfs_iov {
	void *p;
	size_t len;
	int fd;
	uint64_t foff;
};

struct tfs_source_ops {
	/* Reads exactly `len` bytes at absolute offset `off`, looping over
	 * short transfers. Fewer bytes available than asked is TFS_ERR_SHORT,
	 * never a partial success: a caller must not serve bytes that are not
	 * there. Safe to call from several threads at once. */
	tfs_err (*pread)(struct tfs_source *s, void *buf, size_t len, uint64_t off);
	/* The same, for a read inside an object (a tensor) that ends at
	 * `limit` (the remote source reads ahead past it all the same: a
	 * loader reads the next tensor next). Optional. */
	tfs_err (*pread_within)(struct tfs_source *s, void *buf, size_t len, uint64_t off, uint64_t limit);
	/* The bytes of [off, off + len) where the source holds them, in at
	 * most `max` pieces, kept in place until unmap(token): a reply can
	 * be written from them with no copy (pieces may be file ranges, see
	 * struct tfs_iov). Optional; TFS_ERR_UNHANDLED means
	 * "not this way" (the caller reads instead), any other error is the
	 * read's. */
	tfs_err (*map)(struct tfs_source *s, uint64_t off, size_t len, uint64_t limit, struct tfs_iov *iov,
		       unsigned max, unsigned *n, void **token);
	void (*unmap)(struct tfs_source *s, void *token);
	/* A memo of values worked out from the source's bytes (a tensor's
	 * hash), kept across mounts where the source keeps its bytes (a
	 * remote source's disk cache). Optional; get: 1 when known. */
	int (*memo_get)(struct tfs_source *s, const char *key, char *val, size_t cap);
	void (*memo_put)(struct tfs_source *s, const char *key, const char *val);
	/* Reading s to its end is followed by reading next (the next shard):
	 * a source that reads ahead may go on into it. Optional. */
	void (*then)(struct tfs_source *s, struct tfs_source *next);
	/* Bytes [off, off + len) will be read soon (the read-ahead across
	 * files says so): a source that caches may start fetching them.
	 * Optional. */
	void (*prefetch)(struct tfs_source *s, uint64_t off, uint64_t len);
	/* Its bytes are read by readers that keep no copy of them (direct
	 * I/O, a generated file whose pages are dropped behind its reader),
	 * so the same bytes come to be read again: a source that caches
	 * them keeps what was read, rather than leaving it to the kernel's
	 * page cache. From then on, for the life of the source. Optional. */
	void (*keep)(struct tfs_source *s);
	/* The identity now (re-read from the source where that is cheap;
	 * remote sources, pinned to a version, return the pinned one). */
	tfs_err (*identity)(struct tfs_source *s, struct tfs_identity *id);
	void (*close)(struct tfs_source *s);
};

struct tfs_source {
	const struct tfs_source_ops *ops;
	/* Absolute path or URL without credentials: user.source, messages. */
	char *location;
	/* Identity when opened: the size that validation was done against. */
	struct tfs_identity id;
	/* A descriptor the bytes can be spliced from, or -1. */
	int fd;
	/* The version the mount is pinned to, where the source has one
	 * (user.etag, user.revision), or NULL. */
	char *etag;
	char *revision;
	/* The whole file's SHA-256 as its server vouches for it (the Hub's
	 * LFS oid), lowercase hex, or "" (--verify checks it). */
	char sha256[65];
	int changed; /* its change was logged (once) */
	/* Its mount's stop (tfs_sources_stop), set by the model for its
	 * shards: NULL, never. */
	const int *stop;
};

static inline void tfs_source_keep(struct tfs_source *s)
{
	if (s->ops->keep)
		s->ops->keep(s);
}

static inline tfs_err tfs_source_pread(struct tfs_source *s, void *buf, size_t len, uint64_t off)
{
	return s->ops->pread(s, buf, len, off);
}

static inline tfs_err tfs_source_pread_within(struct tfs_source *s, void *buf, size_t len, uint64_t off,
					      uint64_t limit)
{
	return s->ops->pread_within ? s->ops->pread_within(s, buf, len, off, limit)
				    : s->ops->pread(s, buf, len, off);
}

/* A read that serves a reader: the bytes of [off, off + len) or an error,
 * never fewer bytes (a file that shrank is TFS_ERR_IO: a short reply
 * would pass for the end of the file). */
static inline tfs_err tfs_source_serve(struct tfs_source *s, void *buf, size_t len, uint64_t off,
				       uint64_t limit)
{
	tfs_err e = tfs_source_pread_within(s, buf, len, off, limit);
	return e == TFS_ERR_SHORT ? TFS_ERR_IO : e;
}

static inline int tfs_source_memo_get(struct tfs_source *s, const char *key, char *val, size_t cap)
{
	return s->ops->memo_get ? s->ops->memo_get(s, key, val, cap) : 0;
}

static inline void tfs_source_memo_put(struct tfs_source *s, const char *key, const char *val)
{
	if (s->ops->memo_put)
		s->ops->memo_put(s, key, val);
}

static inline void tfs_source_then(struct tfs_source *s, struct tfs_source *next)
{
	if (s->ops->then)
		s->ops->then(s, next);
}

void tfs_source_close(struct tfs_source *s);

/* Whether the mount s belongs to is going away (struct tfs_source, stop). */
static inline int tfs_source_stopped(const struct tfs_source *s)
{
	return s->stop && __atomic_load_n(s->stop, __ATOMIC_RELAXED);
}

/* Whether the source is no longer the version it was opened as (its size
 * or mtime differ: a file rewritten in place); the first time, one log
 * line. Nothing of a changed source may be served: the format no longer
 * describes its bytes. The ctime is not compared: the file a rename
 * replaced, still open, has a new ctime and its old bytes. */
int tfs_source_changed(struct tfs_source *s);

/* A local file as a source (the file driver's), for drivers that find a
 * file on disk (a cache): opened as core/userfile.h opens what a user
 * names (a regular file; no FIFO can block it). within: NULL, or the
 * directory the file must lie in once links are followed (open_inside). */
tfs_err tfs_source_open_path(const char *path, struct tfs_source **out, struct tfs_diag *d);
tfs_err tfs_source_open_within(const char *path, const char *within, struct tfs_source **out,
			       struct tfs_diag *d);

/* A source over bytes in memory (not copied), for tests and the fuzzer. */
tfs_err tfs_source_open_mem(const void *data, size_t len, const char *name, struct tfs_source **out);

/* tfs_source_pread for a format reader: on failure one line in `d`,
 * a source that holds fewer bytes than at open being TFS_ERR_IO ("the file
 * shrank while being read"). */
tfs_err tfs_source_read(struct tfs_source *s, void *buf, size_t len, uint64_t off, struct tfs_diag *d);

/* Reads a whole (small) source into a NUL-terminated buffer of at most
 * `max` bytes. */
tfs_err tfs_source_slurp(struct tfs_source *s, size_t max, char **out, size_t *len, struct tfs_diag *d);

/* ---- stores ---- */

struct tfs_store;

/* A directory listing: file names (relative to the directory listed) and
 * sizes, regular files only. */
struct tfs_dirlist {
	char **name;
	uint64_t *size;
	size_t n, cap;
	/* Its subdirectories' names, where the store knows them: only for a
	 * hint (a Hub repository whose checkpoint is in a subfolder). */
	char **dirs;
	size_t ndirs, cdirs;
};
tfs_err tfs_dirlist_add(struct tfs_dirlist *l, const char *name, uint64_t size);
/* A subdirectory's name, once (len bytes of name). */
tfs_err tfs_dirlist_add_dir(struct tfs_dirlist *l, const char *name, size_t len);
void tfs_dirlist_free(struct tfs_dirlist *l);

struct tfs_store_ops {
	/* Opens the file `name` ('/'-separated, relative to the store). The
	 * diag line says what failed, without the name (the caller adds it).
	 * Safe to call from several threads at once. */
	tfs_err (*open)(struct tfs_store *st, const char *name, struct tfs_source **out, struct tfs_diag *d);
	/* As open, for a file shown byte for byte to whoever may read the
	 * mount (-o originals, with allow_other every local user): only when
	 * it lies, once every symbolic link is followed, inside the store's
	 * own directory tree (TFS_ERR_INVAL otherwise). A cloned repository
	 * can hold tokenizer.json -> /root/secret. Optional: NULL where the
	 * store holds no links of anyone else's making (remote stores). */
	tfs_err (*open_inside)(struct tfs_store *st, const char *name, struct tfs_source **out,
			       struct tfs_diag *d);
	/* Lists directory `dir` of the store ("" for its root), one level. */
	tfs_err (*list)(struct tfs_store *st, const char *dir, struct tfs_dirlist *out, struct tfs_diag *d);
	void (*close)(struct tfs_store *st);
};

struct tfs_store {
	const struct tfs_store_ops *ops;
	/* What names are joined to in messages ("dir/", "https://h/p/"), as
	 * the user wrote it; "" when SOURCE had no directory part. */
	char *prefix;
	/* Identity of what SOURCE named (a file, an index, a directory), for
	 * the times of directories and synthetic files. */
	struct tfs_identity id;
	/* SOURCE as the mount's device name: an absolute path, or the URL
	 * without credentials. */
	char *location;
};

void tfs_store_close(struct tfs_store *st);

/* ---- source drivers ---- */

struct tfs_counters;
/* What the sources of one mount share (sources/rlayer.h): its options and
 * the remote layer its remote drivers make. */
struct tfs_sources;

struct tfs_source_driver {
	const char *name;
	/* The URL schemes it takes, for messages ("http://, https://"), or
	 * NULL (local paths). */
	const char *schemes;
	/* 1 when the SOURCE argument is this driver's (by its scheme). */
	int (*claims)(const char *spec);
	/* Opens the store that `spec` lives in; *target is the name in it
	 * that spec points at (a file), or NULL when spec is a directory.
	 * What the mount's sources share is ss (a remote driver's files read
	 * through its remote layer, tfs_sources_remote). */
	tfs_err (*resolve)(const char *spec, const struct tfs_opts *o, struct tfs_sources *ss,
			   struct tfs_store **st, char **target, struct tfs_diag *d);
	const struct tfs_opt_spec *opts; /* its mount options, NULL-terminated by name */
	/* Its files read through the remote layer (sources/rlayer.h): it
	 * takes the remote drivers' shared options too (the cache, retries),
	 * and the mount's start, stop, counters, warm-up and notice are the
	 * layer's. Nothing else to wire. */
	int remote;
	/* spec as messages may show it (a URL's credentials left out)... */
	void (*redact)(const char *spec, char *out, size_t n);
	/* ... and spec overwritten in place where it holds a secret (a URL's
	 * password as stars, as curl does): argv is readable by every local
	 * user for the life of the mount. */
	void (*hide)(char *spec);
	/* SOURCE is a local path (made absolute before anything opens it),
	 * not a URL. */
	int spec_is_path;
	/* The environment variables it reads that name a local path or a URL
	 * (HF_HOME, AWS_CONFIG_FILE, HF_ENDPOINT...), with their kind
	 * (TFS_OPT_PATH, TFS_OPT_URL), NULL-terminated by name: handled as
	 * options of that kind are. Optional. */
	const struct tfs_opt_spec *env;
	/* For --help: how a SOURCE of this driver is written
	 * ("s3://BUCKET/KEY"), and the environment variables it reads, in
	 * words ("AWS_PROFILE, AWS_REGION..."); NULL for none. */
	const char *usage;
	const char *env_help;
};

/* What the sources of a mount share, over its options `o` (which outlive
 * it): made before SOURCE is resolved (tfs_model_open), freed after every
 * file it opened is closed. TFS_ERR_NOMEM. */
tfs_err tfs_sources_new(const struct tfs_opts *o, struct tfs_sources **out);
void tfs_sources_free(struct tfs_sources *ss);

/* The mount is up, in the process that serves it: the sources' work in the
 * background (prefetching) may start. Nothing runs before, so nothing is
 * lost when the daemon forks. */
void tfs_sources_start(struct tfs_sources *ss);
/* The mount is going away: every transfer in progress ends now, and reads
 * that need the network fail. */
void tfs_sources_stop(struct tfs_sources *ss);
/* Whether it is (since tfs_sources_stop): work that can take minutes (the
 * statistics, picture or hash of a huge tensor) checks it between chunks
 * and gives up (TFS_ERR_IO), so that unmounting and SIGTERM never wait.
 * The mount's own: stopping one mount stops nothing of another's. */
int tfs_sources_stopped(const struct tfs_sources *ss);
/* Where it is kept, for the sources of the mount (struct tfs_source's
 * stop), or NULL. */
const int *tfs_sources_stop_flag(const struct tfs_sources *ss);
/* What the sources did since the mount began, for a user to read while
 * mounted (user.counters on the root, SIGUSR1's log line). */
struct tfs_counters {
	uint64_t requests, bytes_fetched, retries, cache_hits, cache_misses, disk_hits;
	/* Hub files: how many are read over Xet and through the LFS route
	 * (the route), requests to the Xet token and the CAS, xorb bytes
	 * fetched, chunk bytes served from the chunk cache and fetched. */
	uint64_t xet_files, lfs_files, cas_requests, xorb_bytes, chunk_cached, chunk_fetched;
};
void tfs_sources_counters(struct tfs_sources *ss, struct tfs_counters *c);
/* As one line: "requests=N bytes_fetched=N ...", and for a mount of
 * the Hub "route=xet|lfs|xet+lfs xet_files=N ..."; its length. */
int tfs_counters_line(const struct tfs_counters *c, char *out, size_t n);

/* The notices about the sources opened (what they do otherwise than
 * asked: files downloaded whole), one say() each. */
void tfs_sources_notice(struct tfs_sources *ss, void (*say)(void *ctx, const char *line), void *ctx);

/* Progress of the warm-up (-o warm): bytes in the disk cache so far and
 * of all; 0 when none was asked for. */
int tfs_sources_warm(struct tfs_sources *ss, uint64_t *done, uint64_t *total);

/* An object of the mounted model (a tensor): bytes [begin, end) of src,
 * named name (kept, not copied, until the next call). */
struct tfs_object {
	struct tfs_source *src;
	uint64_t begin, end;
	const char *name;
};
/* The model's objects, in its tables' order (shard by shard, each in its
 * header's order), for the sources that predict which object a reader
 * reads next (the remote layer's read-ahead across files); n 0 forgets
 * them (before the names go). */
void tfs_sources_objects(struct tfs_sources *ss, const struct tfs_object *objs, size_t n);

/* spec as messages may show it, and spec with its secrets overwritten in
 * place (the claiming driver's redact and hide). Messages keep at most
 * TFS_SPEC_SHOWN_MAX bytes of it. */
#define TFS_SPEC_SHOWN_MAX 8192
void tfs_source_redact(const char *spec, char *out, size_t n);
void tfs_source_hide(char *spec);
/* Whether spec names a local path (its driver's spec_is_path). */
int tfs_source_is_path(const char *spec);
/* The k-th environment variable a driver reads that names a path or a URL,
 * each once; NULL past the last. */
const struct tfs_opt_spec *tfs_source_env_at(size_t k);

/* The registered drivers (sources/registry.c), the last one claiming any
 * SOURCE that is not a URL (local paths). */
extern const struct tfs_source_driver *const tfs_source_drivers[];

/* The length of spec's URL scheme (RFC 3986: a letter, then letters,
 * digits, '+', '-' or '.') when "://" follows it, else 0: what no local
 * path is taken for. */
size_t tfs_spec_scheme(const char *spec);

/* The driver for `spec`, then its resolve; a URL whose scheme no driver
 * takes is TFS_ERR_INVAL, with a line naming it and those there are. */
tfs_err tfs_source_resolve(const char *spec, const struct tfs_opts *o, struct tfs_sources *ss,
			   struct tfs_store **st, char **target, struct tfs_diag *d);

/* Whether some driver takes mount option `name`, and if so whether it
 * takes a value. */
const struct tfs_opt_spec *tfs_source_opt(const char *name, size_t len);

/* The k-th of every driver's options, each once (a shared table is listed
 * where it is first named); NULL past the last. For --help. */
const struct tfs_opt_spec *tfs_source_opt_at(size_t k);

#endif
