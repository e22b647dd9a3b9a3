#include "compute/blake3.h"

#include <string.h>

enum {
	CHUNK_START = 1,
	CHUNK_END = 2,
	PARENT = 4,
	ROOT = 8,
	KEYED_HASH = 16,
};

#define CHUNK_LEN 1024
#define BLOCK_LEN 64

static const uint32_t IV[8] = {0x6A09E667, 0xBB67AE85, 0x3C6EF372, 0xA54FF53A,
			       0x510E527F, 0x9B05688C, 0x1F83D9AB, 0x5BE0CD19};

/* The message words each of the seven rounds reads, in order: the
 * paper's permutation applied once per round, written out so that no
 * round moves the message. */
static const uint8_t SCHEDULE[7][16] = {
	{0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15},
	{2, 6, 3, 10, 7, 0, 4, 13, 1, 11, 12, 5, 9, 14, 15, 8},
	{3, 4, 10, 12, 13, 2, 7, 14, 6, 5, 9, 0, 11, 15, 8, 1},
	{10, 7, 12, 9, 14, 3, 13, 15, 4, 0, 11, 2, 5, 8, 1, 6},
	{12, 13, 9, 11, 15, 10, 14, 8, 7, 2, 5, 3, 0, 1, 6, 4},
	{9, 14, 11, 5, 8, 12, 15, 1, 13, 3, 0, 10, 2, 6, 4, 7},
	{11, 15, 5, 0, 1, 9, 8, 6, 14, 10, 2, 12, 3, 4, 7, 13},
};

