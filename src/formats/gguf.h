/* The GGUF format driver, and its reader for tests and fuzzers. */
#ifndef TFS_GGUF_H
#define TFS_GGUF_H

#include "core/format.h"

extern const struct tfs_format tfs_format_gguf;

tfs_err tfs_gguf_read(struct tfs_source *src, const struct tfs_parse_opts *opts, struct tfs_table *out,
		      struct tfs_diag *d);

#endif
