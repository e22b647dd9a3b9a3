#include "tfs_convert.h"

#include <stdio.h>
#include <string.h>

#include "tfs_dequant.h"

int tfs_converts(unsigned dt)
{
	const struct tfs_dtype_info *d = tfs_dtype_info(dt);
	return d && d->decodes;
}

uint64_t tfs_view_size(const struct tfs_table *h, const struct tfs_tensor *t, int convert)
{
	if (convert && tfs_converts(t->dtype))
		return tfs_tensor_elements(h, t) * 4; /* validated: the stored bytes are at least 1/8 of this */
	return tfs_tensor_size(t);
}

/* ---- NPY ---- */

static const char *npy_descr(unsigned dt, int convert)
{
	if (convert && tfs_converts(dt))
		return "<f4";
	const struct tfs_dtype_info *d = tfs_dtype_info(dt);
	return d ? d->npy : NULL; /* NULL: raw bytes */
}

size_t tfs_npy_header_max(const struct tfs_tensor *t)
{
	return 128 + (size_t)t->ndim * 22 + 64;
}

size_t tfs_npy_header(const struct tfs_table *h, const struct tfs_tensor *t, int convert,
		      char *out, size_t cap)
{
	const char *descr = npy_descr(t->dtype, convert);
	size_t o = 0;
	/* The dict first, at offset 12 (version 2.0 needs 12 bytes before
	 * it; 1.0 needs 10 and is moved down two bytes below). */
	char *d = out + 12;
	size_t dcap = cap - 12;
	o += (size_t)snprintf(d + o, dcap - o, "{'descr': '%s', 'fortran_order': False, 'shape': (",
			      descr ? descr : "|u1");
	const struct tfs_dtype_info *di = tfs_dtype_info(t->dtype);
	if (!descr && di && di->block) {
		o += (size_t)snprintf(d + o, dcap - o, "%llu, %u",
				      (unsigned long long)(tfs_tensor_size(t) / di->block_bytes),
				      (unsigned)di->block_bytes);
	} else if (!descr) {
		o += (size_t)snprintf(d + o, dcap - o, "%llu,", (unsigned long long)tfs_tensor_size(t));
	} else {
		for (uint32_t i = 0; i < t->ndim; i++)
			o += (size_t)snprintf(d + o, dcap - o, "%s%llu", i ? ", " : "",
					      (unsigned long long)h->dims[t->dims_off + i]);
		if (t->ndim == 1)
			d[o++] = ',';
	}
	o += (size_t)snprintf(d + o, dcap - o, "), }");
	/* Pad with spaces and end with '\n' so that the data starts at a
	 * multiple of 64, as numpy writes it. */
	/* Version 1.0 holds the padded dict's length in 16 bits; past that,
	 * 2.0 (32 bits). The ASCII dict never needs 3.0. */
	int v2 = ((10 + o + 1 + 63) / 64 * 64 - 10) > 65535;
	size_t pre = v2 ? 12 : 10;
	size_t total = pre + o + 1;
	size_t padded = (total + 63) / 64 * 64;
	memset(d + o, ' ', padded - total);
	o += padded - total;
	d[o++] = '\n';
	if (!v2)
		memmove(out + 10, d, o);
	memcpy(out, "\x93NUMPY", 6);
	out[6] = v2 ? 2 : 1;
	out[7] = 0;
	if (v2) {
		uint32_t l = (uint32_t)o;
		for (int i = 0; i < 4; i++)
			out[8 + i] = (char)(l >> (8 * i));
	} else {
		out[8] = (char)(o & 0xff);
		out[9] = (char)(o >> 8);
	}
	return pre + o;
}

/* ---- decoding ---- */

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

void tfs_stored_range(unsigned dt, uint64_t first, uint64_t n, uint64_t *b, uint64_t *e)
{
	uint32_t ue, ub;
	tfs_dtype_unit(dt, &ue, &ub);
	*b = first / ue * ub;
	*e = (first + n + ue - 1) / ue * ub;
}

void tfs_decode_f32(unsigned dt, const unsigned char *src, uint64_t first, size_t n,
		    uint32_t *out)
{
	size_t i;
	switch (dt) {
	case TFS_DT_BF16:
		for (i = 0; i < n; i++)
			out[i] = (uint32_t)(src[2 * i] | src[2 * i + 1] << 8) << 16;
		return;
	case TFS_DT_F16:
		for (i = 0; i < n; i++)
			out[i] = tfs_decode_one(dt, (unsigned)(src[2 * i] | src[2 * i + 1] << 8));
		return;
	case TFS_DT_F4:
		/* Two per byte, the first element in the low nibble. */
		for (i = 0; i < n; i++) {
			uint64_t k = first + i;
			unsigned byte = src[k / 2 - first / 2];
			out[i] = tfs_decode_one(dt, (k & 1) ? byte >> 4 : byte & 15);
		}
		return;
	case TFS_DT_F6_E2M3:
	case TFS_DT_F6_E3M2:
		/* Four per three bytes: element k is bits [6k, 6k + 6) of the
		 * little-endian bit stream, least significant bit first; src
		 * starts at the group of four that holds `first`. */
		for (i = 0; i < n; i++) {
			uint64_t bit = (first + i - first / 4 * 4) * 6;
			unsigned lo = src[bit / 8], hi = (bit % 8 > 2) ? src[bit / 8 + 1] : 0;
			unsigned v = ((lo | hi << 8) >> (bit % 8)) & 63;
			out[i] = tfs_decode_one(dt, v);
		}
		return;
	default:
		break;
	}
	if (tfs_dequant_known(dt)) {
		/* Whole blocks, then the wanted elements of them. */
		const struct tfs_dtype_info *d = tfs_dtype_info(dt);
		float y[256];
		uint64_t k = first, end = first + n;
		const unsigned char *blk = src;
		while (k < end) {
			uint64_t in = k % d->block, take = d->block - in;
			if (take > end - k)
				take = end - k;
			tfs_dequant_block(dt, blk, y);
			memcpy(out + (k - first), y + in, (size_t)take * 4);
			k += take;
			blk += d->block_bytes;
		}
		return;
	}
	for (i = 0; i < n; i++)
		out[i] = tfs_decode_one(dt, src[i]);
}