static inline uint32_t load32(const uint8_t *p)
{
	return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

static inline void store32(uint8_t *p, uint32_t v)
{
	p[0] = (uint8_t)v;
	p[1] = (uint8_t)(v >> 8);
	p[2] = (uint8_t)(v >> 16);
	p[3] = (uint8_t)(v >> 24);
}

static inline uint32_t rotr(uint32_t x, int n)
{
	return x >> n | x << (32 - n);
}

#define G(a, b, c, d, x, y)                                                                                  \
	do {                                                                                                 \
		v[a] += v[b] + (x);                                                                          \
		v[d] = rotr(v[d] ^ v[a], 16);                                                                \
		v[c] += v[d];                                                                                \
		v[b] = rotr(v[b] ^ v[c], 12);                                                                \
		v[a] += v[b] + (y);                                                                          \
		v[d] = rotr(v[d] ^ v[a], 8);                                                                 \
		v[c] += v[d];                                                                                \
		v[b] = rotr(v[b] ^ v[c], 7);                                                                 \
	} while (0)

/* The compression function: all 16 words of its output (the first 8 are
 * a chaining value; all 16 are a root's output block). */
static void compress(const uint32_t cv[8], const uint8_t block[BLOCK_LEN], uint32_t block_len,
		     uint64_t counter, uint32_t flags, uint32_t out[16])
{
	uint32_t m[16], v[16];
	for (int i = 0; i < 16; i++)
		m[i] = load32(block + 4 * i);
	memcpy(v, cv, 32);
	memcpy(v + 8, IV, 16);
	v[12] = (uint32_t)counter;
	v[13] = (uint32_t)(counter >> 32);
	v[14] = block_len;
	v[15] = flags;
	for (int r = 0; r < 7; r++) {
		const uint8_t *s = SCHEDULE[r];
		G(0, 4, 8, 12, m[s[0]], m[s[1]]);
		G(1, 5, 9, 13, m[s[2]], m[s[3]]);
		G(2, 6, 10, 14, m[s[4]], m[s[5]]);
		G(3, 7, 11, 15, m[s[6]], m[s[7]]);
		G(0, 5, 10, 15, m[s[8]], m[s[9]]);
		G(1, 6, 11, 12, m[s[10]], m[s[11]]);
		G(2, 7, 8, 13, m[s[12]], m[s[13]]);
		G(3, 4, 9, 14, m[s[14]], m[s[15]]);
	}
	for (int i = 0; i < 8; i++) {
		out[i] = v[i] ^ v[i + 8];
		out[i + 8] = v[i + 8] ^ cv[i];
	}
}

/* What is compressed last, kept so a root can be asked for any length. */
struct node {
	uint32_t cv[8];
	uint8_t block[BLOCK_LEN];
	uint32_t block_len;
	uint64_t counter;
	uint32_t flags;
};

static void node_cv(const struct node *n, uint32_t cv[8])
{
	uint32_t out[16];
	compress(n->cv, n->block, n->block_len, n->counter, n->flags, out);
	memcpy(cv, out, 32);
}

static void parent_node(const struct tfs_blake3 *h, const uint32_t left[8], const uint32_t right[8],
			struct node *n)
{
	memcpy(n->cv, h->key, 32);
	for (int i = 0; i < 8; i++) {
		store32(n->block + 4 * i, left[i]);
		store32(n->block + 32 + 4 * i, right[i]);
	}
	n->block_len = BLOCK_LEN;
	n->counter = 0;
	n->flags = PARENT | h->flags;
}

void tfs_blake3_init(struct tfs_blake3 *h, const uint8_t *key)
{
	memset(h, 0, sizeof *h);
	if (key) {
		for (int i = 0; i < 8; i++)
			h->key[i] = load32(key + 4 * i);
		h->flags = KEYED_HASH;
	} else {
		memcpy(h->key, IV, 32);
	}
	memcpy(h->cv, h->key, 32);
}

static uint32_t chunk_flags(const struct tfs_blake3 *h)
{
	return h->flags | (h->blocks == 0 ? CHUNK_START : 0);
}

static void compress_block(struct tfs_blake3 *h, const uint8_t *block)
{
	uint32_t out[16];
	compress(h->cv, block, BLOCK_LEN, h->chunk, chunk_flags(h), out);
	memcpy(h->cv, out, 32);
	h->blocks++;
}

/* The chunk just finished (more input follows it) joins the tree: every
 * pair of equal subtrees it completes is merged, as the chunk count's
 * trailing zero bits say. */
static void finish_chunk(struct tfs_blake3 *h)
{
	struct node n = {.block_len = h->block_len, .counter = h->chunk, .flags = chunk_flags(h) | CHUNK_END};
	uint32_t cv[8];
	memcpy(n.cv, h->cv, 32);
	memcpy(n.block, h->block, BLOCK_LEN);
	node_cv(&n, cv);
	for (uint64_t total = h->chunk + 1; (total & 1) == 0; total >>= 1) {
		parent_node(h, h->stack[--h->stack_len], cv, &n);
		node_cv(&n, cv);
	}
	memcpy(h->stack[h->stack_len++], cv, 32);
	memcpy(h->cv, h->key, 32);
	h->chunk++;
	h->blocks = 0;
	h->block_len = 0;
	memset(h->block, 0, BLOCK_LEN);
}

void tfs_blake3_update(struct tfs_blake3 *h, const void *data, size_t len)
{
	const uint8_t *p = data;
	while (len) {
		if (h->blocks * BLOCK_LEN + h->block_len == CHUNK_LEN)
			finish_chunk(h);
		if (h->block_len == BLOCK_LEN) {
			compress_block(h, h->block);
			h->block_len = 0;
			memset(h->block, 0, BLOCK_LEN);
		}
		/* Whole blocks straight from the input while one is sure not
		 * to be its chunk's last (that one needs CHUNK_END). */
		while (h->block_len == 0 && h->blocks < CHUNK_LEN / BLOCK_LEN - 1 && len > BLOCK_LEN) {
			compress_block(h, p);
			p += BLOCK_LEN;
			len -= BLOCK_LEN;
		}
		size_t take = BLOCK_LEN - h->block_len;
		if (take > len)
			take = len;
		memcpy(h->block + h->block_len, p, take);
		h->block_len += (uint8_t)take;
		p += take;
		len -= take;
	}
}

void tfs_blake3_final(const struct tfs_blake3 *h, uint8_t *out, size_t out_len)
{
	struct node n = {.block_len = h->block_len, .counter = h->chunk, .flags = chunk_flags(h) | CHUNK_END};
	memcpy(n.cv, h->cv, 32);
	memcpy(n.block, h->block, BLOCK_LEN);
	for (unsigned i = h->stack_len; i > 0; i--) {
		uint32_t cv[8];
		node_cv(&n, cv);
		parent_node(h, h->stack[i - 1], cv, &n);
	}
	for (uint64_t k = 0; out_len; k++) {
		uint32_t w[16];
		uint8_t b[64];
		compress(n.cv, n.block, n.block_len, k, n.flags | ROOT, w);
		for (int i = 0; i < 16; i++)
			store32(b + 4 * i, w[i]);
		size_t take = out_len < 64 ? out_len : 64;
		memcpy(out, b, take);
		out += take;
		out_len -= take;
	}
}

void tfs_blake3(const uint8_t *key, const void *data, size_t len, uint8_t out[TFS_BLAKE3_OUT_LEN])
{
	struct tfs_blake3 h;
	tfs_blake3_init(&h, key);
	tfs_blake3_update(&h, data, len);
	tfs_blake3_final(&h, out, TFS_BLAKE3_OUT_LEN);
}
