/* The source's own files (-o originals): the shards, the index and, where
 * the store can list the checkpoint's directory (a local directory, a Hub
 * repository, an S3 prefix), the files beside them (config.json, the
 * tokenizer's, README.md...), served byte for byte through the same
 * sources, so through the remote cache and its read-ahead, so that a
 * loader that wants a model directory (from_pretrained) or cp -r can use
 * the mount. Each file is opened when first read. */
#ifndef TFS_ORIGINALS_H
#define TFS_ORIGINALS_H

#include <stddef.h>
#include <stdint.h>

#include "core/err.h"
#include "model/model.h"

/* The directory they appear in, at the mount's root. A tensor of this name
 * is shown as "%5F_files__" (the name mapping's rule 3). */
#define TFS_ORIGINALS_DIR "__files__"

struct tfs_originals;

/* What the model's store holds beside it (nothing is opened yet). */
tfs_err tfs_originals_new(const struct tfs_model *m, struct tfs_originals **out, struct tfs_diag *d);
void tfs_originals_free(struct tfs_originals *o);

uint32_t tfs_originals_count(const struct tfs_originals *o);
/* File i's name in the directory (no '/') and size. */
const char *tfs_originals_name(const struct tfs_originals *o, uint32_t i, size_t *len);
uint64_t tfs_originals_size(const struct tfs_originals *o, uint32_t i);

/* File i's source, opened on first use (valid as long as o), for a read
 * that maps or splices its bytes; a file whose size is no longer the
 * listed one is TFS_ERR_IO. */
tfs_err tfs_originals_source(struct tfs_originals *o, uint32_t i, struct tfs_source **src);

#endif
