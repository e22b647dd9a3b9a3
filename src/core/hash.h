/* A fast seeded 64-bit hash for the in-memory tables. The mount seeds it at
 * random so that a crafted checkpoint cannot pre-compute names that all land
 * in one bucket and turn lookups quadratic. */
#ifndef TFS_HASH_H
#define TFS_HASH_H

#include <stdint.h>
#include <string.h>

static inline uint64_t tfs_hash_mix(uint64_t a, uint64_t b)
{
	__uint128_t r = (__uint128_t)a * b;
	return (uint64_t)r ^ (uint64_t)(r >> 64);
}

static inline uint64_t tfs_hash(const void *p, size_t n, uint64_t seed)
{
	const unsigned char *s = p;
	uint64_t h = seed ^ ((uint64_t)n * 0x9e3779b97f4a7c15ull);
	uint64_t w;
	while (n >= 8) {
		memcpy(&w, s, 8);
		h = tfs_hash_mix(h ^ w, 0xa0761d6478bd642full);
		s += 8;
		n -= 8;
	}
	w = 0;
	memcpy(&w, s, n);
	h = tfs_hash_mix(h ^ w ^ 0xe7037ed1a0b428dbull, 0x8ebc6af09c88c6e3ull);
	return tfs_hash_mix(h, seed ^ 0x589965cc75374cc3ull);
}

/* The process-wide seed; tfs_hash_seed_init() sets it from the kernel's
 * random pool (tests and the fuzzer may leave the fixed default). */
extern uint64_t tfs_hash_seed;
void tfs_hash_seed_init(void);

#endif
