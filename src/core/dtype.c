#include "core/dtype.h"

#include <string.h>

#define PLAIN(n, b, np, dec)                                                                                 \
	{                                                                                                    \
		.name = n, .bits = b, .npy = np, .decodes = dec                                              \
	}
/* Block sizes and bytes from ggml (include/ggml.h, src/ggml.c type_traits,
 * the static_asserts of src/ggml-common.h), as gguf-py's GGML_QUANT_SIZES
 * has them too. */
#define BLOCK(n, el, by, dec)                                                                                \
	{                                                                                                    \
		.name = n, .block = el, .block_bytes = by, .decodes = dec                                    \
	}

static const struct tfs_dtype_info table[TFS_DT_COUNT] = {
	[TFS_DT_BOOL] = PLAIN("BOOL", 8, "|b1", 0),
	[TFS_DT_F4] = PLAIN("F4", 4, NULL, 1),
	[TFS_DT_F6_E2M3] = PLAIN("F6_E2M3", 6, NULL, 1),
	[TFS_DT_F6_E3M2] = PLAIN("F6_E3M2", 6, NULL, 1),
	[TFS_DT_U8] = PLAIN("U8", 8, "|u1", 0),
	[TFS_DT_I8] = PLAIN("I8", 8, "|i1", 0),
	/* numpy has no float8: the raw bits, as unsigned integers */
	[TFS_DT_F8_E5M2] = PLAIN("F8_E5M2", 8, "|u1", 1),
	[TFS_DT_F8_E4M3] = PLAIN("F8_E4M3", 8, "|u1", 1),
	[TFS_DT_F8_E8M0] = PLAIN("F8_E8M0", 8, "|u1", 1),
	[TFS_DT_F8_E4M3FNUZ] = PLAIN("F8_E4M3FNUZ", 8, "|u1", 1),
	[TFS_DT_F8_E5M2FNUZ] = PLAIN("F8_E5M2FNUZ", 8, "|u1", 1),
	[TFS_DT_I16] = PLAIN("I16", 16, "<i2", 0),
	[TFS_DT_U16] = PLAIN("U16", 16, "<u2", 0),
	[TFS_DT_F16] = PLAIN("F16", 16, "<f2", 1),
	/* numpy has no bfloat16 either */
	[TFS_DT_BF16] = PLAIN("BF16", 16, "<u2", 1),
	[TFS_DT_I32] = PLAIN("I32", 32, "<i4", 0),
	[TFS_DT_U32] = PLAIN("U32", 32, "<u4", 0),
	[TFS_DT_F32] = PLAIN("F32", 32, "<f4", 0),
	[TFS_DT_C64] = PLAIN("C64", 64, "<c8", 0),
	[TFS_DT_F64] = PLAIN("F64", 64, "<f8", 0),
	[TFS_DT_I64] = PLAIN("I64", 64, "<i8", 0),
	[TFS_DT_U64] = PLAIN("U64", 64, "<u8", 0),
	[TFS_DT_C128] = PLAIN("C128", 128, "<c16", 0),
	[TFS_DT_Q4_0] = BLOCK("Q4_0", 32, 18, 1),
	[TFS_DT_Q4_1] = BLOCK("Q4_1", 32, 20, 1),
	[TFS_DT_Q5_0] = BLOCK("Q5_0", 32, 22, 1),
	[TFS_DT_Q5_1] = BLOCK("Q5_1", 32, 24, 1),
	[TFS_DT_Q8_0] = BLOCK("Q8_0", 32, 34, 1),
	[TFS_DT_Q8_1] = BLOCK("Q8_1", 32, 36, 0),
	[TFS_DT_Q2_K] = BLOCK("Q2_K", 256, 84, 1),
	[TFS_DT_Q3_K] = BLOCK("Q3_K", 256, 110, 1),
	[TFS_DT_Q4_K] = BLOCK("Q4_K", 256, 144, 1),
	[TFS_DT_Q5_K] = BLOCK("Q5_K", 256, 176, 1),
	[TFS_DT_Q6_K] = BLOCK("Q6_K", 256, 210, 1),
	[TFS_DT_Q8_K] = BLOCK("Q8_K", 256, 292, 0),
	[TFS_DT_IQ2_XXS] = BLOCK("IQ2_XXS", 256, 66, 0),
	[TFS_DT_IQ2_XS] = BLOCK("IQ2_XS", 256, 74, 0),
	[TFS_DT_IQ3_XXS] = BLOCK("IQ3_XXS", 256, 98, 0),
	[TFS_DT_IQ1_S] = BLOCK("IQ1_S", 256, 50, 0),
	[TFS_DT_IQ4_NL] = BLOCK("IQ4_NL", 32, 18, 0),
	[TFS_DT_IQ3_S] = BLOCK("IQ3_S", 256, 110, 0),
	[TFS_DT_IQ2_S] = BLOCK("IQ2_S", 256, 82, 0),
	[TFS_DT_IQ4_XS] = BLOCK("IQ4_XS", 256, 136, 0),
	[TFS_DT_IQ1_M] = BLOCK("IQ1_M", 256, 56, 0),
	[TFS_DT_TQ1_0] = BLOCK("TQ1_0", 256, 54, 0),
	[TFS_DT_TQ2_0] = BLOCK("TQ2_0", 256, 66, 0),
	[TFS_DT_MXFP4] = BLOCK("MXFP4", 32, 17, 1),
	[TFS_DT_NVFP4] = BLOCK("NVFP4", 64, 36, 0),
};

