/* tensorfs --inspect: a table, or one JSON object, of a checkpoint. */
#ifndef TFS_INSPECT_H
#define TFS_INSPECT_H

#include <stdio.h>

#include "fs/mount.h"
#include "tools/tools.h"
#include "model/model.h"

/* Prints the model to f. A scalar counts as one parameter. Returns 0, or
 * -1 when out of memory or when writing failed. */
int tfs_inspect(const struct tfs_model *m, const char *source, int json, FILE *f);

#endif
