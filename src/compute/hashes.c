/* The digests' names and hex, the store of those worked out so far, and
 * their keys in a source's memo (compute/hashes.h). */
#include "compute/hashes.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/hex.h"

struct tfs_digests {
	pthread_mutex_t lock;
	uint32_t n;
	uint8_t *have; /* bit a: digest a is known */
	unsigned char (*sha)[32];
	uint64_t *xxh;
};

struct tfs_digests *tfs_digests_new(uint32_t nnodes)
{
	struct tfs_digests *s = calloc(1, sizeof *s);
	if (s) {
		pthread_mutex_init(&s->lock, NULL);
		s->n = nnodes;
	}
	return s;
}

void tfs_digests_free(struct tfs_digests *s)
{
	if (!s)
		return;
	pthread_mutex_destroy(&s->lock);
	free(s->have);
	free(s->sha);
	free(s->xxh);
	free(s);
}

size_t tfs_digest_hex_len(enum tfs_digest_algo a)
{
	return a == TFS_DIGEST_SHA256 ? 64 : 16;
}

const char *tfs_digest_name(enum tfs_digest_algo a)
{
	return a == TFS_DIGEST_SHA256 ? "sha256" : "xxh64";
}

static void to_hex(const unsigned char *b, size_t n, char *hex)
{
	static const char digits[] = "0123456789abcdef";
	for (size_t i = 0; i < n; i++) {
		hex[2 * i] = digits[b[i] >> 4];
		hex[2 * i + 1] = digits[b[i] & 15];
	}
	hex[2 * n] = 0;
}

void tfs_digest_hex(enum tfs_digest_algo a, const unsigned char *sha, uint64_t xxh, char *hex)
{
	if (a == TFS_DIGEST_SHA256) {
		to_hex(sha, 32, hex);
	} else {
		unsigned char b[8];
		for (int i = 0; i < 8; i++)
			b[i] = (unsigned char)(xxh >> (56 - 8 * i));
		to_hex(b, 8, hex);
	}
}

int tfs_digests_get(struct tfs_digests *s, uint32_t ino, enum tfs_digest_algo a, char *hex)
{
	int known = 0;
	if (!s || ino >= s->n)
		return 0;
	pthread_mutex_lock(&s->lock);
	if (s->have && (s->have[ino] >> a & 1)) {
		tfs_digest_hex(a, s->sha ? s->sha[ino] : NULL, s->xxh ? s->xxh[ino] : 0, hex);
		known = 1;
	}
	pthread_mutex_unlock(&s->lock);
	return known;
}

/* Kept for the life of the tree; the arrays come with the first digest
 * (most mounts never hash). */
void tfs_digests_put(struct tfs_digests *s, uint32_t ino, enum tfs_digest_algo a, const unsigned char *sha,
		     uint64_t xxh)
{
	pthread_mutex_lock(&s->lock);
	if (!s->have)
		s->have = calloc(s->n, 1);
	if (a == TFS_DIGEST_SHA256 && !s->sha)
		s->sha = malloc((size_t)s->n * sizeof *s->sha);
	if (a == TFS_DIGEST_XXH64 && !s->xxh)
		s->xxh = malloc((size_t)s->n * sizeof *s->xxh);
	if (s->have && (a == TFS_DIGEST_SHA256 ? s->sha != NULL : s->xxh != NULL)) {
		if (a == TFS_DIGEST_SHA256)
			memcpy(s->sha[ino], sha, 32);
		else
			s->xxh[ino] = xxh;
		s->have[ino] |= (uint8_t)(1u << a);
	}
	pthread_mutex_unlock(&s->lock);
}

void tfs_digest_memo_key(enum tfs_digest_algo a, int converted, uint32_t npy, uint64_t begin, uint64_t end,
			 char *out, size_t cap)
{
	snprintf(out, cap, "%s %s %u %llu %llu", tfs_digest_name(a), converted ? "f32" : "raw", npy,
		 (unsigned long long)begin, (unsigned long long)end);
}

/* A digest is written in lowercase, as sha256sum and xxh64sum write it. */
static int hexval(char c)
{
	return c >= 'A' && c <= 'F' ? -1 : tfs_hexval(c);
}

int tfs_digest_parse(enum tfs_digest_algo a, const char *hex, unsigned char *sha, uint64_t *xxh)
{
	size_t n = tfs_digest_hex_len(a);
	if (strlen(hex) != n)
		return -1;
	uint64_t x = 0;
	for (size_t i = 0; i < n; i++) {
		int v = hexval(hex[i]);
		if (v < 0)
			return -1;
		if (a == TFS_DIGEST_SHA256 && i % 2)
			sha[i / 2] = (unsigned char)(hexval(hex[i - 1]) << 4 | v);
		x = x << 4 | (uint64_t)v;
	}
	*xxh = x;
	return 0;
}
