/* The safetensors writer: a header for any set of tensors, and the
 * metadata of a model's files merged into one "__metadata__" member. The
 * exports (views/export.c) and the re-sharded files (views/reshard.c)
 * write theirs with it; docs/views.md, "Exported safetensors files", has
 * the layout. */
#ifndef TFS_STWRITE_H
#define TFS_STWRITE_H

#include <stddef.h>
#include <stdint.h>

#include "core/err.h"

/* A safetensors header for any set of tensors: the entries are sorted in
 * place into the documented order (docs/views.md, "Exported safetensors
 * files"), then written after `meta` (the
 * "__metadata__" member, or empty) with spaces up to a multiple of 8;
 * start[i] gets where entry i's data starts in the file, start[n] the
 * file's size. TFS_ERR_FORMAT: the header would pass safetensors' limit. */
struct tfs_st_entry {
	const char *name;
	uint32_t len;
	unsigned dtype;
	const uint64_t *dims;
	uint32_t ndim;
	uint64_t size;
	uint32_t id; /* the caller's */
};
tfs_err tfs_st_header(struct tfs_st_entry *ent, uint32_t n, const char *meta, size_t meta_len, char **out,
		      size_t *out_len, uint64_t *start);

/* The "__metadata__":{...} member of the model's generated files: every
 * file's metadata as text, merged (docs/views.md); empty when there is
 * none. */
struct tfs_model;
tfs_err tfs_st_meta(const struct tfs_model *m, char **out, size_t *outlen);

#endif
