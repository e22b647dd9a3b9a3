/* The read-ahead across files: which tensor a reader opens next.
 *
 * A loader or a shell tool goes through a model's tensor files in some
 * order: the shards' own (file) order, the listing's (name) order, the
 * order the model's tables give them (header and index order), or any of
 * these backwards. The block cache reads ahead within a file; this
 * predictor learns, from the reads alone, which order each reader follows
 * (the relation between the object it finished and the one it went on to)
 * and names the ranges to fetch next: the start of the next-but-one object
 * in that order, wherever it lies, so that the pipe stays full across
 * files. It does no I/O: a source asks it on every read and prefetches
 * what it answers.
 *
 * A reader is recognised by where it goes, not by who it is: a read at the
 * start of an object that is the successor (in some order) of the object
 * a known reader was reading continues that reader. A reader whose jumps
 * match no order gets no prediction (the cache's own rule then holds: the
 * object's end plus one part). Several readers share the look-ahead
 * equally. */
#ifndef TFS_READAHEAD_H
#define TFS_READAHEAD_H

#include <stdint.h>

#include "core/err.h"

struct tfs_ra;

/* A range the reader is predicted to read soon: bytes [off, off + len) of
 * `file` (the opaque file handle it was registered with). */
struct tfs_ra_range {
	const void *file;
	uint64_t off, len;
};

/* ahead: how many bytes past the reader the pipe should hold (shared by the
 * readers active at once); part: the fetch unit (a range is predicted in
 * whole parts, or to its object's end). */
struct tfs_ra *tfs_ra_new(uint64_t ahead, uint64_t part);
void tfs_ra_free(struct tfs_ra *ra);

/* The objects (tensors) of a model, forgetting any registered before.
 * Add them in the model's table order (shard by shard, each in its
 * header's order), each a byte range [begin, end) of a file, with its
 * name; then seal. The file and name orders are worked out at the first
 * read after that (a mount that never asks pays nothing), so the names
 * are kept, not copied, and must stay valid until then or until the next
 * reset. Until sealed, nothing is predicted. */
void tfs_ra_reset(struct tfs_ra *ra);
tfs_err tfs_ra_add(struct tfs_ra *ra, const void *file, uint64_t begin, uint64_t end, const char *name);
tfs_err tfs_ra_seal(struct tfs_ra *ra);

/* A read of [off, off + len) of `file` inside the object that ends at
 * `limit`, at time now_ns (monotonic). Fills up to `max` ranges to
 * prefetch and returns how many; *fence is where the file's own
 * read-ahead should stop (the end of the run of objects that the reader
 * will read in this file's order), UINT64_MAX for no fence. Thread-safe. */
unsigned tfs_ra_read(struct tfs_ra *ra, const void *file, uint64_t off, uint64_t len, uint64_t limit,
		     int64_t now_ns, struct tfs_ra_range *out, unsigned max, uint64_t *fence);

#endif
