/* tensorfs --stats: every tensor's statistics, as a table or JSON. */
#ifndef TFS_TOOLS_STATS_H
#define TFS_TOOLS_STATS_H

#include <stdio.h>

#include "fs/mount.h"
#include "tools/tools.h"
#include "model/model.h"

/* Returns 0, or -1 after one line on stderr (a tensor that cannot be read,
 * memory). */
int tfs_stats_print(const struct tfs_model *m, const char *source, int json, FILE *out, uint64_t *measured);

#endif
