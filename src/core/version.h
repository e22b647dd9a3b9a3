/* The one version of tensorfs: --version, the man page's footer and the
 * User-Agent of every HTTP request say this. */
#ifndef TFS_VERSION_H
#define TFS_VERSION_H

#define TFS_VERSION "0.3.0"

#endif
