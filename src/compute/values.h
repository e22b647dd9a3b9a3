/* A tensor's elements as numbers, for statistics and diff: every dtype the
 * float32 view decodes (narrow floats, ggml's quantized blocks) as its exact
 * float32 value, and float32, float64, the integers and bool as they are. */
#ifndef TFS_VALUES_H
#define TFS_VALUES_H

#include <stddef.h>
#include <stdint.h>

#include "core/err.h"
#include "model/model.h"

/* Whether the dtype's elements are numbers here (complex ones are not). */
int tfs_values_ok(unsigned dtype);

/* Whether they are integers (BOOL's as 0 and 1), which
 * tfs_values_next_int gives exactly: a double holds 53 bits, and I64
 * 2^53 + 1 would read as 2^53. */
int tfs_values_is_int(unsigned dtype);
typedef __int128 tfs_int128;

/* Elements of the tensor, read in chunks. */
struct tfs_values {
	const struct tfs_shard *sh;
	const struct tfs_tensor *t;
	uint64_t count, next; /* elements in all, the next to read */
	unsigned char *raw;   /* stored bytes of a chunk */
	uint32_t *dec;        /* float32 bit patterns of a chunk */
	double *v;            /* the chunk's values */
	tfs_int128 *iv;       /* or, by tfs_values_next_int, its integers */
};

#define TFS_VALUES_CHUNK (1u << 18) /* elements at a time */

tfs_err tfs_values_open(struct tfs_values *r, const struct tfs_shard *sh, const struct tfs_tensor *t);
/* The next chunk: *n values at *v (0 at the end). */
tfs_err tfs_values_next(struct tfs_values *r, const double **v, size_t *n);
/* Elements [first, first + k) at *v, k at most TFS_VALUES_CHUNK (a
 * sample; the next chunk of tfs_values_next is not moved). */
tfs_err tfs_values_at(struct tfs_values *r, uint64_t first, size_t k, const double **v);
/* The next chunk of an integer tensor (tfs_values_is_int), exactly: *n
 * values at *v (0 at the end). */
tfs_err tfs_values_next_int(struct tfs_values *r, const tfs_int128 **v, size_t *n);
/* Back to the first element (a second pass). */
void tfs_values_rewind(struct tfs_values *r);
void tfs_values_close(struct tfs_values *r);

#endif
