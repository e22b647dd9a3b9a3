/* Two tensors compared by value, for diff (tools/diff.c): the largest
 * absolute difference, the sums of the relative L2 difference and the
 * cosine similarity, NaN and Inf counts on each side, and positions where
 * one side is not finite and the other not the same; integers on both
 * sides compared exactly. The values come through compute/values.h: every
 * dtype it decodes, read a chunk at a time. */
#ifndef TFS_COMPARE_H
#define TFS_COMPARE_H

#include <stddef.h>
#include <stdint.h>

#include "compute/values.h"
#include "core/err.h"
#include "model/model.h"

/* The figures of a comparison by value. The sums are of the values times
 * 2^-scale, a power of two (exact) raised only when a value passes LIMIT,
 * so that F64 values near 1e308 neither overflow a square nor a sum of
 * 2^63 of them; the ratios drawn from them do not depend on it. */
struct tfs_compare {
	uint64_t nan_a, nan_b, inf_a, inf_b;
	uint64_t unmatched; /* positions where one side is NaN or Inf and the other not the same */
	double max_abs;     /* with max_over, half of it: |x - y| passed DBL_MAX */
	int max_over;
	int exact; /* integers on both sides: max_abs is max_int */
	unsigned __int128 max_int;
	double d2, a2, b2, ab;
	int scale;
	double unscale, limit; /* 2^-scale; the largest |value| add_pairs takes as it comes */
};

void tfs_compare_init(struct tfs_compare *f);
/* n pairs of values (x[i], y[i]) into the figures. */
void tfs_compare_pairs(struct tfs_compare *f, const double *x, const double *y, size_t n);

/* Tensor a of shard sa against tensor b of shard sb, element by element
 * (as many as the shorter has), into *f (initialised here): by their
 * values as doubles, or with ints (tfs_values_is_int on both sides)
 * exactly. A tensor that cannot be read: its error. */
tfs_err tfs_compare_values(const struct tfs_shard *sa, const struct tfs_tensor *a, const struct tfs_shard *sb,
			   const struct tfs_tensor *b, int ints, struct tfs_compare *f);

#endif
