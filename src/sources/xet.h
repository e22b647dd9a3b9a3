/* A file of the Hugging Face Hub stored in Xet, read from its xorbs: what
 * the Hub driver (sources/hf.c) opens when the Hub names a file's Xet
 * hash (X-Xet-Hash) and -o xet=off is not given.
 *
 * At open, the whole file's reconstruction (which terms of which xorbs
 * make it). Reads go through the mount's block cache (sources/cache.h)
 * like any remote file's, with the read-ahead and the read-ahead across
 * files unchanged; its fetch function turns a range of the file into
 * chunks: those the chunk cache holds (sources/xorbcache.h) from there,
 * the rest by asking the CAS for the reconstruction of what is left (the
 * chunks that cover it, and one presigned URL per run of them) and
 * fetching those runs. Every fetch is checked before a byte of it is
 * served or kept (docs/remote.md, "Xet"): the ranges and lengths, each
 * chunk's header and LZ4 frame, the chunks' lengths against the terms and
 * what is known of the file; once every chunk of the file has passed
 * through, the file's Xet hash. */
#ifndef TFS_XET_H
#define TFS_XET_H

#include <stdint.h>

#include "core/err.h"
#include "core/source.h"

struct tfs_rlayer;
struct tfs_xet_cas;

struct tfs_xet_spec {
	const char *hash;     /* X-Xet-Hash, as the Hub sent it */
	uint64_t size;        /* X-Linked-Size */
	const char *location; /* user.source and messages: no credentials */
	const char *etag;     /* X-Linked-Etag (the SHA-256), or NULL */
	const char *revision; /* the commit */
	struct tfs_xet_cas *cas;
};

/* Whether a header's value is a Xet hash (64 hex digits). */
int tfs_xet_hash_ok(const char *hash);

/* The file, read through the mount's remote layer l. *fallback (with a
 * failure) when the Hub or its CAS has no Xet for it (404, 501): the
 * caller reads it through the LFS route instead. */
tfs_err tfs_xet_open(struct tfs_rlayer *l, const struct tfs_xet_spec *s, struct tfs_source **out,
		     int *fallback, struct tfs_diag *d);

#endif
