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

/* The chaining value of a finished subtree of `chunks` chunks (a power of
 * two, starting at a multiple of it; more input follows it) joins the
 * tree: every pair of equal subtrees it completes is merged, as the
 * count's trailing zero bits say. */
static void add_subtree_cv(struct tfs_blake3 *h, uint32_t cv[8], uint64_t chunks)
{
	struct node n;
	for (uint64_t total = h->chunk / chunks + 1; (total & 1) == 0; total >>= 1) {
		parent_node(h, h->stack[--h->stack_len], cv, &n);
		node_cv(&n, cv);
	}
	memcpy(h->stack[h->stack_len++], cv, 32);
	memcpy(h->cv, h->key, 32);
	h->chunk += chunks;
	h->blocks = 0;
	h->block_len = 0;
	memset(h->block, 0, BLOCK_LEN);
}

static void add_chunk_cv(struct tfs_blake3 *h, uint32_t cv[8])
{
	add_subtree_cv(h, cv, 1);
}

/* cv[i] becomes the parent of cv[2i] and cv[2i + 1], for from <= i <
 * pairs (in place, in order: each parent is written after its children
 * were read). */
static void parents_portable(const struct tfs_blake3 *h, uint32_t (*cv)[8], size_t from, size_t pairs)
{
	for (size_t i = from; i < pairs; i++) {
		struct node n;
		parent_node(h, cv[2 * i], cv[2 * i + 1], &n);
		node_cv(&n, cv[i]);
	}
}

