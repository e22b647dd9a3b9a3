#include "core/kv.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/json.h"
#include "core/utf8.h"

static const char *const type_names[TFS_KV_COUNT] = {
	"UINT8", "INT8",   "UINT16", "INT16",  "UINT32", "INT32",   "FLOAT32",
	"BOOL",  "STRING", "ARRAY",  "UINT64", "INT64",  "FLOAT64",
};
static const uint8_t type_size[TFS_KV_COUNT] = {1, 1, 2, 2, 4, 4, 4, 1, 0, 0, 8, 8, 8};

const char *tfs_kv_type_name(uint32_t t)
{
	return t < TFS_KV_COUNT ? type_names[t] : NULL;
}

uint32_t tfs_kv_type_lookup(const char *name)
{
	for (uint32_t t = 0; t < TFS_KV_COUNT; t++)
		if (strcmp(name, type_names[t]) == 0)
			return t;
	return TFS_KV_COUNT;
}

unsigned tfs_kv_type_size(uint32_t t)
{
	return t < TFS_KV_COUNT ? type_size[t] : 0;
}

uint64_t tfs_kv_le(const unsigned char *p, unsigned n)
{
	uint64_t v = 0;
	for (unsigned i = n; i-- > 0;)
		v = v << 8 | p[i];
	return v;
}

int tfs_kvs_next(const struct tfs_kvs *s, size_t *pos, struct tfs_kv *kv)
{
	size_t p = *pos;
	if (p >= s->len)
		return 0;
	const unsigned char *b = s->p;
	kv->pair = b + p;
	kv->klen = (size_t)tfs_kv_le(b + p, 8);
	kv->key = b + p + 8;
	p += 8 + kv->klen;
	kv->type = kv->elem = (uint32_t)tfs_kv_le(b + p, 4);
	kv->count = 1;
	p += 4;
	if (kv->type == TFS_KV_ARR) {
		kv->elem = (uint32_t)tfs_kv_le(b + p, 4);
		kv->count = tfs_kv_le(b + p + 4, 8);
		p += 12;
	}
	kv->val = b + p;
	if (kv->elem == TFS_KV_STR)
		for (uint64_t k = 0; k < kv->count; k++)
			p += 8 + (size_t)tfs_kv_le(b + p, 8);
	else
		p += (size_t)(type_size[kv->elem] * kv->count);
	kv->plen = p - *pos;
	*pos = p;
	return 1;
}

int tfs_kv_uint(const struct tfs_kv *kv, uint64_t *v)
{
	if (kv->type == TFS_KV_ARR)
		return 0;
	switch (kv->type) {
	case TFS_KV_U8:
	case TFS_KV_U16:
	case TFS_KV_U32:
	case TFS_KV_U64:
		*v = tfs_kv_le(kv->val, type_size[kv->type]);
		return 1;
	case TFS_KV_I8:
	case TFS_KV_I16:
	case TFS_KV_I32:
	case TFS_KV_I64: {
		unsigned n = type_size[kv->type];
		uint64_t u = tfs_kv_le(kv->val, n);
		if (u >> (8 * n - 1) & 1)
			return 0; /* negative */
		*v = u;
		return 1;
	}
	default:
		return 0;
	}
}

