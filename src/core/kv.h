/* Typed metadata: key/value pairs whose values carry a type, as GGUF keeps
 * them. They are held in GGUF's own key/value encoding, the bytes of the
 * file as read (a vocabulary of 150,000 strings is megabytes, and is only
 * parsed when someone reads it), so a generated GGUF copies a pair that no
 * edit touches byte for byte:
 *   key:    u64 length, bytes
 *   type:   u32 (enum tfs_kv_type)
 *   value:  a number of the type's size, little-endian; a bool as one byte;
 *           a string as a u64 length and bytes; an array as u32 element
 *           type, u64 count, then the elements (no arrays of arrays).
 * A table whose metadata is typed holds it here (struct tfs_table.kv);
 * other tables hold string pairs. */
#ifndef TFS_KV_H
#define TFS_KV_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "core/err.h"

enum tfs_kv_type {
	TFS_KV_U8,
	TFS_KV_I8,
	TFS_KV_U16,
	TFS_KV_I16,
	TFS_KV_U32,
	TFS_KV_I32,
	TFS_KV_F32,
	TFS_KV_BOOL,
	TFS_KV_STR,
	TFS_KV_ARR,
	TFS_KV_U64,
	TFS_KV_I64,
	TFS_KV_F64,
	TFS_KV_COUNT
};

/* A section of n pairs, validated when made (every length in bounds). */
struct tfs_kvs {
	unsigned char *own; /* freed with the table; p points into it */
	const unsigned char *p;
	size_t len;
	uint64_t n;
};

/* One pair, as tfs_kvs_next finds it. */
struct tfs_kv {
	const unsigned char *pair; /* its first byte (the key's length) */
	size_t plen;               /* bytes of the whole pair */
	const unsigned char *key;
	size_t klen;
	uint32_t type, elem;      /* elem: of an array's elements, else = type */
	uint64_t count;           /* elements: 1 unless an array */
	const unsigned char *val; /* the first element */
};

/* Keys that say how a model is split over files (split.no, split.count,
 * split.tensors.count): the parts carry them, and no file made of the
 * whole model may (it would call itself one part of several). */
static inline int tfs_kv_is_split_key(const void *key, size_t klen)
{
	return klen >= 6 && memcmp(key, "split.", 6) == 0;
}

/* The pair at *pos (start at 0), which moves past it; 0 at the end. */
int tfs_kvs_next(const struct tfs_kvs *s, size_t *pos, struct tfs_kv *kv);

/* A type's name as __metadata__.json writes it ("UINT32"), or NULL. */
const char *tfs_kv_type_name(uint32_t t);
/* The type of that name, or TFS_KV_COUNT. */
uint32_t tfs_kv_type_lookup(const char *name);
/* Bytes of one element of a fixed-size type; 0 for strings and arrays. */
unsigned tfs_kv_type_size(uint32_t t);

/* Little-endian value of n bytes. */
uint64_t tfs_kv_le(const unsigned char *p, unsigned n);

/* The pair's value as an unsigned number when it is one integer that
 * fits; 0 otherwise. */
int tfs_kv_uint(const struct tfs_kv *kv, uint64_t *v);

/* The section as __metadata__.json shows it: an object of
 * {"type": ..., "value": ...} (arrays with "element_type"), bad UTF-8 as
 * U+FFFD. With `skip`, a pair whose key or a string of whose value is not
 * UTF-8 is left out instead, and skip() told its key (generated files,
 * whose metadata must be text). */
tfs_err tfs_kvs_json(const struct tfs_kvs *s, char **out, size_t *len,
		     void (*skip)(void *ctx, const char *key, size_t kl), void *ctx);

#endif
