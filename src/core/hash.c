#include "core/hash.h"

#include <sys/random.h>

uint64_t tfs_hash_seed = 0x2d358dccaa6c78a5ull;

void tfs_hash_seed_init(void)
{
	uint64_t s;
	if (getrandom(&s, sizeof s, GRND_NONBLOCK) == (ssize_t)sizeof s)
		tfs_hash_seed = s;
}
