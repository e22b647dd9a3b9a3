/* A model's tensors by name: the one lookup by name that the tools use
 * (--verify's manifest lines, diff's pairs of tensors), so that none keeps
 * a hash of its own. Names are any bytes (a hostile checkpoint's too): the
 * table is keyed by the process's seeded hash (core/hash.h). */
#ifndef TFS_MODEL_LOOKUP_H
#define TFS_MODEL_LOOKUP_H

#include <stddef.h>
#include <stdint.h>

#include "core/err.h"
#include "model/model.h"

/* Where a tensor is: its shard, its index in the shard's table, and its
 * number in the model's order (shards in order, each table in order; a
 * mount's tensor files come in that order too). */
struct tfs_model_pos {
	uint32_t shard, idx;
	uint64_t n;
};

struct tfs_model_names;

/* The model's names, indexed (TFS_ERR_NOMEM). The model outlives it; its
 * names are unique (the model stage refuses a tensor in two shards). */
tfs_err tfs_model_names_new(const struct tfs_model *m, struct tfs_model_names **out);
void tfs_model_names_free(struct tfs_model_names *x);

/* 1 and where the tensor named name[0..len) is, or 0. */
int tfs_model_find(const struct tfs_model_names *x, const char *name, size_t len, struct tfs_model_pos *at);

#endif
