/* Allocation of large tables. */
#ifndef TFS_MEM_H
#define TFS_MEM_H

#include <stddef.h>

/* Big tables (headers, names, inode tables) are touched once, page by page;
 * on virtual machines every page fault is dear, so ask the kernel for huge
 * pages on the interior of any block of 4 MiB or more. A hint only. */
void tfs_advise_huge(void *p, size_t len);

/* Once, before any thread starts. glibc raises its mmap threshold each
 * time a big block is freed, after which blocks of that size come from the
 * heap of whichever thread asked, and freed ones stay resident there: a
 * daemon that builds and drops 10 MiB export headers on many threads grew
 * by 60-100 MiB that way (30 MiB with the threshold fixed). A fixed
 * threshold keeps big blocks in their own mappings, given back on free. */
void tfs_mem_init(void);

/* malloc, plus the hint. */
void *tfs_malloc_big(size_t len);
void *tfs_calloc_big(size_t n, size_t size);

#endif
