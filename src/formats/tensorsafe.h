/* The tensorsafe format driver (docs/tensorsafe.md), and its pieces for
 * tests and fuzzers. */
#ifndef TFS_TENSORSAFE_H
#define TFS_TENSORSAFE_H

#include "core/format.h"

extern const struct tfs_format tfs_format_tensorsafe;

/* FNV-1a, 64 bits: the metadata block's checksum. */
uint64_t tfs_fnv1a64(const unsigned char *p, size_t n);

/* Parses a metadata block that starts at `meta_start` of a file of
 * `file_size` bytes. */
tfs_err tfs_tsafe_parse_meta(const unsigned char *text, size_t n, uint64_t meta_start, uint64_t file_size,
			     struct tfs_table *out, struct tfs_diag *d);

tfs_err tfs_tsafe_read(struct tfs_source *src, const struct tfs_parse_opts *opts, struct tfs_table *out,
		       struct tfs_diag *d);

#endif
