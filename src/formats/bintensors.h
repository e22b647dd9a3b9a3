/* The bintensors format driver, and its parser for tests and fuzzers. */
#ifndef TFS_BINTENSORS_H
#define TFS_BINTENSORS_H

#include "core/format.h"

extern const struct tfs_format tfs_format_bintensors;

/* Parses `n` header bytes of a file of `file_size` bytes (8 + n + data). */
tfs_err tfs_bt_parse(const unsigned char *hdr, size_t n, uint64_t file_size, struct tfs_table *out,
		     struct tfs_diag *d);

tfs_err tfs_bt_read(struct tfs_source *src, const struct tfs_parse_opts *opts, struct tfs_table *out,
		    struct tfs_diag *d);

#endif