/* The chunk just finished (more input follows it). */
static void finish_chunk(struct tfs_blake3 *h)
{
	struct node n = {.block_len = h->block_len, .counter = h->chunk, .flags = chunk_flags(h) | CHUNK_END};
	uint32_t cv[8];
	memcpy(n.cv, h->cv, 32);
	memcpy(n.block, h->block, BLOCK_LEN);
	node_cv(&n, cv);
	add_chunk_cv(h, cv);
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

/* ---- eight chunks at once (AVX2) ----
 *
 * The chunks of an input are independent until they meet in the tree:
 * eight whole chunks are compressed at once, each in one 32-bit lane of
 * the vectors, word w of all eight states in one vector. Their chaining
 * values then join the tree one by one, as the portable path's do. Chosen
 * at run time, on CPUs that have AVX2; the same hashes (the unit tests
 * compare both paths on every vector's length). */

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#include <immintrin.h>

#define AVX2 __attribute__((target("avx2")))

AVX2 static inline __m256i rot16(__m256i x)
{
	return _mm256_shuffle_epi8(x, _mm256_setr_epi8(2, 3, 0, 1, 6, 7, 4, 5, 10, 11, 8, 9, 14, 15, 12, 13,
						       2, 3, 0, 1, 6, 7, 4, 5, 10, 11, 8, 9, 14, 15, 12, 13));
}

AVX2 static inline __m256i rot8(__m256i x)
{
	return _mm256_shuffle_epi8(x, _mm256_setr_epi8(1, 2, 3, 0, 5, 6, 7, 4, 9, 10, 11, 8, 13, 14, 15, 12,
						       1, 2, 3, 0, 5, 6, 7, 4, 9, 10, 11, 8, 13, 14, 15, 12));
}

AVX2 static inline __m256i rotn(__m256i x, int n)
{
	return _mm256_or_si256(_mm256_srli_epi32(x, n), _mm256_slli_epi32(x, 32 - n));
}

#define G8(a, b, c, d, x, y)                                                                                 \
	do {                                                                                                 \
		v[a] = _mm256_add_epi32(_mm256_add_epi32(v[a], v[b]), x);                                    \
		v[d] = rot16(_mm256_xor_si256(v[d], v[a]));                                                  \
		v[c] = _mm256_add_epi32(v[c], v[d]);                                                         \
		v[b] = rotn(_mm256_xor_si256(v[b], v[c]), 12);                                               \
		v[a] = _mm256_add_epi32(_mm256_add_epi32(v[a], v[b]), y);                                    \
		v[d] = rot8(_mm256_xor_si256(v[d], v[a]));                                                   \
		v[c] = _mm256_add_epi32(v[c], v[d]);                                                         \
		v[b] = rotn(_mm256_xor_si256(v[b], v[c]), 7);                                                \
	} while (0)

/* r[i] = word i of the eight rows m[0..8) (an 8x8 transpose). */
AVX2 static void transpose8(__m256i m[8])
{
	__m256i a[8], b[8];
	for (int i = 0; i < 8; i += 2) {
		a[i] = _mm256_unpacklo_epi32(m[i], m[i + 1]);
		a[i + 1] = _mm256_unpackhi_epi32(m[i], m[i + 1]);
	}
	for (int i = 0; i < 8; i += 4) {
		b[i] = _mm256_unpacklo_epi64(a[i], a[i + 2]);
		b[i + 1] = _mm256_unpackhi_epi64(a[i], a[i + 2]);
		b[i + 2] = _mm256_unpacklo_epi64(a[i + 1], a[i + 3]);
		b[i + 3] = _mm256_unpackhi_epi64(a[i + 1], a[i + 3]);
	}
	for (int i = 0; i < 4; i++) {
		m[i] = _mm256_permute2x128_si256(b[i], b[i + 4], 0x20);
		m[i + 4] = _mm256_permute2x128_si256(b[i], b[i + 4], 0x31);
	}
}

/* Block `blk` of the eight chunks at p (1024 bytes apart) as message
 * words: m[w] holds word w of each. */
AVX2 static void load8(const uint8_t *p, int blk, __m256i m[16])
{
	for (int half = 0; half < 2; half++) {
		__m256i r[8];
		for (int c = 0; c < 8; c++)
			r[c] = _mm256_loadu_si256(
				(const __m256i *)(p + (size_t)c * CHUNK_LEN + blk * BLOCK_LEN + 32 * half));
		transpose8(r);
		memcpy(m + 8 * half, r, sizeof r);
	}
}

/* The chaining values of the eight whole chunks at p, numbered from
 * `counter` on, into cv[c]. */
AVX2 static void chunks8(const struct tfs_blake3 *h, const uint8_t *p, uint64_t counter, uint32_t cv[16][8])
{
	__m256i s[8], m[16], v[16];
	uint32_t lo[8], hi[8];
	for (int c = 0; c < 8; c++) {
		lo[c] = (uint32_t)(counter + (uint64_t)c);
		hi[c] = (uint32_t)((counter + (uint64_t)c) >> 32);
	}
	for (int i = 0; i < 8; i++)
		s[i] = _mm256_set1_epi32((int)h->key[i]);
	for (int blk = 0; blk < CHUNK_LEN / BLOCK_LEN; blk++) {
		uint32_t flags = h->flags | (blk == 0 ? CHUNK_START : 0) |
				 (blk == CHUNK_LEN / BLOCK_LEN - 1 ? CHUNK_END : 0);
		load8(p, blk, m);
		memcpy(v, s, sizeof s);
		for (int i = 0; i < 4; i++)
			v[8 + i] = _mm256_set1_epi32((int)IV[i]);
		v[12] = _mm256_loadu_si256((const __m256i *)lo);
		v[13] = _mm256_loadu_si256((const __m256i *)hi);
		v[14] = _mm256_set1_epi32(BLOCK_LEN);
		v[15] = _mm256_set1_epi32((int)flags);
		for (int r = 0; r < 7; r++) {
			const uint8_t *q = SCHEDULE[r];
			G8(0, 4, 8, 12, m[q[0]], m[q[1]]);
			G8(1, 5, 9, 13, m[q[2]], m[q[3]]);
			G8(2, 6, 10, 14, m[q[4]], m[q[5]]);
			G8(3, 7, 11, 15, m[q[6]], m[q[7]]);
			G8(0, 5, 10, 15, m[q[8]], m[q[9]]);
			G8(1, 6, 11, 12, m[q[10]], m[q[11]]);
			G8(2, 7, 8, 13, m[q[12]], m[q[13]]);
			G8(3, 4, 9, 14, m[q[14]], m[q[15]]);
		}
		for (int i = 0; i < 8; i++)
			s[i] = _mm256_xor_si256(v[i], v[i + 8]);
	}
	transpose8(s);
	for (int c = 0; c < 8; c++)
		_mm256_storeu_si256((__m256i *)cv[c], s[c]);
}

/* ---- sixteen chunks at once (AVX-512), the same way ---- */

#define AVX512 __attribute__((target("avx512f")))

#define G16(a, b, c, d, x, y)                                                                                \
	do {                                                                                                 \
		v[a] = _mm512_add_epi32(_mm512_add_epi32(v[a], v[b]), x);                                    \
		v[d] = _mm512_ror_epi32(_mm512_xor_si512(v[d], v[a]), 16);                                   \
		v[c] = _mm512_add_epi32(v[c], v[d]);                                                         \
		v[b] = _mm512_ror_epi32(_mm512_xor_si512(v[b], v[c]), 12);                                   \
		v[a] = _mm512_add_epi32(_mm512_add_epi32(v[a], v[b]), y);                                    \
		v[d] = _mm512_ror_epi32(_mm512_xor_si512(v[d], v[a]), 8);                                    \
		v[c] = _mm512_add_epi32(v[c], v[d]);                                                         \
		v[b] = _mm512_ror_epi32(_mm512_xor_si512(v[b], v[c]), 7);                                    \
	} while (0)

/* A 16x16 transpose of 32-bit words: r[i] becomes word i of every row.
 * Words within 128-bit lanes first, then the lanes. */
AVX512 static void transpose16(__m512i r[16])
{
	__m512i t[16], u[16];
	for (int i = 0; i < 16; i += 2) {
		t[i] = _mm512_unpacklo_epi32(r[i], r[i + 1]);
		t[i + 1] = _mm512_unpackhi_epi32(r[i], r[i + 1]);
	}
	for (int i = 0; i < 16; i += 4) {
		u[i] = _mm512_unpacklo_epi64(t[i], t[i + 2]);
		u[i + 1] = _mm512_unpackhi_epi64(t[i], t[i + 2]);
		u[i + 2] = _mm512_unpacklo_epi64(t[i + 1], t[i + 3]);
		u[i + 3] = _mm512_unpackhi_epi64(t[i + 1], t[i + 3]);
	}
	for (int j = 0; j < 4; j++) {
		__m512i vlo = _mm512_shuffle_i32x4(u[j], u[4 + j], 0x44),
			vhi = _mm512_shuffle_i32x4(u[j], u[4 + j], 0xee);
		__m512i wlo = _mm512_shuffle_i32x4(u[8 + j], u[12 + j], 0x44),
			whi = _mm512_shuffle_i32x4(u[8 + j], u[12 + j], 0xee);
		r[j] = _mm512_shuffle_i32x4(vlo, wlo, 0x88);
		r[4 + j] = _mm512_shuffle_i32x4(vlo, wlo, 0xdd);
		r[8 + j] = _mm512_shuffle_i32x4(vhi, whi, 0x88);
		r[12 + j] = _mm512_shuffle_i32x4(vhi, whi, 0xdd);
	}
}

/* The seven rounds of sixteen compressions, one in each lane. */
AVX512 static inline __attribute__((always_inline)) void rounds16(__m512i v[16], const __m512i m[16])
{
	for (int r = 0; r < 7; r++) {
		const uint8_t *q = SCHEDULE[r];
		G16(0, 4, 8, 12, m[q[0]], m[q[1]]);
		G16(1, 5, 9, 13, m[q[2]], m[q[3]]);
		G16(2, 6, 10, 14, m[q[4]], m[q[5]]);
		G16(3, 7, 11, 15, m[q[6]], m[q[7]]);
		G16(0, 5, 10, 15, m[q[8]], m[q[9]]);
		G16(1, 6, 11, 12, m[q[10]], m[q[11]]);
		G16(2, 7, 8, 13, m[q[12]], m[q[13]]);
		G16(3, 4, 9, 14, m[q[14]], m[q[15]]);
	}
}

/* The chaining values of the sixteen whole chunks at p, numbered from
 * `counter` on, into cv[c]. */
AVX512 static void chunks16(const struct tfs_blake3 *h, const uint8_t *p, uint64_t counter,
			    uint32_t cv[16][8])
{
	__m512i s[8], m[16], v[16];
	uint32_t lo[16], hi[16], out[8][16];
	for (int c = 0; c < 16; c++) {
		lo[c] = (uint32_t)(counter + (uint64_t)c);
		hi[c] = (uint32_t)((counter + (uint64_t)c) >> 32);
	}
	for (int i = 0; i < 8; i++)
		s[i] = _mm512_set1_epi32((int)h->key[i]);
	for (int blk = 0; blk < CHUNK_LEN / BLOCK_LEN; blk++) {
		uint32_t flags = h->flags | (blk == 0 ? CHUNK_START : 0) |
				 (blk == CHUNK_LEN / BLOCK_LEN - 1 ? CHUNK_END : 0);
		for (int c = 0; c < 16; c++)
			m[c] = _mm512_loadu_si512(p + (size_t)c * CHUNK_LEN + blk * BLOCK_LEN);
		transpose16(m);
		memcpy(v, s, sizeof s);
		for (int i = 0; i < 4; i++)
			v[8 + i] = _mm512_set1_epi32((int)IV[i]);
		v[12] = _mm512_loadu_si512(lo);
		v[13] = _mm512_loadu_si512(hi);
		v[14] = _mm512_set1_epi32(BLOCK_LEN);
		v[15] = _mm512_set1_epi32((int)flags);
		rounds16(v, m);
		for (int i = 0; i < 8; i++)
			s[i] = _mm512_xor_si512(v[i], v[i + 8]);
	}
	for (int i = 0; i < 8; i++)
		_mm512_storeu_si512(out[i], s[i]);
	for (int c = 0; c < 16; c++)
		for (int i = 0; i < 8; i++)
			cv[c][i] = out[i][c];
}

/* Up to sixteen parents at once: cv[i] becomes the parent of cv[2i] and
 * cv[2i + 1], for i < pairs (all children read before a parent is
 * written; the lanes past `pairs` compute what nobody keeps). A Xet chunk
 * of 64 KiB has 63 parents over its 64 chunks: one at a time they cost a
 * third of its hashing. */
AVX512 static void parents16(const struct tfs_blake3 *h, uint32_t (*cv)[8], size_t pairs)
{
	__m512i m[16], v[16];
	uint32_t words[16][16] = {{0}}, out[8][16];
	for (size_t c = 0; c < pairs; c++)
		for (int w = 0; w < 16; w++)
			words[w][c] = cv[2 * c + (size_t)w / 8][w % 8];
	for (int w = 0; w < 16; w++)
		m[w] = _mm512_loadu_si512(words[w]);
	for (int i = 0; i < 8; i++)
		v[i] = _mm512_set1_epi32((int)h->key[i]);
	for (int i = 0; i < 4; i++)
		v[8 + i] = _mm512_set1_epi32((int)IV[i]);
	v[12] = v[13] = _mm512_setzero_si512();
	v[14] = _mm512_set1_epi32(BLOCK_LEN);
	v[15] = _mm512_set1_epi32((int)(PARENT | h->flags));
	rounds16(v, m);
	for (int i = 0; i < 8; i++)
		_mm512_storeu_si512(out[i], _mm512_xor_si512(v[i], v[i + 8]));
	for (size_t c = 0; c < pairs; c++)
		for (int i = 0; i < 8; i++)
			cv[c][i] = out[i][c];
}

/* How many chunks the CPU hashes at once: 16, 8, or 1 (the portable
 * path alone). */
static int lanes(void)
{
	return __builtin_cpu_supports("avx512f") ? 16 : __builtin_cpu_supports("avx2") ? 8 : 1;
}

/* The chaining values of `lanes` whole chunks at p. */
static void chunks_at_once(int n, const struct tfs_blake3 *h, const uint8_t *p, uint64_t counter,
			   uint32_t cv[16][8])
{
	if (n == 16)
		chunks16(h, p, counter, cv);
	else
		chunks8(h, p, counter, cv);
}

/* cv[i] = the parent of cv[2i] and cv[2i + 1], for i < pairs: sixteen
 * at a time in order (a batch's parents land below the children still to
 * be read), a few left over one at a time. */
static void parents(int n, const struct tfs_blake3 *h, uint32_t (*cv)[8], size_t pairs)
{
	size_t i = 0;
	while (n == 16 && pairs - i >= 4) {
		size_t k = pairs - i < 16 ? pairs - i : 16;
		uint32_t tmp[32][8];
		memcpy(tmp, cv[2 * i], 2 * k * sizeof cv[0]);
		parents16(h, tmp, k);
		memcpy(cv[i], tmp, k * sizeof cv[0]);
		i += k;
	}
	parents_portable(h, cv, i, pairs);
}
#else
static int lanes(void)
{
	return 1;
}
static void chunks_at_once(int n, const struct tfs_blake3 *h, const uint8_t *p, uint64_t counter,
			   uint32_t cv[16][8])
{
	(void)n, (void)h, (void)p, (void)counter, (void)cv;
}
static void parents(int n, const struct tfs_blake3 *h, uint32_t (*cv)[8], size_t pairs)
{
	(void)n;
	parents_portable(h, cv, 0, pairs);
}
#endif

int tfs_blake3_lanes(void)
{
	return lanes();
}

void tfs_blake3(const uint8_t *key, const void *data, size_t len, uint8_t out[TFS_BLAKE3_OUT_LEN])
{
	tfs_blake3_with(lanes(), key, data, len, out);
}

void tfs_blake3_with(int n, const uint8_t *key, const void *data, size_t len, uint8_t out[TFS_BLAKE3_OUT_LEN])
{
	struct tfs_blake3 h;
	const uint8_t *p = data;
	tfs_blake3_init(&h, key);
	/* Many at a time the chunks that are surely not the last (which the
	 * portable path finishes, as the root or not), up to BATCH of them
	 * (the last few from a copy, with lanes to spare); their chaining
	 * values then join the tree in subtrees, each a power of two chunks
	 * that starts at a multiple of itself (BATCH while it fits, then the
	 * binary digits of what is left), merged level by level before. */
	enum { BATCH = 64 };
	if (n != 16 && n != 8)
		n = 1;
	size_t whole = len > CHUNK_LEN && n > 1 ? (len - 1) / CHUNK_LEN : 0;
	while (whole) {
		uint32_t cv[BATCH][8];
		size_t w = whole < BATCH ? whole : BATCH;
		for (size_t c = 0; c < w; c += (size_t)n) {
			if (w - c >= (size_t)n) {
				chunks_at_once(n, &h, p + c * CHUNK_LEN, h.chunk + c, cv + c);
			} else {
				uint8_t tmp[16 * CHUNK_LEN];
				uint32_t some[16][8];
				memcpy(tmp, p + c * CHUNK_LEN, (w - c) * CHUNK_LEN);
				memset(tmp + (w - c) * CHUNK_LEN, 0, ((size_t)n - (w - c)) * CHUNK_LEN);
				chunks_at_once(n, &h, tmp, h.chunk + c, some);
				memcpy(cv[c], some, (w - c) * sizeof cv[0]);
			}
		}
		for (size_t at = 0, k = BATCH; at < w; k /= 2) {
			if (k > w - at)
				continue;
			for (size_t m = k; m > 1; m /= 2)
				parents(n, &h, cv + at, m / 2);
			add_subtree_cv(&h, cv[at], k);
			at += k;
		}
		p += w * CHUNK_LEN;
		whole -= w;
	}
	tfs_blake3_update(&h, p, len - (size_t)(p - (const uint8_t *)data));
	tfs_blake3_final(&h, out, TFS_BLAKE3_OUT_LEN);
}
