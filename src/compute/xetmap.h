/* What a reader has learnt of one Xet file's chunks: for every chunk of
 * its reconstruction (term by term, in file order, a chunk used twice
 * counted twice), its length and where it starts in the file once known,
 * and its hash once computed.
 *
 * The whole file's reconstruction says only where each term starts and
 * how long it is; a chunk's length is learnt from its bytes (fetched, or
 * found in the chunk cache's index) and its place from the term's start
 * and the lengths before it, or from the answer for a range (which says
 * where its first chunk starts). Every fact is checked against what is
 * known: a length or a place that disagrees is an answer for another
 * range, or other bytes, and is refused, with what else that answer said
 * (tfs_xet_map_begin). Once every chunk's hash is known
 * the file's hash can be worked out and compared with its name. Not
 * thread-safe: the caller holds a lock. */
#ifndef TFS_XETMAP_H
#define TFS_XETMAP_H

#include <stddef.h>
#include <stdint.h>

#include "compute/xethash.h"
#include "compute/xetplan.h"
#include "core/err.h"

#define TFS_XET_AT_UNKNOWN UINT64_MAX

struct tfs_xet_map {
	const struct tfs_xet_plan *plan; /* the whole file's (not owned) */
	uint64_t size;
	uint64_t nchunk;
	uint64_t *first;                   /* per term, and one past: its first chunk's index */
	uint32_t *len;                     /* per chunk: its bytes, 0 while unknown */
	uint64_t *at;                      /* per chunk: where it starts, TFS_XET_AT_UNKNOWN */
	uint8_t (*hash)[TFS_XET_HASH_LEN]; /* per chunk */
	uint8_t *hashed;                   /* per chunk: its hash is known */
	uint64_t nhashed;
	/* What tfs_xet_map_undo puts back: each fact changed since
	 * tfs_xet_map_begin, as it was. */
	struct tfs_xet_was {
		uint64_t g, at;
		uint32_t len;
		uint8_t hashed;
	} * was;
	size_t nwas, cwas;
	int journal;
};

/* The map of a file of `size` bytes whose whole reconstruction is plan
 * (kept by the caller, unchanged, while the map lives). Refused (one
 * line): a term of more chunks than bytes, or more chunks in all than
 * the file's size allows. */
tfs_err tfs_xet_map_new(const struct tfs_xet_plan *plan, uint64_t size, struct tfs_xet_map **out,
			struct tfs_diag *d);
void tfs_xet_map_free(struct tfs_xet_map *m);

/* The chunk of term k that is chunk c of its xorb. */
static inline uint64_t tfs_xet_map_chunk(const struct tfs_xet_map *m, uint32_t k, uint32_t c)
{
	return m->first[k] + (c - m->plan->term[k].start);
}

/* The term holding chunk g. */
uint32_t tfs_xet_map_term_of(const struct tfs_xet_map *m, uint64_t g);

/* Learns chunk g: its length (0: not known here), where it starts
 * (TFS_XET_AT_UNKNOWN: not known here) and its hash (NULL: none), then
 * what follows within its term (the next chunk starts where it ends, the
 * last one ends where its term does). A fact that disagrees with one known
 * (or a chunk past its term's end) is refused, with one line. */
tfs_err tfs_xet_map_learn(struct tfs_xet_map *m, uint64_t g, uint32_t len, uint64_t at, const uint8_t *hash,
			  struct tfs_diag *d);

/* Facts learnt from one answer are taken whole or not at all: learn
 * them between begin and end, and undo all of them if one is refused
 * (an answer consistent so far may be found wrong by its last chunk). */
void tfs_xet_map_begin(struct tfs_xet_map *m);
void tfs_xet_map_undo(struct tfs_xet_map *m);
void tfs_xet_map_end(struct tfs_xet_map *m);

/* The chunk of term k known to hold byte `pos` of the file (its length
 * and place known), or -1. */
int64_t tfs_xet_map_find(const struct tfs_xet_map *m, uint32_t k, uint64_t pos);

/* Whether every chunk's hash is known; and then the file's hash. */
int tfs_xet_map_complete(const struct tfs_xet_map *m);
tfs_err tfs_xet_map_file_hash(const struct tfs_xet_map *m, uint8_t out[TFS_XET_HASH_LEN], struct tfs_diag *d);

/* Forgets every hash (the file's chunks were found wrong and dropped). */
void tfs_xet_map_forget_hashes(struct tfs_xet_map *m);

#endif
