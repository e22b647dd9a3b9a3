/* The registry of source drivers: the one place that names them. The
 * local file driver claims every SOURCE that is not a URL, so it comes
 * last. */
#include "core/source.h"

extern const struct tfs_source_driver tfs_source_hf;
extern const struct tfs_source_driver tfs_source_s3;
extern const struct tfs_source_driver tfs_source_http;
extern const struct tfs_source_driver tfs_source_file;

const struct tfs_source_driver *const tfs_source_drivers[] = {
	&tfs_source_hf, &tfs_source_s3, &tfs_source_http, &tfs_source_file, NULL,
};
