/* What -o zarr's store (views/zarr.c, the view) is made of, computed here
 * with no tree, so that a unit test reaches it: how a tensor is cut into chunks and what each chunk's name is,
 * the metadata documents, and what a chunk's bytes are made of. */
#ifndef TFS_ZARRDOC_H
#define TFS_ZARRDOC_H

#include <stddef.h>
#include <stdint.h>

#include "core/err.h"
#include "core/table.h"

/* -o zarr_chunk_size's default: a slab of about this many bytes. */
#define TFS_ZARR_CHUNK_DEFAULT (64ull << 20)
/* Arrays of at most this many dimensions (NumPy 2's most; NumPy 1 holds
 * 32): a tensor of more is left out of the store. */
#define TFS_ZARR_NDIM_MAX 64
/* A chunk's name at most, with its NUL: 20 digits and ".0" per other axis. */
#define TFS_ZARR_KEY_MAX (21 + 2 * (TFS_ZARR_NDIM_MAX - 1))

/* How a tensor is shown as a Zarr array: slabs of whole rows along the
 * first axis, every other axis whole, so that a chunk is one contiguous
 * range of the bytes the array holds. */
struct tfs_zarr_geom {
	unsigned dtype;        /* the stored dtype */
	int converted;         /* shown as float32 (-o convert=f32's decoding) */
	int raw;               /* no NumPy type: its bytes, uint8 of shape (n,) */
	uint32_t itemsize;     /* bytes per element as shown */
	const char *typestr;   /* v2's dtype: "<f4" */
	const char *data_type; /* v3's: "float32" */
	uint32_t ndim;         /* as shown (raw: 1) */
	uint64_t rows;         /* shape[0] as shown (1 for a scalar) */
	uint64_t row_bytes;    /* bytes of one row as shown (0: the array is empty) */
	uint64_t slab_rows;    /* rows per chunk */
	uint64_t chunk_bytes;  /* bytes of every chunk file, the last one too */
	uint64_t nchunks;      /* 0 for an empty array */
	uint64_t bytes;        /* bytes the array holds: rows * row_bytes */
};

/* The geometry of tensor t for slabs of about `target` bytes (at least one
 * row, never over target by more than a row: the row count nearest it).
 * TFS_ERR_UNHANDLED when the tensor has no Zarr form (too large). */
tfs_err tfs_zarr_geom(const struct tfs_table *h, const struct tfs_tensor *t, uint64_t target,
		      struct tfs_zarr_geom *g);

/* Dimension k of the array as shown (raw: the byte count). */
uint64_t tfs_zarr_dim(const struct tfs_zarr_geom *g, const struct tfs_table *h, const struct tfs_tensor *t,
		      uint32_t k);

/* Chunk c's file name (its key in both formats: "c.0.0", "0" for a
 * scalar) into out (TFS_ZARR_KEY_MAX bytes for an array of at most
 * TFS_ZARR_NDIM_MAX dimensions); its length. */
size_t tfs_zarr_chunk_key(const struct tfs_zarr_geom *g, uint64_t c, char *out, size_t cap);
/* Whether name[0..len) is a chunk's name, exactly as tfs_zarr_chunk_key
 * writes it (no leading zero, no sign), and which (*c). */
int tfs_zarr_chunk_find(const struct tfs_zarr_geom *g, const char *name, size_t len, uint64_t *c);

/* What bytes [off, off + len) of chunk c's file are: bytes [*from, *from +
 * *data) of the array as shown, then *zeros bytes of zeros (the last
 * slab's rows past the tensor's). off + len is inside the chunk. */
void tfs_zarr_chunk_span(const struct tfs_zarr_geom *g, uint64_t c, uint64_t off, uint64_t len,
			 uint64_t *from, uint64_t *data, uint64_t *zeros);

/* An array's documents: .zarray, .zattrs, zarr.json; `leaf` is its
 * directory's name (its dimensions are named "leaf.0", "leaf.1"...: no
 * array's name holds a '.', so they never meet another variable's in
 * xarray). Every document is JSON in ASCII, as zarr-python 2 reads it.
 *
 * The tensor's name may be as long as a header (100 MB; 6 bytes a
 * character once in ASCII): a document is made as the text before the
 * name (head) and after it (tail), and the name itself in slices
 * (tfs_zarr_name_*), so a read of any part of it makes only that part. */
enum { TFS_ZARR_ZARRAY, TFS_ZARR_ZATTRS, TFS_ZARR_ARRAY_JSON };
struct tfs_zarr_doc {
	char *head, *tail; /* never NULL once made */
	size_t head_len, tail_len, head_cap, tail_cap;
	int named; /* the name, quoted, goes between head and tail */
};
tfs_err tfs_zarr_doc(int which, const struct tfs_zarr_geom *g, const struct tfs_table *h,
		     const struct tfs_tensor *t, const char *leaf, size_t leaf_len, struct tfs_zarr_doc *x);
void tfs_zarr_doc_free(struct tfs_zarr_doc *x);
/* The first place at or after `at` where a slice of name[0..n) may start
 * (not inside a character): n at most. */
size_t tfs_zarr_name_cut(const char *name, size_t n, size_t at);
/* The name's characters [from, to) (both cuts) as the documents write
 * them, without quotes, appended to *buf as core/json.h does. */
tfs_err tfs_zarr_name_part(const char *name, size_t from, size_t to, char **buf, size_t *len, size_t *cap);
/* The text of *buf from `from` on rewritten in ASCII (\uXXXX). */
tfs_err tfs_zarr_ascii(char **buf, size_t *len, size_t *cap, size_t from);

/* The whole documents, appended to *buf (*len, *cap) as core/json.h does
 * (the tests'). */
tfs_err tfs_zarr_zarray(const struct tfs_zarr_geom *g, const struct tfs_table *h, const struct tfs_tensor *t,
			char **buf, size_t *len, size_t *cap);
tfs_err tfs_zarr_zattrs(const struct tfs_zarr_geom *g, const struct tfs_table *h, const struct tfs_tensor *t,
			const char *leaf, size_t leaf_len, char **buf, size_t *len, size_t *cap);
tfs_err tfs_zarr_array_json(const struct tfs_zarr_geom *g, const struct tfs_table *h,
			    const struct tfs_tensor *t, const char *leaf, size_t leaf_len, char **buf,
			    size_t *len, size_t *cap);
/* A group's: .zgroup; zarr.json with `attrs` (a JSON object's text, as
 * its .zattrs holds it). */
tfs_err tfs_zarr_zgroup(char **buf, size_t *len, size_t *cap);
tfs_err tfs_zarr_group_json(const char *attrs, size_t attrs_len, char **buf, size_t *len, size_t *cap);

#endif
