/* The NumPy .npz format driver (np.savez: a zip of stored .npy members),
 * and its .npy header parser for tests and fuzzers. */
#ifndef TFS_NPZ_H
#define TFS_NPZ_H

#include "core/format.h"

extern const struct tfs_format tfs_format_npz;

/* What an .npy header says. */
struct tfs_npy {
	unsigned dtype; /* enum tfs_dtype */
	int fortran;
	uint32_t ndim;
	uint64_t shape[32];
	uint64_t data; /* bytes from the member's start to its data */
};

/* Parses the first bytes of an .npy member (`n` of them, at least the
 * whole header); one line in `d` on failure. */
tfs_err tfs_npy_parse(const unsigned char *p, size_t n, struct tfs_npy *out, struct tfs_diag *d);

tfs_err tfs_npz_read(struct tfs_source *src, const struct tfs_parse_opts *o, struct tfs_table *out,
		     struct tfs_diag *d);

#endif
