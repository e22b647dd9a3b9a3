/* The tensor table: what every format driver turns a file into and what
 * everything after it (the inode table, the views, inspect) reads. It
 * knows nothing of the container: a tensor is a name, a dtype, a shape and
 * one absolute byte range of the file; the metadata is string pairs, or
 * JSON the format writes when asked. */
#ifndef TFS_TABLE_H
#define TFS_TABLE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/dtype.h"
#include "core/err.h"
#include "core/kv.h"

struct tfs_tensor {
	uint64_t begin, end; /* absolute byte range in the file */
	uint32_t name_off;   /* into arena (NUL-terminated there) */
	uint32_t name_len;
	uint32_t dims_off; /* into dims */
	uint32_t ndim;
	uint32_t dtype_off; /* into arena, only for an unknown dtype */
	uint32_t dtype_len;
	uint16_t dtype; /* enum tfs_dtype or TFS_DT_UNKNOWN */
	/* TFS_TENSOR_TRANSPOSED: stored in Fortran order (an .npz member), so
	 * the table shows the transpose (shape reversed), whose C-order bytes
	 * those are; an NPY view says fortran_order with the stored shape. */
	uint8_t flags;
};
#define TFS_TENSOR_TRANSPOSED 1u

struct tfs_meta_pair {
	uint32_t key_off, key_len, val_off, val_len; /* into arena */
};

struct tfs_table;

struct tfs_format;

struct tfs_table {
	const char *format; /* the driver's name, e.g. "safetensors" */
	/* The driver that read it (set by tfs_format_read), for what the
	 * model asks of the format after (the names of a split model's
	 * parts); NULL for a table made otherwise. */
	const struct tfs_format *driver;
	uint64_t file_size;
	struct tfs_tensor *t; /* in the order of first appearance */
	uint32_t n;
	char *arena; /* names, metadata, unknown dtypes */
	size_t arena_len;
	uint64_t *dims;
	size_t ndims;
	bool has_metadata;          /* a metadata object was present (not null) */
	struct tfs_meta_pair *meta; /* last value wins, first position kept */
	uint32_t nmeta;
	/* Typed metadata (GGUF's), instead of the pairs above when kv.p is
	 * set; written as JSON only when someone reads it, so that a large
	 * vocabulary costs the mount nothing. */
	struct tfs_kvs kv;
	uint32_t unknown_dtypes; /* tensors whose dtype was passed through */
	/* Format facts for messages and tests (safetensors: 8 + N). */
	uint64_t data_start;
	/* What --inspect shows of the file beyond its tensors ("version",
	 * "general.architecture"...): "key\0value\0" pairs, facts_len bytes. */
	char *facts;
	size_t facts_len;
	/* A file that is part `part_no` (0-based) of a model split over
	 * `part_count` files; part_count 0: not split. */
	uint32_t part_no, part_count;
};

void tfs_table_free(struct tfs_table *t);

static inline const char *tfs_tensor_name(const struct tfs_table *h, const struct tfs_tensor *t)
{
	return h->arena + t->name_off;
}

static inline uint64_t tfs_tensor_size(const struct tfs_tensor *t)
{
	return t->end - t->begin;
}

/* The dtype as user.dtype shows it (an unknown one as stored). */
const char *tfs_tensor_dtype(const struct tfs_table *h, const struct tfs_tensor *t, size_t *len);

/* The product of the shape (1 for a scalar), UINT64_MAX when over 64 bits. */
uint64_t tfs_tensor_elements(const struct tfs_table *h, const struct tfs_tensor *t);

/* Metadata as pretty-printed JSON with a trailing newline: the typed
 * pairs (core/kv.h), or the pairs as an object of strings ("{}" when there
 * are none). */
tfs_err tfs_table_meta_json(const struct tfs_table *t, char **out, size_t *len);

/* ---- building a table (format drivers) ---- */

struct tfs_table_builder {
	struct tfs_table *t;
	size_t tcap, dcap, acap, mcap;
	uint32_t *slots; /* tensor index + 1 keyed by name */
	size_t nslots;
};

/* Copies text into the arena (NUL-terminated) and gives its offset. */
tfs_err tfs_table_text(struct tfs_table_builder *b, const char *p, size_t len, uint32_t *off);
/* The same for two pieces joined (a value and a mark after it). */
tfs_err tfs_table_text2(struct tfs_table_builder *b, const char *p, size_t len, const char *p2, size_t len2,
			uint32_t *off);
/* Appends a dimension to the dims array. */
tfs_err tfs_table_dim(struct tfs_table_builder *b, uint64_t v);
/* Adds a tensor whose name is already in the arena. With `replace`, a
 * name seen before is replaced (the last definition wins, as safetensors
 * readers do); without, *dup is set and nothing is added. */
tfs_err tfs_table_put(struct tfs_table_builder *b, const struct tfs_tensor *t, int replace, int *dup);
tfs_err tfs_table_meta(struct tfs_table_builder *b, const struct tfs_meta_pair *m);
/* Duplicate metadata keys: the last value wins, at the first key's place. */
tfs_err tfs_table_meta_dedupe(struct tfs_table_builder *b);
/* Adds an --inspect fact. */
tfs_err tfs_table_fact(struct tfs_table *t, const char *key, const char *val, size_t vlen);
/* Room for n more tensors, `arena` bytes of text and `dims` dimensions,
 * for a driver that knows its counts before it adds (fewer copies). */
tfs_err tfs_table_reserve(struct tfs_table_builder *b, uint32_t n, size_t arena, size_t dims);
/* Frees the builder's own state (not the table). */
void tfs_table_builder_done(struct tfs_table_builder *b);

/* Grows *p (an array of *cap elements of `elem` bytes) to hold `need`. */
tfs_err tfs_grow(void **p, size_t *cap, size_t need, size_t elem);

#endif
