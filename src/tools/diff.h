/* tensorfs diff A B: what differs between two checkpoints, tensor by
 * tensor, across formats and sources. */
#ifndef TFS_DIFF_H
#define TFS_DIFF_H

#include <stdio.h>

#include "fs/mount.h"
#include "tools/tools.h"
#include "model/model.h"

/* Prints the differences (a table, or one JSON object) to out. Returns
 * diff(1)'s status: 0 the same (every tensor byte-identical or equal by
 * value), 1 different, 2 trouble (a tensor could not be read; one line on
 * stderr). */
int tfs_diff(const struct tfs_model *a, const char *an, const struct tfs_model *b, const char *bn, int json,
	     FILE *out, struct tfs_tool_result *res);

#endif
