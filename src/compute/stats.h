/* Statistics of a tensor's values (tensorfs --stats): counts, range,
 * moments and a histogram, in two passes over the stored bytes and no
 * array of the values. */
#ifndef TFS_STATS_H
#define TFS_STATS_H

#include <stdint.h>
#include <stdio.h>

#include "core/err.h"
#include "model/model.h"

#define TFS_STATS_BINS 64

struct tfs_stats {
	uint64_t count; /* elements */
	uint64_t nan, inf, zeros;
	uint64_t finite; /* the rest are over these */
	double min, max, mean, std, absmax;
	/* np.histogram(finite values as float64, 64): edges from min to max
	 * (min - 0.5 to max + 0.5 when they are equal). */
	double lo, hi;
	uint64_t hist[TFS_STATS_BINS];
};

/* TFS_ERR_UNHANDLED for a dtype that holds no plain numbers (complex). */
tfs_err tfs_stats_tensor(const struct tfs_shard *sh, const struct tfs_tensor *t, struct tfs_stats *out);

/* One JSON object (no newline). Non-finite figures (no finite element)
 * are null. */
void tfs_stats_json(FILE *f, const struct tfs_stats *s);

#endif
