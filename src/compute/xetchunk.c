#include "compute/xetchunk.h"

#include <lz4frame.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct tfs_xet_dec {
	LZ4F_dctx *lz;
	uint8_t planes[TFS_XET_CHUNK_MAX];
};

struct tfs_xet_dec *tfs_xet_dec_new(void)
{
	struct tfs_xet_dec *x = malloc(sizeof *x);
	if (!x)
		return NULL;
	if (LZ4F_isError(LZ4F_createDecompressionContext(&x->lz, LZ4F_VERSION))) {
		free(x);
		return NULL;
	}
	return x;
}

void tfs_xet_dec_free(struct tfs_xet_dec *x)
{
	if (!x)
		return;
	LZ4F_freeDecompressionContext(x->lz);
	free(x);
}

static uint32_t u24(const uint8_t *p)
{
	return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16;
}

tfs_err tfs_xet_chunk_header(const uint8_t *p, size_t avail, struct tfs_xet_chunk_hdr *h, struct tfs_diag *d)
{
	if (avail < TFS_XET_CHUNK_HEADER)
		return tfs_fail(d, TFS_ERR_FORMAT, "a chunk header is cut short (%zu of 8 bytes)", avail);
	h->comp_len = u24(p + 1);
	h->type = p[4];
	h->raw_len = u24(p + 5);
	if (p[0] != 0)
		return tfs_fail(d, TFS_ERR_FORMAT, "a chunk of version %u (only 0 is known)", p[0]);
	if (h->type > TFS_XET_BG4_LZ4)
		return tfs_fail(d, TFS_ERR_FORMAT, "a chunk of compression type %u (0, 1 and 2 are known)",
				h->type);
	if (h->raw_len == 0 || h->raw_len > TFS_XET_CHUNK_MAX)
		return tfs_fail(d, TFS_ERR_FORMAT, "a chunk says it holds %u bytes (1 to %u)", h->raw_len,
				TFS_XET_CHUNK_MAX);
	if (h->comp_len == 0 || h->comp_len > TFS_XET_CHUNK_COMP_MAX)
		return tfs_fail(d, TFS_ERR_FORMAT, "a chunk says its payload is %u bytes (1 to %u)",
				h->comp_len, TFS_XET_CHUNK_COMP_MAX);
	if (h->type == TFS_XET_STORED && h->comp_len != h->raw_len)
		return tfs_fail(d, TFS_ERR_FORMAT, "a stored chunk says %u bytes stored and %u bytes in it",
				h->comp_len, h->raw_len);
	if (avail - TFS_XET_CHUNK_HEADER < h->comp_len)
		return tfs_fail(d, TFS_ERR_FORMAT, "a chunk's payload is cut short (%zu of %u bytes)",
				avail - TFS_XET_CHUNK_HEADER, h->comp_len);
	return TFS_OK;
}

/* One whole LZ4 frame of exactly n bytes giving exactly want bytes. */
static tfs_err lz4_frame(struct tfs_xet_dec *x, const uint8_t *in, size_t n, uint8_t *out, size_t want,
			 struct tfs_diag *d)
{
	LZ4F_decompressOptions_t opt = {.stableDst = 1};
	size_t in_at = 0, out_at = 0, r = 1;
	LZ4F_resetDecompressionContext(x->lz);
	while (r != 0 && in_at < n) {
		size_t src = n - in_at, dst = want - out_at;
		r = LZ4F_decompress(x->lz, out + out_at, &dst, in + in_at, &src, &opt);
		if (LZ4F_isError(r))
			return tfs_fail(d, TFS_ERR_FORMAT, "a chunk's LZ4 frame is invalid (%s)",
					LZ4F_getErrorName(r));
		in_at += src;
		out_at += dst;
		/* Nothing taken and nothing given: the frame wants room
		 * past the size the header promised. */
		if (src == 0 && dst == 0 && r != 0)
			break;
	}
	if (r != 0 && in_at < n)
		return tfs_fail(d, TFS_ERR_FORMAT,
				"a chunk's LZ4 frame holds more than the %zu bytes its header says", want);
	if (r != 0)
		return tfs_fail(d, TFS_ERR_FORMAT, "a chunk's LZ4 frame is cut short (%zu of %zu bytes out)",
				out_at, want);
	if (in_at != n)
		return tfs_fail(d, TFS_ERR_FORMAT,
				"a chunk's LZ4 frame ends %zu bytes before its payload does", n - in_at);
	if (out_at != want)
		return tfs_fail(d, TFS_ERR_FORMAT, "a chunk's LZ4 frame gives %zu bytes, its header says %zu",
				out_at, want);
	return TFS_OK;
}

