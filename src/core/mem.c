#include "core/mem.h"

#include <malloc.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

void tfs_advise_huge(void *p, size_t len)
{
	const uintptr_t pg = 4096;
	uintptr_t a = ((uintptr_t)p + pg - 1) & ~(pg - 1);
	uintptr_t e = ((uintptr_t)p + len) & ~(pg - 1);
	if (p && len >= ((size_t)4 << 20) && e > a)
		madvise((void *)a, e - a, MADV_HUGEPAGE);
}

void tfs_mem_init(void)
{
	/* A hint too: on failure glibc keeps its own policy. */
	mallopt(M_MMAP_THRESHOLD, 1 << 20);
}

void *tfs_malloc_big(size_t len)
{
	void *p = malloc(len ? len : 1);
	tfs_advise_huge(p, len);
	return p;
}

void *tfs_calloc_big(size_t n, size_t size)
{
	if (size && n > SIZE_MAX / size)
		return NULL;
	/* calloc of a fresh mmap is already zero; the advice must come
	 * before the pages are touched, so allocate, advise, then zero. */
	void *p = tfs_malloc_big(n * size);
	if (p)
		memset(p, 0, n * size);
	return p;
}
