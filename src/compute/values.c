/* A tensor's elements as numbers (compute/values.h). */
#include "compute/values.h"

#include <stdlib.h>
#include <string.h>

#include "compute/convert.h"
#include "core/dtype.h"

/* Bytes per element of the dtypes read as they are. */
static unsigned plain_bytes(unsigned dt)
{
	switch (dt) {
	case TFS_DT_BOOL:
	case TFS_DT_U8:
	case TFS_DT_I8:
		return 1;
	case TFS_DT_I16:
	case TFS_DT_U16:
		return 2;
	case TFS_DT_I32:
	case TFS_DT_U32:
	case TFS_DT_F32:
		return 4;
	case TFS_DT_F64:
	case TFS_DT_I64:
	case TFS_DT_U64:
		return 8;
	default:
		return 0;
	}
}

int tfs_values_ok(unsigned dtype)
{
	return plain_bytes(dtype) || tfs_converts(dtype);
}

int tfs_values_is_int(unsigned dtype)
{
	return plain_bytes(dtype) && dtype != TFS_DT_F32 && dtype != TFS_DT_F64;
}

tfs_err tfs_values_open(struct tfs_values *r, const struct tfs_shard *sh, const struct tfs_tensor *t)
{
	memset(r, 0, sizeof *r);
	if (!tfs_values_ok(t->dtype))
		return TFS_ERR_UNHANDLED;
	r->sh = sh;
	r->t = t;
	r->count = tfs_tensor_elements(&sh->h, t);
	uint64_t b, e;
	tfs_stored_range(t->dtype, 0, TFS_VALUES_CHUNK, &b, &e);
	/* (a chunk may start inside a unit: one unit more) */
	size_t raw = plain_bytes(t->dtype) ? (size_t)TFS_VALUES_CHUNK * 8 : (size_t)(e - b) * 2 + 4096;
	r->raw = malloc(raw);
	r->dec = malloc((size_t)TFS_VALUES_CHUNK * sizeof *r->dec);
	r->v = malloc((size_t)TFS_VALUES_CHUNK * sizeof *r->v);
	if (!r->raw || !r->dec || !r->v) {
		tfs_values_close(r);
		return TFS_ERR_NOMEM;
	}
	return TFS_OK;
}

static double plain(unsigned dt, const unsigned char *p)
{
	uint64_t x = 0;
	unsigned n = plain_bytes(dt);
	for (unsigned i = 0; i < n; i++)
		x |= (uint64_t)p[i] << (8 * i);
	switch (dt) {
	case TFS_DT_BOOL:
		return x != 0;
	case TFS_DT_I8:
		return (double)(int8_t)x;
	case TFS_DT_I16:
		return (double)(int16_t)x;
	case TFS_DT_I32:
		return (double)(int32_t)x;
	case TFS_DT_I64:
		return (double)(int64_t)x;
	case TFS_DT_F32: {
		float f;
		uint32_t w = (uint32_t)x;
		memcpy(&f, &w, 4);
		return f;
	}
	case TFS_DT_F64: {
		double d;
		memcpy(&d, &x, 8);
		return d;
	}
	default:
		return (double)x; /* unsigned */
	}
}

/* k elements at p as doubles: the common dtypes in a loop of their own
 * (a switch and a byte loop per element cost more than the rest of a
 * picture or the statistics), the others through plain(). */
static void plain_all(unsigned dt, const unsigned char *p, size_t k, double *v)
{
#if __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
	switch (dt) {
	case TFS_DT_F32:
		for (size_t i = 0; i < k; i++) {
			float f;
			memcpy(&f, p + 4 * i, 4);
			v[i] = f;
		}
		return;
	case TFS_DT_F64:
		memcpy(v, p, k * 8);
		return;
	case TFS_DT_I8:
		for (size_t i = 0; i < k; i++)
			v[i] = (int8_t)p[i];
		return;
	case TFS_DT_U8:
		for (size_t i = 0; i < k; i++)
			v[i] = p[i];
		return;
	case TFS_DT_I32:
		for (size_t i = 0; i < k; i++) {
			int32_t x;
			memcpy(&x, p + 4 * i, 4);
			v[i] = x;
		}
		return;
	default:
		break;
	}
#endif
	unsigned pb = plain_bytes(dt);
	for (size_t i = 0; i < k; i++)
		v[i] = plain(dt, p + i * pb);
}