tfs_err tfs_xet_chunk_decode(struct tfs_xet_dec *x, const uint8_t *p, size_t avail, uint8_t *out,
			     size_t outcap, size_t *used, size_t *raw, struct tfs_diag *d)
{
	struct tfs_xet_chunk_hdr h;
	tfs_err e = tfs_xet_chunk_header(p, avail, &h, d);
	if (e)
		return e;
	if (outcap < h.raw_len)
		return tfs_fail(d, TFS_ERR_FORMAT, "a chunk of %u bytes where %zu were left for it",
				h.raw_len, outcap);
	const uint8_t *pay = p + TFS_XET_CHUNK_HEADER;
	if (h.type == TFS_XET_STORED)
		memcpy(out, pay, h.raw_len);
	else if (h.type == TFS_XET_LZ4)
		e = lz4_frame(x, pay, h.comp_len, out, h.raw_len, d);
	else if (!(e = lz4_frame(x, pay, h.comp_len, x->planes, h.raw_len, d)))
		tfs_xet_bg4_regroup(x->planes, h.raw_len, out);
	if (e)
		return e;
	*used = TFS_XET_CHUNK_HEADER + (size_t)h.comp_len;
	*raw = h.raw_len;
	return TFS_OK;
}

tfs_err tfs_xet_decode_run(struct tfs_xet_dec *x, const uint8_t *in, size_t n, uint32_t nchunks, uint8_t *out,
			   size_t outcap, uint32_t *lens, size_t *raw, struct tfs_diag *d)
{
	size_t at = 0, got = 0;
	for (uint32_t i = 0; i < nchunks; i++) {
		size_t used, r;
		tfs_err e = tfs_xet_chunk_decode(x, in + at, n - at, out + got, outcap - got, &used, &r, d);
		if (e) {
			char why[TFS_DIAG_MAX];
			memcpy(why, d->msg, sizeof why);
			return tfs_fail(d, e, "chunk %u of %u, at byte %zu: %.600s", i, nchunks, at, why);
		}
		if (lens)
			lens[i] = (uint32_t)r;
		at += used;
		got += r;
	}
	if (at != n)
		return tfs_fail(d, TFS_ERR_FORMAT, "%zu bytes follow the %u chunks of a fetch", n - at,
				nchunks);
	*raw = got;
	return TFS_OK;
}

/* The plane k of n bytes starts here: the planes before it each hold
 * n/4 bytes, and one more while the remainder lasts. */
static size_t plane_start(size_t n, int k)
{
	size_t q = n / 4, r = n % 4, s = 0;
	for (int i = 0; i < k; i++)
		s += q + ((size_t)i < r);
	return s;
}

void tfs_xet_bg4_regroup(const uint8_t *in, size_t n, uint8_t *out)
{
	for (int k = 0; k < 4; k++) {
		const uint8_t *pl = in + plane_start(n, k);
		for (size_t i = (size_t)k, j = 0; i < n; i += 4, j++)
			out[i] = pl[j];
	}
}

void tfs_xet_bg4_split(const uint8_t *in, size_t n, uint8_t *out)
{
	for (int k = 0; k < 4; k++) {
		uint8_t *pl = out + plane_start(n, k);
		for (size_t i = (size_t)k, j = 0; i < n; i += 4, j++)
			pl[j] = in[i];
	}
}
