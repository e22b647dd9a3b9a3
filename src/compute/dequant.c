/* Block layouts and formulas: ggml-org/ggml src/ggml-common.h (the block
 * structs) and src/ggml-quants.c (dequantize_row_*). The products are
 * written in the order ggml writes them: float arithmetic is not
 * associative, and the point is to give the very bits llama.cpp computes. */
#include "compute/dequant.h"

#include <stdint.h>
#include <string.h>

#include "core/dtype.h"

static inline float f16(const unsigned char *p)
{
	uint32_t bits = tfs_decode_one(TFS_DT_F16, (unsigned)(p[0] | p[1] << 8));
	float f;
	memcpy(&f, &bits, 4);
	return f;
}

static void q4_0(const unsigned char *b, float *y)
{
	const float d = f16(b);
	const unsigned char *qs = b + 2;
	for (int j = 0; j < 16; j++) {
		const int x0 = (qs[j] & 0x0f) - 8, x1 = (qs[j] >> 4) - 8;
		y[j] = (float)x0 * d;
		y[j + 16] = (float)x1 * d;
	}
}

static void q4_1(const unsigned char *b, float *y)
{
	const float d = f16(b), m = f16(b + 2);
	const unsigned char *qs = b + 4;
	for (int j = 0; j < 16; j++) {
		const int x0 = qs[j] & 0x0f, x1 = qs[j] >> 4;
		y[j] = (float)x0 * d + m;
		y[j + 16] = (float)x1 * d + m;
	}
}

