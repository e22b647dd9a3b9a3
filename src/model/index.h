/* Shard indexes: the "weight_map" object of *.index.json files. */
#ifndef TFS_INDEX_H
#define TFS_INDEX_H

#include <stddef.h>

#include "core/err.h"

/* The same nesting limit as safetensors headers (serde_json's). */
#define TFS_INDEX_NESTING_MAX 127

/* Reads a shard index (model.safetensors.index.json) with the same strict
 * scanner, without building a DOM: the top level must be an object whose
 * "weight_map" member is an object of strings; each pair goes to `entry` in
 * file order (duplicates included), and every other member, checked as JSON,
 * goes to `other` as its raw text. Strings passed to a callback live until
 * the next callback. */
struct tfs_index_cb {
	tfs_err (*entry)(void *ctx, const char *name, size_t nlen, const char *shard, size_t slen,
			 struct tfs_diag *d);
	tfs_err (*other)(void *ctx, const char *key, size_t klen, const char *text, size_t tlen,
			 struct tfs_diag *d);
	void *ctx;
};
tfs_err tfs_index_scan(const char *text, size_t n, const struct tfs_index_cb *cb, struct tfs_diag *d);

#endif
