/* What verifying Xet costs on this machine: MB/s of BLAKE3 (a chunk's
 * keyed hash, over 64 KiB chunks), of the Merkle hash over the chunks'
 * hashes (per MB of the data under them), and of decoding chunks of each
 * compression type (LZ4, byte planes + LZ4, stored), each the median of
 * RUNS runs over DATA MiB of float32 weights that look trained (random
 * signs, small exponents: what LZ4 and byte planes meet in a checkpoint).
 * make build/xetspeed && build/xetspeed [DATA_MIB [RUNS]] */
#include <lz4frame.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "compute/blake3.h"
#include "compute/xetchunk.h"
#include "compute/xethash.h"

#define CHUNK (64 * 1024)

static double now(void)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

static int cmp(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return (x > y) - (x < y);
}

static double median(double *v, int n)
{
	qsort(v, (size_t)n, sizeof *v, cmp);
	return v[n / 2];
}

/* n bytes of float32 values of a trained-looking layer. */
static void weights(uint8_t *p, size_t n)
{
	uint64_t s = 0x9e3779b97f4a7c15ull;
	for (size_t i = 0; i + 4 <= n; i += 4) {
		s ^= s << 13, s ^= s >> 7, s ^= s << 17;
		float f = (float)((double)(s >> 11) / 9007199254740992.0 - 0.5) * 0.05f;
		memcpy(p + i, &f, 4);
	}
}

/* One chunk serialized with the given type: header and payload. */
static size_t serialize(const uint8_t *raw, size_t n, int type, uint8_t *out, uint8_t *tmp)
{
	size_t c = n;
	const uint8_t *src = raw;
	if (type == TFS_XET_BG4_LZ4) {
		tfs_xet_bg4_split(raw, n, tmp);
		src = tmp;
	}
	if (type == TFS_XET_STORED)
		memcpy(out + 8, raw, n);
	else
		c = LZ4F_compressFrame(out + 8, LZ4F_compressFrameBound(n, NULL), src, n, NULL);
	out[0] = 0;
	out[1] = (uint8_t)c, out[2] = (uint8_t)(c >> 8), out[3] = (uint8_t)(c >> 16);
	out[4] = (uint8_t)type;
	out[5] = (uint8_t)n, out[6] = (uint8_t)(n >> 8), out[7] = (uint8_t)(n >> 16);
	return 8 + c;
}

int main(int argc, char **argv)
{
	size_t mib = argc > 1 ? (size_t)atol(argv[1]) : 256, n = mib << 20, chunks = n / CHUNK;
	int runs = argc > 2 ? atoi(argv[2]) : 5;
	uint8_t *raw = malloc(n), *ser = malloc(n + n / 8 + chunks * 64), *out = malloc(n), tmp[CHUNK];
	struct tfs_xet_node *nodes = malloc(chunks * sizeof *nodes);
	double t[64], mbs = (double)n / 1e6;
	weights(raw, n);
	for (int r = 0; r < runs; r++) {
		double a = now();
		for (size_t i = 0; i < chunks; i++) {
			tfs_xet_chunk_hash(raw + i * CHUNK, CHUNK, nodes[i].hash);
			nodes[i].len = CHUNK;
		}
		t[r] = now() - a;
	}
	printf("BLAKE3 (Xet chunk hash, 64 KiB chunks): %.0f MB/s\n", mbs / median(t, runs));
	for (int r = 0; r < runs; r++) {
		uint8_t root[32];
		for (size_t i = 0; i < chunks; i++)
			nodes[i].len = CHUNK;
		double a = now();
		tfs_xet_file_hash(nodes, chunks, root);
		t[r] = now() - a;
	}
	printf("Merkle file hash over the chunk hashes: %.0f MB/s of data\n", mbs / median(t, runs));
	static const char *names[] = {"stored", "LZ4", "byte planes + LZ4"};
	struct tfs_xet_dec *x = tfs_xet_dec_new();
	for (int type = 0; type < 3; type++) {
		size_t len = 0, got;
		for (size_t i = 0; i < chunks; i++)
			len += serialize(raw + i * CHUNK, CHUNK, type, ser + len, tmp);
		for (int r = 0; r < runs; r++) {
			struct tfs_diag d;
			double a = now();
			if (tfs_xet_decode_run(x, ser, len, (uint32_t)chunks, out, n, NULL, &got, &d) ||
			    got != n) {
				fprintf(stderr, "xetspeed: %s\n", d.msg);
				return 1;
			}
			t[r] = now() - a;
		}
		printf("decode %s: %.0f MB/s out (compressed to %.1f %%)%s\n", names[type],
		       mbs / median(t, runs), 100.0 * (double)len / (double)n,
		       memcmp(out, raw, n) ? " WRONG" : "");
	}
	tfs_xet_dec_free(x);
	free(raw), free(ser), free(out), free(nodes);
	return 0;
}
