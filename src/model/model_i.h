/* What model/model.c shares with model/index.c, which reads the checkpoints
 * that an index describes. */
#ifndef TFS_MODEL_I_H
#define TFS_MODEL_I_H

#include <stdarg.h>

#include "model/model.h"

/* A tensor's place: shard and index in its table. */
struct where_t {
	uint32_t shard, t;
};

/* Every tensor name of the model, hashed (shard == UINT32_MAX: empty). */
struct names {
	struct where_t *slots;
	size_t n;
};

int tfs_ends_with(const char *s, const char *suf);

tfs_err tfs_mfail(struct tfs_model_diag *md, const char *where, tfs_err e, const char *fmt, ...)
	__attribute__((format(printf, 4, 5)));

/* Shards named `names`, in store directory `dir` ("" or "sub/"). */
tfs_err tfs_model_add_shards(struct tfs_model *m, const char *dir, char **names, uint32_t n,
			     const char *where, struct tfs_model_diag *md);

/* Opens shards [first, nshards) and reads their tables, in parallel; a
 * shard that does not exist gets `missing` set. The first failure, in
 * shard order, is the one reported. */
tfs_err tfs_model_read_tables(struct tfs_model *m, uint32_t first, const struct tfs_model_opts *o,
			      const char *where, struct tfs_model_diag *md);

/* Builds the name table, refusing a name found in two shards. */
tfs_err tfs_model_check_unique(struct tfs_model *m, struct names *nt, const char *where,
			       struct tfs_model_diag *md);
/* A directory without an index whose files do not look like one model
 * (metadata that says another format or architecture, numbered tensors
 * with no layer name in common): one warning through o->warn. */
void tfs_model_warn_mixed(const struct tfs_model *m, const char *where, const struct tfs_model_opts *o);
struct where_t *tfs_model_names_find(const struct tfs_model *m, const struct names *nt, const char *name,
				     size_t len);

/* The checkpoint an index describes; `name` is the index's name in the
 * store, `where` as the user would write it (messages). */
tfs_err tfs_model_open_index(struct tfs_model *m, const char *name, const char *where,
			     const struct tfs_model_opts *o, struct tfs_model_diag *md);

#endif