tfs_err tfs_values_at(struct tfs_values *r, uint64_t first, size_t k, const double **v)
{
	*v = r->v;
	if (first > r->count || k > r->count - first || k > TFS_VALUES_CHUNK)
		return TFS_ERR_INVAL;
	if (!k)
		return TFS_OK;
	const struct tfs_tensor *t = r->t;
	unsigned pb = plain_bytes(t->dtype);
	uint64_t b, e;
	if (pb) {
		b = first * pb;
		e = b + k * pb;
	} else {
		tfs_stored_range(t->dtype, first, k, &b, &e);
	}
	if (tfs_source_stopped(r->sh->src))
		return TFS_ERR_IO; /* the mount is going away */
	tfs_err err = tfs_source_serve(r->sh->src, r->raw, (size_t)(e - b), t->begin + b, t->end);
	if (err)
		return err;
	if (pb) {
		plain_all(t->dtype, r->raw, k, r->v);
	} else {
		tfs_decode_f32(t->dtype, r->raw, first, k, r->dec);
		for (size_t i = 0; i < k; i++) {
			float f;
			memcpy(&f, &r->dec[i], 4);
			r->v[i] = f;
		}
	}
	return TFS_OK;
}

tfs_err tfs_values_next(struct tfs_values *r, const double **v, size_t *n)
{
	*v = r->v;
	*n = 0;
	if (r->next >= r->count)
		return TFS_OK;
	uint64_t k = r->count - r->next < TFS_VALUES_CHUNK ? r->count - r->next : TFS_VALUES_CHUNK;
	tfs_err err = tfs_values_at(r, r->next, (size_t)k, v);
	if (err)
		return err;
	r->next += k;
	*n = (size_t)k;
	return TFS_OK;
}

tfs_err tfs_values_next_int(struct tfs_values *r, const tfs_int128 **v, size_t *n)
{
	*n = 0;
	*v = r->iv;
	const struct tfs_tensor *t = r->t;
	if (!tfs_values_is_int(t->dtype))
		return TFS_ERR_INVAL;
	if (r->next >= r->count)
		return TFS_OK;
	if (!r->iv && !(r->iv = malloc((size_t)TFS_VALUES_CHUNK * sizeof *r->iv)))
		return TFS_ERR_NOMEM;
	*v = r->iv;
	unsigned pb = plain_bytes(t->dtype);
	size_t k = r->count - r->next < TFS_VALUES_CHUNK ? (size_t)(r->count - r->next) : TFS_VALUES_CHUNK;
	if (tfs_source_stopped(r->sh->src))
		return TFS_ERR_IO;
	tfs_err err = tfs_source_serve(r->sh->src, r->raw, k * pb, t->begin + r->next * pb, t->end);
	if (err)
		return err;
	int sign = t->dtype == TFS_DT_I8 || t->dtype == TFS_DT_I16 || t->dtype == TFS_DT_I32 ||
		   t->dtype == TFS_DT_I64;
	for (size_t i = 0; i < k; i++) {
		const unsigned char *p = r->raw + i * pb;
		uint64_t x = 0;
		for (unsigned b = 0; b < pb; b++)
			x |= (uint64_t)p[b] << (8 * b);
		if (t->dtype == TFS_DT_BOOL)
			r->iv[i] = x != 0;
		else if (sign && pb < 8 && (x >> (8 * pb - 1)))
			r->iv[i] = (tfs_int128)x - ((tfs_int128)1 << (8 * pb)); /* negative */
		else if (sign)
			r->iv[i] = (int64_t)x;
		else
			r->iv[i] = x;
	}
	r->next += k;
	*n = k;
	return TFS_OK;
}

void tfs_values_rewind(struct tfs_values *r)
{
	r->next = 0;
}

void tfs_values_close(struct tfs_values *r)
{
	free(r->raw);
	free(r->dec);
	free(r->v);
	free(r->iv);
	memset(r, 0, sizeof *r);
}
