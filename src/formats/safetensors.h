/* The safetensors format driver, and its parser for tests and fuzzers. */
#ifndef TFS_SAFETENSORS_H
#define TFS_SAFETENSORS_H

#include "core/format.h"

#define TFS_HEADER_MAX TFS_HEADER_CAP /* N may equal this */
#define TFS_NESTING_MAX 127           /* levels of arrays/objects, top included */

extern const struct tfs_format tfs_format_safetensors;

/* Parses and validates `n` header bytes of a file of `file_size` bytes
 * (8 + n + data). On failure `d` says what is wrong and `out` holds
 * nothing. */
tfs_err tfs_st_parse(const unsigned char *hdr, size_t n, uint64_t file_size,
		     const struct tfs_parse_opts *opts, struct tfs_table *out, struct tfs_diag *d);

/* Reads the length prefix and the header from `src`, then parses them. */
tfs_err tfs_st_read(struct tfs_source *src, const struct tfs_parse_opts *opts, struct tfs_table *out,
		    struct tfs_diag *d);

#endif
