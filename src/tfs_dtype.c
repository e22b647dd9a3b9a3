#include "tfs_dtype.h"

#include <string.h>

#define PLAIN(n, b, np, dec) {.name = n, .bits = b, .npy = np, .decodes = dec}
/* Block sizes and bytes from ggml (include/ggml.h, src/ggml.c type_traits,
 * the static_asserts of src/ggml-common.h), as gguf-py's GGML_QUANT_SIZES
 * has them too. */
#define BLOCK(n, el, by, dec) {.name = n, .block = el, .block_bytes = by, .decodes = dec}

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
	[0] = {TFS_DT_F32, NULL}, [1] = {TFS_DT_F16, NULL},
	[2] = {TFS_DT_Q4_0, NULL}, [3] = {TFS_DT_Q4_1, NULL},
	[4] = {TFS_DT_UNKNOWN, "Q4_2"}, [5] = {TFS_DT_UNKNOWN, "Q4_3"},
	[6] = {TFS_DT_Q5_0, NULL}, [7] = {TFS_DT_Q5_1, NULL},
	[8] = {TFS_DT_Q8_0, NULL}, [9] = {TFS_DT_Q8_1, NULL},
	[10] = {TFS_DT_Q2_K, NULL}, [11] = {TFS_DT_Q3_K, NULL},
	[12] = {TFS_DT_Q4_K, NULL}, [13] = {TFS_DT_Q5_K, NULL},
	[14] = {TFS_DT_Q6_K, NULL}, [15] = {TFS_DT_Q8_K, NULL},
	[16] = {TFS_DT_IQ2_XXS, NULL}, [17] = {TFS_DT_IQ2_XS, NULL},
	[18] = {TFS_DT_IQ3_XXS, NULL}, [19] = {TFS_DT_IQ1_S, NULL},
	[20] = {TFS_DT_IQ4_NL, NULL}, [21] = {TFS_DT_IQ3_S, NULL},
	[22] = {TFS_DT_IQ2_S, NULL}, [23] = {TFS_DT_IQ4_XS, NULL},
	[24] = {TFS_DT_I8, NULL}, [25] = {TFS_DT_I16, NULL},
	[26] = {TFS_DT_I32, NULL}, [27] = {TFS_DT_I64, NULL},
	[28] = {TFS_DT_F64, NULL}, [29] = {TFS_DT_IQ1_M, NULL},
	[30] = {TFS_DT_BF16, NULL}, [31] = {TFS_DT_UNKNOWN, "Q4_0_4_4"},
	[32] = {TFS_DT_UNKNOWN, "Q4_0_4_8"}, [33] = {TFS_DT_UNKNOWN, "Q4_0_8_8"},
	[34] = {TFS_DT_TQ1_0, NULL}, [35] = {TFS_DT_TQ2_0, NULL},
	[36] = {TFS_DT_UNKNOWN, "IQ4_NL_4_4"}, [37] = {TFS_DT_UNKNOWN, "IQ4_NL_4_8"},
	[38] = {TFS_DT_UNKNOWN, "IQ4_NL_8_8"}, [39] = {TFS_DT_MXFP4, NULL},
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
