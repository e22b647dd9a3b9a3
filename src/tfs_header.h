/* The safetensors header: a strict single-pass scanner into a compact table,
 * and the validation of that table. It gives the same accept/refuse verdict
 * as the reference reader (huggingface/safetensors, see
 * shared/docs/safetensors-format.md), with one deliberate difference: a dtype
 * outside the 22 known ones is accepted with a warning unless strict. */
#ifndef TFS_HEADER_H
#define TFS_HEADER_H

#include <stdbool.h>
#include <stdint.h>
#include <stddef.h>

#include "tfs_err.h"
#include "tfs_source.h"

#define TFS_HEADER_MAX 100000000u /* N may equal this */
#define TFS_NESTING_MAX 127       /* levels of arrays/objects, top included */

enum tfs_dtype {
	TFS_DT_BOOL, TFS_DT_F4, TFS_DT_F6_E2M3, TFS_DT_F6_E3M2, TFS_DT_U8,
	TFS_DT_I8, TFS_DT_F8_E5M2, TFS_DT_F8_E4M3, TFS_DT_F8_E8M0,
	TFS_DT_F8_E4M3FNUZ, TFS_DT_F8_E5M2FNUZ, TFS_DT_I16, TFS_DT_U16,
	TFS_DT_F16, TFS_DT_BF16, TFS_DT_I32, TFS_DT_U32, TFS_DT_F32, TFS_DT_C64,
	TFS_DT_F64, TFS_DT_I64, TFS_DT_U64,
	TFS_DT_COUNT,
	TFS_DT_UNKNOWN = 255,
};

const char *tfs_dtype_name(unsigned dt);
unsigned tfs_dtype_bits(unsigned dt);
/* Returns TFS_DT_UNKNOWN when the name is not one of the 22. */
unsigned tfs_dtype_lookup(const char *s, size_t len);

struct tfs_tensor {
	uint64_t begin, end;   /* relative to the data buffer */
	uint32_t name_off;     /* into arena */
	uint32_t name_len;
	uint32_t dims_off;     /* into dims */
	uint32_t ndim;
	uint32_t dtype_off;    /* into arena, only for an unknown dtype */
	uint32_t dtype_len;
	uint8_t dtype;         /* enum tfs_dtype or TFS_DT_UNKNOWN */
};

struct tfs_meta_pair {
	uint32_t key_off, key_len, val_off, val_len; /* into arena */
};

struct tfs_header {
	uint64_t header_len;   /* N */
	uint64_t data_start;   /* 8 + N: absolute offset of the data buffer */
	uint64_t file_size;
	struct tfs_tensor *t;  /* in header order of first appearance */
	uint32_t n;
	char *arena;           /* decoded names, metadata, unknown dtypes */
	size_t arena_len;
	uint64_t *dims;
	size_t ndims;
	bool has_metadata;     /* a non-null __metadata__ object was present */
	struct tfs_meta_pair *meta; /* last value wins, first position kept */
	uint32_t nmeta;
	uint32_t unknown_dtypes; /* tensors with a dtype outside the 22 */
};

enum {
	TFS_PARSE_STRICT = 1, /* refuse unknown dtypes, as the reference does */
};

/* Called once per tensor whose dtype is not one of the 22 (non-strict). */
typedef void (*tfs_warn_fn)(void *ctx, const char *msg);

struct tfs_parse_opts {
	unsigned flags;
	tfs_warn_fn warn;
	void *warn_ctx;
};

/* Parses and validates `n` header bytes. `file_size` is the size of the
 * whole file (8 + n + data). On failure `d` says what is wrong and `out`
 * holds nothing. */
tfs_err tfs_header_parse(const unsigned char *hdr, size_t n, uint64_t file_size,
			 const struct tfs_parse_opts *opts,
			 struct tfs_header *out, struct tfs_diag *d);

/* Reads the length prefix and header from `src`, then parses them. */
tfs_err tfs_header_read(struct tfs_source *src, const struct tfs_parse_opts *opts,
			struct tfs_header *out, struct tfs_diag *d);

void tfs_header_free(struct tfs_header *h);

static inline const char *tfs_tensor_name(const struct tfs_header *h,
					  const struct tfs_tensor *t)
{
	return h->arena + t->name_off;
}

static inline uint64_t tfs_tensor_size(const struct tfs_tensor *t)
{
	return t->end - t->begin;
}

/* The dtype as stored in the header (the unknown string passed through). */
const char *tfs_tensor_dtype(const struct tfs_header *h,
			     const struct tfs_tensor *t, size_t *len);

/* Reads a shard index (model.safetensors.index.json) with the same strict
 * scanner, without building a DOM: the top level must be an object whose
 * "weight_map" member is an object of strings; each pair goes to `entry` in
 * file order (duplicates included), and every other member, checked as JSON,
 * goes to `other` as its raw text. Strings passed to a callback live until
 * the next callback. */
struct tfs_index_cb {
	tfs_err (*entry)(void *ctx, const char *name, size_t nlen, const char *shard,
			 size_t slen, struct tfs_diag *d);
	tfs_err (*other)(void *ctx, const char *key, size_t klen, const char *text,
			 size_t tlen, struct tfs_diag *d);
	void *ctx;
};
tfs_err tfs_index_scan(const char *text, size_t n, const struct tfs_index_cb *cb,
		       struct tfs_diag *d);

/* Strict UTF-8 (RFC 3629): no overlongs, no surrogates, nothing past
 * U+10FFFF. Returns the offset of the first bad byte, or n. */
size_t tfs_utf8_check(const unsigned char *s, size_t n);

#endif
