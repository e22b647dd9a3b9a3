/* The PyTorch checkpoint format driver (torch.save's zip format). */
#ifndef TFS_TORCH_H
#define TFS_TORCH_H

#include "core/format.h"

extern const struct tfs_format tfs_format_torch;

tfs_err tfs_torch_read(struct tfs_source *src, const struct tfs_parse_opts *o, struct tfs_table *out,
		       struct tfs_diag *d);

#endif
