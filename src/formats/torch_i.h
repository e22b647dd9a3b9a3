/* The PyTorch reader's two halves (formats/torch.c: the archive, the
 * pickle's allowed globals and the driver; formats/torch_walk.c: the
 * unpickled object tree to tensor names and metadata) and what they share.
 * Private to those two. */
#ifndef TFS_TORCH_I_H
#define TFS_TORCH_I_H

#include <stddef.h>
#include <stdint.h>

#include "core/format.h"
#include "core/table.h"
#include "formats/pickle.h"

#define DEPTH_MAX 64
#define META_MAX 10000
/* A text value longer than this (configs and chat templates run to tens
 * of KB) is cut there, and says so in itself and in one warning. */
#define META_VAL_MAX (1u << 20)
#define DIMS_MAX 64
#define HIDDEN_NAMED 8

enum { U_STORAGE = 1, U_TENSOR };

struct storage {
	uint16_t dt;
	uint64_t numel, nbytes, data; /* data: absolute offset of its record */
	const char *key;
	size_t klen;
};

struct tensor {
	uint16_t dt;
	const struct storage *st;
	uint64_t offset;
	uint32_t ndim;
	const struct tfs_pk_obj *size, *stride; /* tuples of checked ints */
};

#define DIM(tuple, i) ((uint64_t)(tuple)->u.v[i]->u.i)

struct walk {
	struct tfs_table_builder b;
	struct tfs_table *t;
	const struct tfs_parse_opts *o;
	struct tfs_diag *d;
	char path[8192];
	size_t plen;
	uint32_t hidden, meta_dropped;
	uint64_t visits, visit_max, objects;
	char hidden_names[600];
	size_t hlen;
};

/* Every tensor and metadata value under o, named by its path of keys. */
tfs_err tfs_torch_walk(struct walk *w, const struct tfs_pk_obj *o, int depth);

#endif