/* ggml's type ids (enum ggml_type in ggml-org/ggml include/ggml.h; the
 * removed ones are commented out there and have block size 0 in
 * src/ggml.c's type_traits, so ggml's GGUF reader refuses them).
 * docs/gguf.md lists ids up to 39; 40 (NVFP4) is in upstream ggml since
 * 2026. 41 and 42 are taken upstream too, but forks give those ids other
 * block sizes, so a file using them cannot be read safely: unknown. */
static const struct {
	uint16_t dt;
	const char *removed;
} ggml_ids[] = {
	[0] = {TFS_DT_F32, NULL},
	[1] = {TFS_DT_F16, NULL},
	[2] = {TFS_DT_Q4_0, NULL},
	[3] = {TFS_DT_Q4_1, NULL},
	[4] = {TFS_DT_UNKNOWN, "Q4_2"},
	[5] = {TFS_DT_UNKNOWN, "Q4_3"},
	[6] = {TFS_DT_Q5_0, NULL},
	[7] = {TFS_DT_Q5_1, NULL},
	[8] = {TFS_DT_Q8_0, NULL},
	[9] = {TFS_DT_Q8_1, NULL},
	[10] = {TFS_DT_Q2_K, NULL},
	[11] = {TFS_DT_Q3_K, NULL},
	[12] = {TFS_DT_Q4_K, NULL},
	[13] = {TFS_DT_Q5_K, NULL},
	[14] = {TFS_DT_Q6_K, NULL},
	[15] = {TFS_DT_Q8_K, NULL},
	[16] = {TFS_DT_IQ2_XXS, NULL},
	[17] = {TFS_DT_IQ2_XS, NULL},
	[18] = {TFS_DT_IQ3_XXS, NULL},
	[19] = {TFS_DT_IQ1_S, NULL},
	[20] = {TFS_DT_IQ4_NL, NULL},
	[21] = {TFS_DT_IQ3_S, NULL},
	[22] = {TFS_DT_IQ2_S, NULL},
	[23] = {TFS_DT_IQ4_XS, NULL},
	[24] = {TFS_DT_I8, NULL},
	[25] = {TFS_DT_I16, NULL},
	[26] = {TFS_DT_I32, NULL},
	[27] = {TFS_DT_I64, NULL},
	[28] = {TFS_DT_F64, NULL},
	[29] = {TFS_DT_IQ1_M, NULL},
	[30] = {TFS_DT_BF16, NULL},
	[31] = {TFS_DT_UNKNOWN, "Q4_0_4_4"},
	[32] = {TFS_DT_UNKNOWN, "Q4_0_4_8"},
	[33] = {TFS_DT_UNKNOWN, "Q4_0_8_8"},
	[34] = {TFS_DT_TQ1_0, NULL},
	[35] = {TFS_DT_TQ2_0, NULL},
	[36] = {TFS_DT_UNKNOWN, "IQ4_NL_4_4"},
	[37] = {TFS_DT_UNKNOWN, "IQ4_NL_4_8"},
	[38] = {TFS_DT_UNKNOWN, "IQ4_NL_8_8"},
	[39] = {TFS_DT_MXFP4, NULL},
	[40] = {TFS_DT_NVFP4, NULL},
};

void tfs_dtype_from_ggml(uint32_t id, unsigned *dt, const char **removed)
{
	*dt = TFS_DT_UNKNOWN;
	*removed = NULL;
	if (id < sizeof ggml_ids / sizeof ggml_ids[0]) {
		*dt = ggml_ids[id].dt;
		*removed = ggml_ids[id].removed;
	}
}

int64_t tfs_dtype_to_ggml(unsigned dt)
{
	if (dt == TFS_DT_UNKNOWN)
		return -1;
	for (uint32_t id = 0; id < sizeof ggml_ids / sizeof ggml_ids[0]; id++)
		if (ggml_ids[id].dt == dt && !ggml_ids[id].removed)
			return id;
	return -1;
}

const struct tfs_dtype_info *tfs_dtype_info(unsigned dt)
{
	return dt < TFS_DT_COUNT ? &table[dt] : NULL;
}

const char *tfs_dtype_name(unsigned dt)
{
	return dt < TFS_DT_COUNT ? table[dt].name : NULL;
}

unsigned tfs_dtype_lookup_safetensors(const char *s, size_t len)
{
	for (unsigned i = 0; i < TFS_DT_SAFETENSORS_END; i++)
		if (strlen(table[i].name) == len && memcmp(table[i].name, s, len) == 0)
			return i;
	return TFS_DT_UNKNOWN;
}