static tfs_err put_num(char **b, size_t *n, size_t *cap, uint32_t t, const unsigned char *p)
{
	char tmp[48];
	double f;
	switch (t) {
	case TFS_KV_U8:
	case TFS_KV_U16:
	case TFS_KV_U32:
	case TFS_KV_U64:
		snprintf(tmp, sizeof tmp, "%llu", (unsigned long long)tfs_kv_le(p, type_size[t]));
		break;
	case TFS_KV_I8:
	case TFS_KV_I16:
	case TFS_KV_I32:
	case TFS_KV_I64: {
		uint64_t u = tfs_kv_le(p, type_size[t]);
		int bits = type_size[t] * 8;
		int64_t v = bits == 64 ? (int64_t)u
				       : (int64_t)(u ^ (1ull << (bits - 1))) - (int64_t)(1ull << (bits - 1));
		snprintf(tmp, sizeof tmp, "%lld", (long long)v);
		break;
	}
	case TFS_KV_BOOL:
		snprintf(tmp, sizeof tmp, "%s", p[0] ? "true" : "false");
		break;
	case TFS_KV_F32: {
		uint32_t u = (uint32_t)tfs_kv_le(p, 4);
		float x;
		memcpy(&x, &u, 4);
		f = x;
		goto real;
	}
	default: {
		uint64_t u = tfs_kv_le(p, 8);
		memcpy(&f, &u, 8);
real:
		/* JSON has no NaN or infinity: those are strings. */
		if (isnan(f))
			snprintf(tmp, sizeof tmp, "\"nan\"");
		else if (isinf(f))
			snprintf(tmp, sizeof tmp, "\"%sinf\"", f < 0 ? "-" : "");
		else
			snprintf(tmp, sizeof tmp, t == TFS_KV_F32 ? "%.9g" : "%.17g", f);
	}
	}
	return tfs_json_puts(b, n, cap, tmp);
}

/* Whether the pair's key and every string of its value are UTF-8. */
static int pair_is_text(const struct tfs_kv *kv)
{
	int ok = tfs_utf8_check(kv->key, kv->klen) == kv->klen;
	const unsigned char *p = kv->val;
	for (uint64_t k = 0; ok && kv->elem == TFS_KV_STR && k < kv->count; k++) {
		size_t sl = (size_t)tfs_kv_le(p, 8);
		ok = tfs_utf8_check(p + 8, sl) == sl;
		p += 8 + sl;
	}
	return ok;
}

static tfs_err put_pair(char **b, size_t *n, size_t *cap, const struct tfs_kv *kv)
{
	tfs_err e = tfs_json_str(b, n, cap, (const char *)kv->key, kv->klen);
	if (!e)
		e = tfs_json_puts(b, n, cap, ": {\"type\": \"");
	if (!e)
		e = tfs_json_puts(b, n, cap, type_names[kv->type]);
	if (!e && kv->type == TFS_KV_ARR) {
		e = tfs_json_puts(b, n, cap, "\", \"element_type\": \"");
		if (!e)
			e = tfs_json_puts(b, n, cap, type_names[kv->elem]);
	}
	if (!e)
		e = tfs_json_puts(b, n, cap, kv->type == TFS_KV_ARR ? "\", \"value\": [" : "\", \"value\": ");
	const unsigned char *p = kv->val;
	for (uint64_t k = 0; !e && k < kv->count; k++) {
		if (k && (e = tfs_json_put(b, n, cap, ", ", 2)))
			break;
		if (kv->elem == TFS_KV_STR) {
			size_t sl = (size_t)tfs_kv_le(p, 8);
			e = tfs_json_str(b, n, cap, (const char *)p + 8, sl);
			p += 8 + sl;
		} else {
			e = put_num(b, n, cap, kv->elem, p);
			p += type_size[kv->elem];
		}
	}
	if (!e)
		e = tfs_json_puts(b, n, cap, kv->type == TFS_KV_ARR ? "]}" : "}");
	return e;
}

tfs_err tfs_kvs_json(const struct tfs_kvs *s, char **out, size_t *outlen,
		     void (*skip)(void *ctx, const char *key, size_t kl), void *ctx)
{
	char *b = NULL;
	size_t n = 0, cap = 0, pos = 0;
	uint64_t put = 0;
	struct tfs_kv kv;
	tfs_err e = tfs_json_put(&b, &n, &cap, "{", 1);
	while (!e && tfs_kvs_next(s, &pos, &kv)) {
		if (skip && !pair_is_text(&kv)) {
			skip(ctx, (const char *)kv.key, kv.klen);
			continue;
		}
		e = tfs_json_puts(&b, &n, &cap, put++ ? ",\n  " : "\n  ");
		if (!e)
			e = put_pair(&b, &n, &cap, &kv);
	}
	if (!e)
		e = tfs_json_puts(&b, &n, &cap, put ? "\n}\n" : "}\n");
	if (e) {
		free(b);
		return e;
	}
	*out = b;
	*outlen = n;
	return TFS_OK;
}
