#include "compute/convert.h"

#include <stdio.h>
#include <string.h>

#include "compute/dequant.h"

int tfs_converts(unsigned dt)
{
	const struct tfs_dtype_info *d = tfs_dtype_info(dt);
	return d && d->decodes;
}

uint64_t tfs_view_size(const struct tfs_table *h, const struct tfs_tensor *t, int convert)
{
	if (convert && tfs_converts(t->dtype))
		return tfs_tensor_elements(h, t) *
		       4; /* validated: the stored bytes are at least 1/8 of this */
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

size_t tfs_npy_header(const struct tfs_table *h, const struct tfs_tensor *t, int convert, char *out,
		      size_t cap)
{
	const char *descr = npy_descr(t->dtype, convert);
	size_t o = 0;
	/* The dict first, at offset 12 (version 2.0 needs 12 bytes before
	 * it; 1.0 needs 10 and is moved down two bytes below). */
	char *d = out + 12;
	size_t dcap = cap - 12;
	/* A transposed table entry (an array stored in Fortran order) is the
	 * stored array again for np.load: its shape as stored, in Fortran
	 * order, the same bytes. Raw bytes (no descr) stay as they are. */
	int fortran = descr && (t->flags & TFS_TENSOR_TRANSPOSED);
	o += (size_t)snprintf(d + o, dcap - o, "{'descr': '%s', 'fortran_order': %s, 'shape': (",
			      descr ? descr : "|u1", fortran ? "True" : "False");
	const struct tfs_dtype_info *di = tfs_dtype_info(t->dtype);
	if (!descr && di && di->block) {
		o += (size_t)snprintf(d + o, dcap - o, "%llu, %u",
				      (unsigned long long)(tfs_tensor_size(t) / di->block_bytes),
				      (unsigned)di->block_bytes);
	} else if (!descr) {
		o += (size_t)snprintf(d + o, dcap - o, "%llu,", (unsigned long long)tfs_tensor_size(t));
	} else {
		for (uint32_t i = 0; i < t->ndim; i++)
			o += (size_t)snprintf(
				d + o, dcap - o, "%s%llu", i ? ", " : "",
				(unsigned long long)h->dims[t->dims_off + (fortran ? t->ndim - 1 - i : i)]);
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

void tfs_stored_range(unsigned dt, uint64_t first, uint64_t n, uint64_t *b, uint64_t *e)
{
	uint32_t ue, ub;
	tfs_dtype_unit(dt, &ue, &ub);
	*b = first / ue * ub;
	*e = (first + n + ue - 1) / ue * ub;
}

void tfs_decode_f32(unsigned dt, const unsigned char *src, uint64_t first, size_t n, uint32_t *out)
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
