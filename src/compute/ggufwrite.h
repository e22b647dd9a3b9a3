/* The GGUF writer: one GGUF file of a model whose metadata is typed
 * (every part of it), every tensor of every part in part order, the first
 * part's key/value pairs in their order (split.* left out), as ggml's
 * writer (gguf.cpp, llama-gguf-split --merge) lays it out: version 3, the
 * tensor infos, zeros up to the alignment, then each tensor's data and
 * zeros up to the alignment. The layout is made, never the data: the view
 * that shows it (views/gguf.c) reads each tensor where it is. */
#ifndef TFS_GGUFWRITE_H
#define TFS_GGUFWRITE_H

#include <stddef.h>
#include <stdint.h>

#include "core/err.h"
#include "model/model.h"

struct tfs_gguf_part {
	uint32_t shard, idx; /* the tensor */
	uint64_t start;      /* of its data in the file */
};

/* A run of the header: bytes of `own`, or of the table's key/value
 * section (pairs no edit touched are not copied: a vocabulary is
 * megabytes, and the table keeps it for the life of the mount), or zeros
 * (the padding up to the alignment, which a GGUF may set to 2^31: never
 * made in memory). */
struct tfs_gguf_seg {
	const char *p; /* NULL: own + off, or zeros */
	size_t off;
	uint64_t len;
	uint64_t at; /* where it starts in the file */
	int zeros;
};

struct tfs_gguf_layout {
	char *own; /* the header's own bytes */
	struct tfs_gguf_seg *segs;
	uint32_t nsegs;
	size_t hdr_len; /* up to the first tensor's data, padding included */
	struct tfs_gguf_part *parts;
	uint32_t n;
	uint64_t align, size;
};

/* Whether the model can be written so: every part's metadata is typed
 * and every tensor has a ggml type. */
int tfs_gguf_offered(const struct tfs_model *m);

/* The layout of the model's file into *g (zeroed first by the caller);
 * TFS_ERR_NOMEM. */
tfs_err tfs_gguf_layout_make(const struct tfs_model *m, struct tfs_gguf_layout *g);
void tfs_gguf_layout_free(struct tfs_gguf_layout *g);

#endif
