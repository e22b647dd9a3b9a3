/* Allocation of large tables. */
#ifndef TFS_MEM_H
#define TFS_MEM_H

#include <stddef.h>

/* Big tables (headers, names, inode tables) are touched once, page by page;
 * on virtual machines every page fault is dear, so ask the kernel for huge
 * pages on the interior of any block of 4 MiB or more. A hint only. */
void tfs_advise_huge(void *p, size_t len);

/* malloc, plus the hint. */
void *tfs_malloc_big(size_t len);
void *tfs_calloc_big(size_t n, size_t size);

#endif
