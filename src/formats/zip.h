/* A read-only view of a zip archive's stored entries, for the formats that
 * are zips of uncompressed records (PyTorch's torch.save, NumPy's .npz).
 * The central directory is authoritative (local headers may be followed
 * by data descriptors and hold no sizes); each entry's data offset comes
 * from its local header, whose extra field length may differ from the
 * central one (torch pads it to align the data). ZIP64 aware. */
#ifndef TFS_ZIP_H
#define TFS_ZIP_H

#include <stdint.h>

#include "core/err.h"
#include "core/source.h"

struct tfs_zip_entry {
	const char *name; /* into the archive's directory copy, not NUL-terminated */
	uint32_t nlen;
	uint16_t method; /* 0: stored */
	uint16_t flags;
	uint64_t csize, usize;
	uint64_t lho;  /* local header offset */
	uint64_t data; /* absolute offset of the entry's bytes */
};

struct tfs_zip {
	struct tfs_zip_entry *e; /* in central directory order */
	uint32_t n;
	unsigned char *cd; /* the central directory's bytes */
	uint32_t *slots;   /* entry index + 1, hashed by name */
	size_t nslots;     /* a power of two */
};

/* Cheap test on a file's first bytes: a zip's first local header. */
int tfs_zip_sniff(const unsigned char *head, size_t n, const char **name, uint32_t *nlen);

/* Reads the directory and every local header; checks that entries lie
 * inside the file, before the directory, and do not overlap. Compression
 * is not refused here: the caller names the entry it cannot map. */
tfs_err tfs_zip_open(struct tfs_source *src, struct tfs_zip *z, struct tfs_diag *d);

/* The entry of that exact name, or NULL. */
const struct tfs_zip_entry *tfs_zip_find(const struct tfs_zip *z, const char *name, size_t len);

void tfs_zip_free(struct tfs_zip *z);

#endif