uint64_t tfs_dtype_bytes(unsigned dt, uint64_t elems)
{
	const struct tfs_dtype_info *d = tfs_dtype_info(dt);
	if (!d)
		return UINT64_MAX;
	if (d->block) {
		if (elems % d->block)
			return UINT64_MAX;
		uint64_t blocks = elems / d->block;
		return blocks > UINT64_MAX / d->block_bytes ? UINT64_MAX : blocks * d->block_bytes;
	}
	if (elems > UINT64_MAX / d->bits)
		return UINT64_MAX;
	uint64_t bits = elems * d->bits;
	return bits % 8 ? UINT64_MAX : bits / 8;
}

void tfs_dtype_unit(unsigned dt, uint32_t *elems, uint32_t *bytes)
{
	const struct tfs_dtype_info *d = tfs_dtype_info(dt);
	if (!d || (!d->block && d->bits == 0)) {
		*elems = *bytes = 1;
	} else if (d->block) {
		*elems = d->block;
		*bytes = d->block_bytes;
	} else if (d->bits % 8 == 0) {
		*elems = 1;
		*bytes = d->bits / 8;
	} else {
		/* the fewest elements that fill whole bytes: 8 / gcd(bits, 8) */
		uint32_t e = d->bits % 4 == 0 ? 2 : d->bits % 2 == 0 ? 4 : 8;
		*elems = e;
		*bytes = e * d->bits / 8;
	}
}

/* ---- one element as float32 (the f32 view and dequantization share it) ---- */

static inline uint32_t f32_bits(float f)
{
	uint32_t u;
	memcpy(&u, &f, 4);
	return u;
}

/* A float with `mbits` mantissa bits, exponent field `e` of `ebits` bits
 * with `bias`, sign `s`: the finite value as float32 bits. Every such value
 * of 16 bits or fewer is exact in float32. */
static uint32_t finite(unsigned s, unsigned e, unsigned m, unsigned mbits, int bias)
{
	uint32_t sign = (uint32_t)s << 31;
	if (e == 0) {
		if (m == 0)
			return sign;
		/* Subnormal: m * 2^(1 - bias - mbits); normalise it. */
		int exp = 1 - bias;
		while (!(m & (1u << mbits))) {
			m <<= 1;
			exp--;
		}
		m &= (1u << mbits) - 1;
		return sign | (uint32_t)(exp + 127) << 23 | (uint32_t)m << (23 - mbits);
	}
	return sign | (uint32_t)((int)e - bias + 127) << 23 | (uint32_t)m << (23 - mbits);
}

static const uint32_t QNAN = 0x7fc00000u;

uint32_t tfs_decode_one(unsigned dt, unsigned b)
{
	unsigned s, e, m;
	switch (dt) {
	case TFS_DT_BF16:
		return (uint32_t)b << 16;
	case TFS_DT_F16:
		s = b >> 15, e = (b >> 10) & 31, m = b & 1023;
		if (e == 31) /* inf, or NaN with its payload kept */
			return (uint32_t)s << 31 | 0x7f800000u | (uint32_t)m << 13;
		return finite(s, e, m, 10, 15);
	case TFS_DT_F8_E5M2: /* IEEE-like, the top byte of an F16 */
		return tfs_decode_one(TFS_DT_F16, b << 8);
	case TFS_DT_F8_E4M3: /* float8_e4m3fn: no infinities, S.1111.111 is NaN */
		s = b >> 7, e = (b >> 3) & 15, m = b & 7;
		if (e == 15 && m == 7)
			return (uint32_t)s << 31 | QNAN;
		return finite(s, e, m, 3, 7);
	case TFS_DT_F8_E4M3FNUZ: /* bias 8, no -0: 0x80 is the only NaN */
		if (b == 0x80)
			return QNAN;
		return finite(b >> 7, (b >> 3) & 15, b & 7, 3, 8);
	case TFS_DT_F8_E5M2FNUZ: /* bias 16, no infinities, 0x80 is NaN */
		if (b == 0x80)
			return QNAN;
		return finite(b >> 7, (b >> 2) & 31, b & 3, 2, 16);
	case TFS_DT_F8_E8M0: /* OCP MX scale: 2^(e-127), 0xff is NaN */
		if (b == 0xff)
			return QNAN;
		if (b == 0)
			return 0x00400000u; /* 2^-127, a float32 subnormal */
		return (uint32_t)b << 23;
	case TFS_DT_F4: /* OCP MX FP4 E2M1: bias 1, no inf or NaN */
		return finite((b >> 3) & 1, (b >> 1) & 3, b & 1, 1, 1);
	case TFS_DT_F6_E2M3: /* OCP MX FP6 E2M3: bias 1, no inf or NaN */
		return finite((b >> 5) & 1, (b >> 3) & 3, b & 7, 3, 1);
	case TFS_DT_F6_E3M2: /* OCP MX FP6 E3M2: bias 3, no inf or NaN */
		return finite((b >> 5) & 1, (b >> 2) & 7, b & 3, 2, 3);
	default:
		return f32_bits(0.0f);
	}
}