static uint32_t le32(const unsigned char *p)
{
	return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

static void q5_0(const unsigned char *b, float *y)
{
	const float d = f16(b);
	const uint32_t qh = le32(b + 2);
	const unsigned char *qs = b + 6;
	for (int j = 0; j < 16; j++) {
		const unsigned h0 = ((qh >> j) << 4) & 0x10, h1 = (qh >> (j + 12)) & 0x10;
		const int x0 = (int)((qs[j] & 0x0f) | h0) - 16, x1 = (int)((qs[j] >> 4) | h1) - 16;
		y[j] = (float)x0 * d;
		y[j + 16] = (float)x1 * d;
	}
}

static void q5_1(const unsigned char *b, float *y)
{
	const float d = f16(b), m = f16(b + 2);
	const uint32_t qh = le32(b + 4);
	const unsigned char *qs = b + 8;
	for (int j = 0; j < 16; j++) {
		const unsigned h0 = ((qh >> j) << 4) & 0x10, h1 = (qh >> (j + 12)) & 0x10;
		const int x0 = (int)((qs[j] & 0x0f) | h0), x1 = (int)((qs[j] >> 4) | h1);
		y[j] = (float)x0 * d + m;
		y[j + 16] = (float)x1 * d + m;
	}
}

static void q8_0(const unsigned char *b, float *y)
{
	const float d = f16(b);
	for (int j = 0; j < 32; j++)
		y[j] = (float)(int8_t)b[2 + j] * d;
}

/* {scales[16], qs[64], d, dmin}: 16 groups of 16, a 4-bit scale and a
 * 4-bit min per group, 2-bit values. */
static void q2_k(const unsigned char *b, float *y)
{
	const unsigned char *sc = b, *q = b + 16;
	const float d = f16(b + 80), min = f16(b + 82);
	int is = 0;
	for (int n = 0; n < 256; n += 128, q += 32) {
		for (int shift = 0; shift < 8; shift += 2) {
			for (int half = 0; half < 2; half++) {
				const unsigned s = sc[is++];
				const float dl = d * (float)(s & 0xf), ml = min * (float)(s >> 4);
				for (int l = 0; l < 16; l++)
					*y++ = dl * (float)((q[l + 16 * half] >> shift) & 3) - ml;
			}
		}
	}
}

/* {hmask[32], qs[64], scales[12], d}: 16 signed 6-bit scales packed in 12
 * bytes, 2-bit values with a third bit in hmask (clear: minus 4). */
static void q3_k(const unsigned char *b, float *y)
{
	const unsigned char *hm = b, *q = b + 32;
	const float d_all = f16(b + 108);
	uint32_t aux[4];
	int8_t scales[16];
	const uint32_t kmask1 = 0x03030303u, kmask2 = 0x0f0f0f0fu;
	aux[0] = le32(b + 96);
	aux[1] = le32(b + 100);
	const uint32_t tmp = le32(b + 104);
	aux[2] = ((aux[0] >> 4) & kmask2) | (((tmp >> 4) & kmask1) << 4);
	aux[3] = ((aux[1] >> 4) & kmask2) | (((tmp >> 6) & kmask1) << 4);
	aux[0] = (aux[0] & kmask2) | (((tmp >> 0) & kmask1) << 4);
	aux[1] = (aux[1] & kmask2) | (((tmp >> 2) & kmask1) << 4);
	for (int i = 0; i < 16; i++)
		scales[i] = (int8_t)(aux[i / 4] >> (8 * (i % 4)));
	int is = 0;
	unsigned m = 1;
	for (int n = 0; n < 256; n += 128, q += 32) {
		for (int shift = 0; shift < 8; shift += 2, m <<= 1) {
			for (int half = 0; half < 2; half++) {
				const float dl = d_all * (float)(scales[is++] - 32);
				for (int l = 16 * half; l < 16 * half + 16; l++)
					*y++ = dl *
					       (float)((int)((q[l] >> shift) & 3) - ((hm[l] & m) ? 0 : 4));
			}
		}
	}
}

/* The 6-bit scale and min of sub-block j from the 12 packed bytes (ggml's
 * get_scale_min_k4). */
static void scale_min_k4(int j, const unsigned char *q, unsigned *sc, unsigned *m)
{
	if (j < 4) {
		*sc = q[j] & 63;
		*m = q[j + 4] & 63;
	} else {
		*sc = (q[j + 4] & 0xf) | ((q[j - 4] >> 6) << 4);
		*m = (q[j + 4] >> 4) | ((q[j] >> 6) << 4);
	}
}

/* Sub-block j's scale and min, times the block's d and dmin, as Q4_K and
 * Q5_K multiply them before use. */
static void scales_k4(int j, const unsigned char *s, float d, float min, float *dj, float *mj)
{
	unsigned sc, m;
	scale_min_k4(j, s, &sc, &m);
	*dj = d * (float)sc;
	*mj = min * (float)m;
}

/* {d, dmin, scales[12], qs[128]} */
static void q4_k(const unsigned char *b, float *y)
{
	const float d = f16(b), min = f16(b + 2);
	const unsigned char *s = b + 4, *q = b + 16;
	for (int is = 0; is < 8; is += 2, q += 32) {
		float d1, m1, d2, m2;
		scales_k4(is, s, d, min, &d1, &m1);
		scales_k4(is + 1, s, d, min, &d2, &m2);
		for (int l = 0; l < 32; l++)
			*y++ = d1 * (float)(q[l] & 0xf) - m1;
		for (int l = 0; l < 32; l++)
			*y++ = d2 * (float)(q[l] >> 4) - m2;
	}
}

/* {d, dmin, scales[12], qh[32], qs[128]} */
static void q5_k(const unsigned char *b, float *y)
{
	const float d = f16(b), min = f16(b + 2);
	const unsigned char *s = b + 4, *qh = b + 16, *ql = b + 48;
	unsigned u1 = 1, u2 = 2;
	for (int is = 0; is < 8; is += 2, ql += 32, u1 <<= 2, u2 <<= 2) {
		float d1, m1, d2, m2;
		scales_k4(is, s, d, min, &d1, &m1);
		scales_k4(is + 1, s, d, min, &d2, &m2);
		for (int l = 0; l < 32; l++)
			*y++ = d1 * (float)((ql[l] & 0xf) + ((qh[l] & u1) ? 16 : 0)) - m1;
		for (int l = 0; l < 32; l++)
			*y++ = d2 * (float)((ql[l] >> 4) + ((qh[l] & u2) ? 16 : 0)) - m2;
	}
}

/* {ql[128], qh[64], scales[16] (signed), d}: d comes last. */
static void q6_k(const unsigned char *b, float *y)
{
	const float d = f16(b + 208);
	const unsigned char *ql = b, *qh = b + 128;
	const int8_t *sc = (const int8_t *)(b + 192);
	for (int n = 0; n < 256; n += 128, y += 128, ql += 64, qh += 32, sc += 8) {
		for (int l = 0; l < 32; l++) {
			const int is = l / 16;
			const int q1 = (int)((ql[l] & 0xf) | ((qh[l] >> 0) & 3) << 4) - 32;
			const int q2 = (int)((ql[l + 32] & 0xf) | ((qh[l] >> 2) & 3) << 4) - 32;
			const int q3 = (int)((ql[l] >> 4) | ((qh[l] >> 4) & 3) << 4) - 32;
			const int q4 = (int)((ql[l + 32] >> 4) | ((qh[l] >> 6) & 3) << 4) - 32;
			y[l] = d * (float)sc[is] * (float)q1;
			y[l + 32] = d * (float)sc[is + 2] * (float)q2;
			y[l + 64] = d * (float)sc[is + 4] * (float)q3;
			y[l + 96] = d * (float)sc[is + 6] * (float)q4;
		}
	}
}

/* {e, qs[16]}: OCP MX FP4 (E2M1) with a shared E8M0 scale. ggml keeps the
 * E2M1 values doubled (kvalues_mxfp4) and halves the scale instead
 * (ggml_e8m0_to_fp32_half). */
static void mxfp4(const unsigned char *b, float *y)
{
	static const int8_t kv[16] = {0, 1, 2, 3, 4, 6, 8, 12, 0, -1, -2, -3, -4, -6, -8, -12};
	const unsigned e = b[0];
	const uint32_t bits = e < 2 ? 0x00200000u << e : (uint32_t)(e - 1) << 23;
	float d;
	memcpy(&d, &bits, 4);
	for (int j = 0; j < 16; j++) {
		y[j] = (float)kv[b[1 + j] & 0x0f] * d;
		y[j + 16] = (float)kv[b[1 + j] >> 4] * d;
	}
}

int tfs_dequant_known(unsigned dt)
{
	switch (dt) {
	case TFS_DT_Q4_0:
	case TFS_DT_Q4_1:
	case TFS_DT_Q5_0:
	case TFS_DT_Q5_1:
	case TFS_DT_Q8_0:
	case TFS_DT_Q2_K:
	case TFS_DT_Q3_K:
	case TFS_DT_Q4_K:
	case TFS_DT_Q5_K:
	case TFS_DT_Q6_K:
	case TFS_DT_MXFP4:
		return 1;
	default:
		return 0;
	}
}

void tfs_dequant_block(unsigned dt, const unsigned char *blk, float *y)
{
	switch (dt) {
	case TFS_DT_Q4_0:
		q4_0(blk, y);
		break;
	case TFS_DT_Q4_1:
		q4_1(blk, y);
		break;
	case TFS_DT_Q5_0:
		q5_0(blk, y);
		break;
	case TFS_DT_Q5_1:
		q5_1(blk, y);
		break;
	case TFS_DT_Q8_0:
		q8_0(blk, y);
		break;
	case TFS_DT_Q2_K:
		q2_k(blk, y);
		break;
	case TFS_DT_Q3_K:
		q3_k(blk, y);
		break;
	case TFS_DT_Q4_K:
		q4_k(blk, y);
		break;
	case TFS_DT_Q5_K:
		q5_k(blk, y);
		break;
	case TFS_DT_Q6_K:
		q6_k(blk, y);
		break;
	case TFS_DT_MXFP4:
		mxfp4(blk, y);
		break;
	default:
		break;
	}
}
