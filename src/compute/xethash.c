#include "compute/xethash.h"

#include <string.h>

#include "compute/blake3.h"
#include "core/hex.h"

/* The spec's keys (Xet's "hashing" section; the same bytes as xet-core's
 * merklehash DATA_KEY and INTERNAL_NODE_HASH). */
static const uint8_t DATA_KEY[32] = {102, 151, 245, 119, 91,  149, 80,  222, 49,  53,  203,
				     172, 165, 151, 24,  28,  157, 228, 33,  16,  155, 235,
				     43,  88,  180, 208, 176, 75,  147, 173, 242, 41};
static const uint8_t NODE_KEY[32] = {1,   126, 197, 199, 165, 71,  41,  150, 253, 148, 102,
				     102, 180, 138, 2,   230, 93,  221, 83,  111, 55,  199,
				     109, 210, 248, 99,  82,  230, 74,  83,  113, 63};
static const uint8_t ZERO_KEY[32];

/* A group of 2..9 children; "mean branching 4" */
#define GROUP_MIN 2
#define GROUP_MAX 9
/* One child's line: 64 hex digits, " : ", up to 20 digits, "\n". */
#define LINE_MAX (TFS_XET_HEX_LEN + 3 + 20 + 1)

void tfs_xet_chunk_hash(const void *data, size_t len, uint8_t out[TFS_XET_HASH_LEN])
{
	tfs_blake3(DATA_KEY, data, len, out);
}

void tfs_xet_hash_hex(const uint8_t h[TFS_XET_HASH_LEN], char out[TFS_XET_HEX_LEN + 1])
{
	static const char digits[] = "0123456789abcdef";
	for (int w = 0; w < 4; w++)
		for (int b = 0; b < 8; b++) {
			uint8_t v = h[8 * w + 7 - b];
			out[16 * w + 2 * b] = digits[v >> 4];
			out[16 * w + 2 * b + 1] = digits[v & 15];
		}
	out[TFS_XET_HEX_LEN] = 0;
}

tfs_err tfs_xet_hash_parse(const char *s, size_t len, uint8_t out[TFS_XET_HASH_LEN])
{
	if (len != TFS_XET_HEX_LEN)
		return TFS_ERR_FORMAT;
	for (int w = 0; w < 4; w++)
		for (int b = 0; b < 8; b++) {
			int hi = tfs_hexval(s[16 * w + 2 * b]), lo = tfs_hexval(s[16 * w + 2 * b + 1]);
			if (hi < 0 || lo < 0)
				return TFS_ERR_FORMAT;
			out[8 * w + 7 - b] = (uint8_t)(hi << 4 | lo);
		}
	return TFS_OK;
}

/* A child ends its group at a "natural cut": its hash's last word is 0
 * mod 4 (only the low byte of that word matters). */
static int natural_cut(const struct tfs_xet_node *c)
{
	return c->hash[24] % 4 == 0;
}

/* How many of the n children from v make the next group. */
static size_t group_len(const struct tfs_xet_node *v, size_t n)
{
	if (n <= GROUP_MIN)
		return n;
	size_t end = n < GROUP_MAX ? n : GROUP_MAX;
	for (size_t i = GROUP_MIN; i < end; i++)
		if (natural_cut(&v[i]))
			return i + 1;
	return end;
}

static size_t put_line(char *p, const struct tfs_xet_node *c)
{
	char dec[21];
	size_t k = sizeof dec;
	uint64_t x = c->len;
	do {
		dec[--k] = (char)('0' + x % 10);
		x /= 10;
	} while (x);
	tfs_xet_hash_hex(c->hash, p);
	memcpy(p + TFS_XET_HEX_LEN, " : ", 3);
	memcpy(p + TFS_XET_HEX_LEN + 3, dec + k, sizeof dec - k);
	size_t n = TFS_XET_HEX_LEN + 3 + sizeof dec - k;
	p[n] = '\n';
	return n + 1;
}

static struct tfs_xet_node merge(const struct tfs_xet_node *v, size_t n)
{
	char text[GROUP_MAX * LINE_MAX];
	size_t at = 0;
	struct tfs_xet_node out = {.len = 0};
	for (size_t i = 0; i < n; i++) {
		at += put_line(text + at, &v[i]);
		out.len += v[i].len;
	}
	tfs_blake3(NODE_KEY, text, at, out.hash);
	return out;
}

void tfs_xet_merkle(struct tfs_xet_node *v, size_t n, uint8_t out[TFS_XET_HASH_LEN])
{
	if (n == 0) {
		memset(out, 0, TFS_XET_HASH_LEN);
		return;
	}
	while (n > 1) {
		size_t w = 0;
		for (size_t r = 0; r < n;) {
			size_t g = group_len(v + r, n - r);
			v[w++] = merge(v + r, g);
			r += g;
		}
		n = w;
	}
	memcpy(out, v[0].hash, TFS_XET_HASH_LEN);
}

void tfs_xet_xorb_hash(struct tfs_xet_node *v, size_t n, uint8_t out[TFS_XET_HASH_LEN])
{
	tfs_xet_merkle(v, n, out);
}

void tfs_xet_file_hash(struct tfs_xet_node *v, size_t n, uint8_t out[TFS_XET_HASH_LEN])
{
	uint8_t root[TFS_XET_HASH_LEN];
	if (n == 0) {
		memset(out, 0, TFS_XET_HASH_LEN);
		return;
	}
	tfs_xet_merkle(v, n, root);
	tfs_blake3(ZERO_KEY, root, sizeof root, out);
}
