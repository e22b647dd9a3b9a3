/* PyTorch checkpoints as torch.save writes them since 1.6: an uncompressed
 * zip whose entries sit under one directory, holding data.pkl (the object
 * pickled with protocol 2, tensors as persistent references to storages),
 * data/<key> (one record per storage), version and, since 2.1, byteorder.
 * The pickle runs on tfs_pickle's machine with the allow-list below, so
 * nothing is imported or executed; a tensor becomes the byte range
 * data/<key> + storage_offset x element size when it is C-contiguous.
 * See shared/docs/tensor-formats.md section 4. */
#include "formats/torch.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/jscan.h"
#include "core/json.h"
#include "formats/pickle.h"
#include "formats/torch_i.h"
#include "formats/zip.h"

#define PKL_MAX (1ull << 30)

enum gid {
	G_ORDEREDDICT,
	G_REBUILD_V2,
	G_REBUILD_V3,
	G_PARAMETER,
	G_PARAMETER_STATE,
	G_FROM_TYPE,
	G_TENSOR_TYPE,
	G_SIZE,
	G_ENCODE,
	G_STORAGE,
	G_DTYPE,
	G_QUANT,
};

/* What each allowed global is. Storages and dtypes map to a dtype; the
 * quantized ones are known only to be refused by name. */
static const struct allowed {
	const char *mod, *name;
	uint8_t gid;
	uint16_t dt;
} allowed[] = {
	{"collections", "OrderedDict", G_ORDEREDDICT, 0},
	{"torch._utils", "_rebuild_tensor_v2", G_REBUILD_V2, 0},
	{"torch._utils", "_rebuild_tensor_v3", G_REBUILD_V3, 0},
	{"torch._utils", "_rebuild_parameter", G_PARAMETER, 0},
	{"torch._utils", "_rebuild_parameter_with_state", G_PARAMETER_STATE, 0},
	{"torch._tensor", "_rebuild_from_type_v2", G_FROM_TYPE, 0},
	{"torch", "Tensor", G_TENSOR_TYPE, 0},
	{"torch.nn.parameter", "Parameter", G_TENSOR_TYPE, 0},
	{"torch", "Size", G_SIZE, 0},
	{"_codecs", "encode", G_ENCODE, 0},
	{"torch", "DoubleStorage", G_STORAGE, TFS_DT_F64},
	{"torch", "FloatStorage", G_STORAGE, TFS_DT_F32},
	{"torch", "HalfStorage", G_STORAGE, TFS_DT_F16},
	{"torch", "BFloat16Storage", G_STORAGE, TFS_DT_BF16},
	{"torch", "LongStorage", G_STORAGE, TFS_DT_I64},
	{"torch", "IntStorage", G_STORAGE, TFS_DT_I32},
	{"torch", "ShortStorage", G_STORAGE, TFS_DT_I16},
	{"torch", "CharStorage", G_STORAGE, TFS_DT_I8},
	{"torch", "ByteStorage", G_STORAGE, TFS_DT_U8},
	{"torch", "BoolStorage", G_STORAGE, TFS_DT_BOOL},
	{"torch", "ComplexFloatStorage", G_STORAGE, TFS_DT_C64},
	{"torch", "ComplexDoubleStorage", G_STORAGE, TFS_DT_C128},
	/* numel counts bytes; _rebuild_tensor_v3 gives the dtype */
	{"torch", "UntypedStorage", G_STORAGE, TFS_DT_U8},
	{"torch", "float64", G_DTYPE, TFS_DT_F64},
	{"torch", "double", G_DTYPE, TFS_DT_F64},
	{"torch", "float32", G_DTYPE, TFS_DT_F32},
	{"torch", "float", G_DTYPE, TFS_DT_F32},
	{"torch", "float16", G_DTYPE, TFS_DT_F16},
	{"torch", "half", G_DTYPE, TFS_DT_F16},
	{"torch", "bfloat16", G_DTYPE, TFS_DT_BF16},
	{"torch", "int64", G_DTYPE, TFS_DT_I64},
	{"torch", "long", G_DTYPE, TFS_DT_I64},
	{"torch", "int32", G_DTYPE, TFS_DT_I32},
	{"torch", "int", G_DTYPE, TFS_DT_I32},
	{"torch", "int16", G_DTYPE, TFS_DT_I16},
	{"torch", "short", G_DTYPE, TFS_DT_I16},
	{"torch", "int8", G_DTYPE, TFS_DT_I8},
	{"torch", "uint8", G_DTYPE, TFS_DT_U8},
	{"torch", "uint16", G_DTYPE, TFS_DT_U16},
	{"torch", "uint32", G_DTYPE, TFS_DT_U32},
	{"torch", "uint64", G_DTYPE, TFS_DT_U64},
	{"torch", "bool", G_DTYPE, TFS_DT_BOOL},
	{"torch", "complex64", G_DTYPE, TFS_DT_C64},
	{"torch", "cfloat", G_DTYPE, TFS_DT_C64},
	{"torch", "complex128", G_DTYPE, TFS_DT_C128},
	{"torch", "cdouble", G_DTYPE, TFS_DT_C128},
	{"torch", "float8_e4m3fn", G_DTYPE, TFS_DT_F8_E4M3},
	{"torch", "float8_e5m2", G_DTYPE, TFS_DT_F8_E5M2},
	{"torch", "float8_e4m3fnuz", G_DTYPE, TFS_DT_F8_E4M3FNUZ},
	{"torch", "float8_e5m2fnuz", G_DTYPE, TFS_DT_F8_E5M2FNUZ},
	{"torch", "float8_e8m0fnu", G_DTYPE, TFS_DT_F8_E8M0},
	{"torch", "QInt8Storage", G_QUANT, 0},
	{"torch", "QUInt8Storage", G_QUANT, 0},
	{"torch", "QInt32Storage", G_QUANT, 0},
	{"torch", "QUInt4x2Storage", G_QUANT, 0},
	{"torch", "QUInt2x4Storage", G_QUANT, 0},
	{"torch", "qint8", G_QUANT, 0},
	{"torch", "quint8", G_QUANT, 0},
	{"torch", "qint32", G_QUANT, 0},
	{"torch", "quint4x2", G_QUANT, 0},
	{"torch", "quint2x4", G_QUANT, 0},
	{"torch._utils", "_rebuild_qtensor", G_QUANT, 0},
};

#define N_ALLOWED (sizeof allowed / sizeof allowed[0])

struct ctx {
	struct tfs_zip *z;
	const char *top;
	size_t toplen;
	uint32_t storages;      /* distinct records referred to */
	uint32_t tensors, dims; /* made, for reserving the table */
	unsigned char *seen;    /* per zip entry */
};

static int global(void *c, const char *mod, size_t ml, const char *name, size_t nl)
{
	(void)c;
	for (size_t i = 0; i < N_ALLOWED; i++)
		if (strlen(allowed[i].mod) == ml && memcmp(allowed[i].mod, mod, ml) == 0 &&
		    strlen(allowed[i].name) == nl && memcmp(allowed[i].name, name, nl) == 0)
			return (int)i;
	return -1;
}

static tfs_err quantized(struct tfs_diag *d, int gid)
{
	return tfs_fail(
		d, TFS_ERR_FORMAT,
		"quantized tensor (%s.%s): PyTorch's quantized storages have no safetensors dtype; not supported",
		allowed[gid].mod, allowed[gid].name);
}

static int as_uint(const struct tfs_pk_obj *o, uint64_t *v)
{
	if (o->kind != TFS_PK_INT || o->u.i < 0)
		return -1;
	*v = (uint64_t)o->u.i;
	return 0;
}

static struct tfs_pk_obj *user(struct tfs_pk *vm, int kind, void *p)
{
	struct tfs_pk_obj *o = tfs_pk_new(vm, TFS_PK_USER);
	if (o) {
		o->ukind = (uint8_t)kind;
		o->u.user = p;
	}
	return o;
}

static tfs_err nomem(struct tfs_diag *d)
{
	return tfs_fail(d, TFS_ERR_FORMAT,
			"pickle: over tensorfs's memory bound (a hostile or damaged file)");
}

/* ('storage', <storage type>, key, location, numel) */
static tfs_err persid(void *cv, struct tfs_pk *vm, const struct tfs_pk_obj *pid, struct tfs_pk_obj **out,
		      struct tfs_diag *d)
{
	struct ctx *c = cv;
	uint64_t numel;
	if (pid->kind != TFS_PK_TUPLE || pid->n != 5 || pid->u.v[0]->kind != TFS_PK_STR ||
	    pid->u.v[0]->u.str.len != 7 || memcmp(pid->u.v[0]->u.str.s, "storage", 7) != 0)
		return tfs_fail(
			d, TFS_ERR_FORMAT,
			"pickle: a persistent id that is not a storage reference ('storage', type, key, location, numel)");
	const struct tfs_pk_obj *ty = pid->u.v[1], *key = pid->u.v[2];
	if (ty->kind != TFS_PK_GLOBAL ||
	    (allowed[ty->u.gid].gid != G_STORAGE && allowed[ty->u.gid].gid != G_QUANT))
		return tfs_fail(d, TFS_ERR_FORMAT,
				"pickle: a storage reference whose type is not a storage class");
	if (allowed[ty->u.gid].gid == G_QUANT)
		return quantized(d, ty->u.gid);
	if (key->kind != TFS_PK_STR || as_uint(pid->u.v[4], &numel))
		return tfs_fail(d, TFS_ERR_FORMAT,
				"pickle: a storage reference with a bad key or element count");
	struct storage *s = tfs_pk_alloc(vm, sizeof *s);
	char name[4096], q[160];
	if (!s)
		return nomem(d);
	s->dt = allowed[ty->u.gid].dt;
	s->key = key->u.str.s;
	s->klen = key->u.str.len;
#define Q (tfs_quote(q, sizeof q, s->key, s->klen), q)
	uint64_t esz = tfs_dtype_bytes(s->dt, 1);
	if (numel > UINT64_MAX / esz)
		return tfs_fail(d, TFS_ERR_FORMAT, "storage %s: %llu elements overflow", Q,
				(unsigned long long)numel);
	s->numel = numel;
	s->nbytes = numel * esz;
	const struct tfs_zip_entry *e = NULL;
	if (c->toplen + 6 + s->klen <= sizeof name) {
		memcpy(name, c->top, c->toplen);
		memcpy(name + c->toplen, "/data/", 6);
		memcpy(name + c->toplen + 6, s->key, s->klen);
		e = tfs_zip_find(c->z, name, c->toplen + 6 + s->klen);
	}
	if (!e)
		return tfs_fail(d, TFS_ERR_FORMAT, "storage %s: the archive has no record data/%s", q, Q);
	if (e->method != 0)
		return tfs_fail(
			d, TFS_ERR_FORMAT,
			"storage %s: record data/%s is compressed (zip method %u); only stored records can be mapped (the archive was re-zipped?)",
			Q, q, e->method);
	if (e->csize != s->nbytes)
		return tfs_fail(
			d, TFS_ERR_FORMAT,
			"storage %s: record data/%s holds %llu bytes, but the storage is %llu elements of %s (%llu bytes)",
			Q, q, (unsigned long long)e->csize, (unsigned long long)numel, tfs_dtype_name(s->dt),
			(unsigned long long)s->nbytes);
#undef Q
	s->data = e->data;
	if (!c->seen[e - c->z->e]) {
		c->seen[e - c->z->e] = 1;
		c->storages++;
	}
	*out = user(vm, U_STORAGE, s);
	return *out ? TFS_OK : nomem(d);
}

/* A size is never negative; a stride may be (torch writes none, but a
 * view that walks backwards lies inside its storage as well as any). */
static tfs_err dims_of(const struct tfs_pk_obj *t, uint32_t want, struct tfs_diag *d, const char *what)
{
	int neg_ok = strcmp(what, "stride") == 0;
	if (t->kind != TFS_PK_TUPLE || t->n > DIMS_MAX || (want != UINT32_MAX && t->n != want))
		return tfs_fail(d, TFS_ERR_FORMAT,
				"pickle: a tensor whose %s is not a tuple of up to %d integers", what,
				DIMS_MAX);
	for (uint32_t i = 0; i < t->n; i++)
		if (t->u.v[i]->kind != TFS_PK_INT || (t->u.v[i]->u.i < 0 && !neg_ok))
			return tfs_fail(d, TFS_ERR_FORMAT,
					"pickle: a tensor with a negative or non-integer %s", what);
	return TFS_OK;
}

static tfs_err rebuild(struct ctx *c, struct tfs_pk *vm, int v3, const struct tfs_pk_obj *a,
		       struct tfs_pk_obj **out, struct tfs_diag *d)
{
	if (a->n < (v3 ? 7u : 4u) || a->u.v[0]->kind != TFS_PK_USER || a->u.v[0]->ukind != U_STORAGE)
		return tfs_fail(d, TFS_ERR_FORMAT, "pickle: _rebuild_tensor with unexpected arguments");
	struct tensor *t = tfs_pk_alloc(vm, sizeof *t);
	if (!t)
		return nomem(d);
	t->st = a->u.v[0]->u.user;
	t->dt = t->st->dt;
	if (as_uint(a->u.v[1], &t->offset))
		return tfs_fail(d, TFS_ERR_FORMAT, "pickle: a tensor with a bad storage offset");
	tfs_err e = dims_of(a->u.v[2], UINT32_MAX, d, "size");
	if (e)
		return e;
	t->size = a->u.v[2];
	t->ndim = a->u.v[2]->n;
	if ((e = dims_of(a->u.v[3], t->ndim, d, "stride")))
		return e;
	t->stride = a->u.v[3];
	if (v3) {
		const struct tfs_pk_obj *dt = a->u.v[6];
		if (dt->kind == TFS_PK_GLOBAL && allowed[dt->u.gid].gid == G_QUANT)
			return quantized(d, dt->u.gid);
		if (dt->kind != TFS_PK_GLOBAL || allowed[dt->u.gid].gid != G_DTYPE)
			return tfs_fail(d, TFS_ERR_FORMAT, "pickle: _rebuild_tensor_v3 without a dtype");
		t->dt = allowed[dt->u.gid].dt;
	}
	c->tensors++;
	c->dims += t->ndim;
	*out = user(vm, U_TENSOR, t);
	return *out ? TFS_OK : nomem(d);
}

static tfs_err call(void *cv, struct tfs_pk *vm, int gid, const struct tfs_pk_obj *a, struct tfs_pk_obj **out,
		    struct tfs_diag *d)
{
	struct ctx *c = cv;
	switch (allowed[gid].gid) {
	case G_ORDEREDDICT:
		if (a->n != 0)
			return tfs_fail(d, TFS_ERR_FORMAT, "pickle: OrderedDict called with arguments");
		*out = tfs_pk_new(vm, TFS_PK_DICT);
		return *out ? TFS_OK : nomem(d);
	case G_REBUILD_V2:
	case G_REBUILD_V3:
		return rebuild(c, vm, allowed[gid].gid == G_REBUILD_V3, a, out, d);
	case G_PARAMETER:
	case G_PARAMETER_STATE:
		if (a->n < 1 || a->u.v[0]->kind != TFS_PK_USER || a->u.v[0]->ukind != U_TENSOR)
			return tfs_fail(d, TFS_ERR_FORMAT,
					"pickle: _rebuild_parameter of something that is not a tensor");
		*out = a->u.v[0];
		return TFS_OK;
	case G_FROM_TYPE: {
		/* (func, type, args, state): func(*args) for a plain tensor type */
		if (a->n != 4 || a->u.v[0]->kind != TFS_PK_GLOBAL || a->u.v[1]->kind != TFS_PK_GLOBAL ||
		    allowed[a->u.v[1]->u.gid].gid != G_TENSOR_TYPE || a->u.v[2]->kind != TFS_PK_TUPLE)
			return tfs_fail(d, TFS_ERR_FORMAT,
					"pickle: _rebuild_from_type_v2 with unexpected arguments");
		int f = allowed[a->u.v[0]->u.gid].gid;
		if (f != G_REBUILD_V2 && f != G_REBUILD_V3)
			return tfs_fail(d, TFS_ERR_FORMAT, "pickle: _rebuild_from_type_v2 of %s.%s",
					allowed[a->u.v[0]->u.gid].mod, allowed[a->u.v[0]->u.gid].name);
		return rebuild(c, vm, f == G_REBUILD_V3, a->u.v[2], out, d);
	}
	case G_SIZE: {
		if (a->n != 1 || a->u.v[0]->kind != TFS_PK_TUPLE)
			return tfs_fail(d, TFS_ERR_FORMAT,
					"pickle: torch.Size of something that is not a tuple");
		*out = a->u.v[0];
		return TFS_OK;
	}
	case G_ENCODE: /* _codecs.encode(text, 'latin1'): how protocol 2 writes bytes */
		if (a->n < 1 || a->u.v[0]->kind != TFS_PK_STR)
			return tfs_fail(d, TFS_ERR_FORMAT,
					"pickle: _codecs.encode of something that is not a string");
		*out = tfs_pk_new(vm, TFS_PK_BYTES);
		if (!*out)
			return nomem(d);
		(*out)->u.str = a->u.v[0]->u.str;
		return TFS_OK;
	case G_QUANT:
		return quantized(d, gid);
	default:
		return tfs_fail(d, TFS_ERR_FORMAT, "pickle: a call of %s.%s, which is not callable here",
				allowed[gid].mod, allowed[gid].name);
	}
}

/* ---- the driver ---- */

static const unsigned char legacy_magic[] = {0x6c, 0xfc, 0x9c, 0x46, 0xf9, 0x20, 0x6a, 0xa8, 0x50, 0x19};

static int is_legacy(const unsigned char *h, size_t n)
{
	return n >= 14 && h[0] == 0x80 && h[1] == 0x02 && h[2] == 0x8a && h[3] == 0x0a &&
	       memcmp(h + 4, legacy_magic, sizeof legacy_magic) == 0;
}

static tfs_err record(struct tfs_source *src, const struct tfs_zip *z, const char *top, size_t tl,
		      const char *name, size_t max, unsigned char **out, size_t *len, struct tfs_diag *d)
{
	char full[4096];
	int n = snprintf(full, sizeof full, "%.*s/%s", (int)tl, top, name);
	const struct tfs_zip_entry *e = tfs_zip_find(z, full, (size_t)n);
	*out = NULL;
	*len = 0;
	if (!e)
		return TFS_OK;
	if (e->method != 0)
		return tfs_fail(d, TFS_ERR_FORMAT,
				"record %s is compressed (zip method %u); torch.save stores every record",
				name, e->method);
	if (e->csize > max)
		return tfs_fail(d, TFS_ERR_FORMAT, "record %s is %llu bytes, over the %zu-byte limit", name,
				(unsigned long long)e->csize, max);
	*out = malloc(e->csize ? (size_t)e->csize : 1);
	if (!*out)
		return tfs_fail(d, TFS_ERR_NOMEM, "out of memory for the %llu-byte %s",
				(unsigned long long)e->csize, name);
	tfs_err r = tfs_source_read(src, *out, (size_t)e->csize, e->data, d);
	if (r) {
		free(*out);
		*out = NULL;
		return r;
	}
	*len = (size_t)e->csize;
	return TFS_OK;
}

static size_t trim(const unsigned char *s, size_t n)
{
	while (n && (s[n - 1] == '\n' || s[n - 1] == '\r' || s[n - 1] == ' '))
		n--;
	return n;
}

/* The two older layouts torch.save wrote, told apart from the zip one. */
static tfs_err not_zip(struct tfs_source *src, struct tfs_diag *d)
{
	unsigned char head[16];
	size_t hn = src->id.size < sizeof head ? (size_t)src->id.size : sizeof head;
	tfs_err e = tfs_source_read(src, head, hn, 0, d);
	if (e)
		return e;
	if (is_legacy(head, hn))
		return tfs_fail(
			d, TFS_ERR_FORMAT,
			"a PyTorch checkpoint in the legacy format (torch.save before 1.6, or _use_new_zipfile_serialization=False): tensors and pickles interleaved in one stream, which tensorfs cannot map; re-save it with a current torch.save");
	if (hn >= 2 && head[0] == 0x80 && head[1] <= 5)
		return tfs_fail(
			d, TFS_ERR_FORMAT,
			"a bare pickle, not a torch.save zip archive: tensorfs reads PyTorch checkpoints only in the zip format of PyTorch 1.6 and later");
	if (hn < 4 || memcmp(head, "PK\x03\x04", 4) != 0)
		return tfs_fail(
			d, TFS_ERR_FORMAT,
			"not a PyTorch checkpoint: neither a zip archive (torch.save since PyTorch 1.6) nor a pickle");
	return TFS_OK;
}

/* torch.save puts every record under one top directory (the archive name). */
static tfs_err archive_top(const struct tfs_zip *z, const char **top, size_t *tl, struct tfs_diag *d)
{
	const char *slash = z->n ? memchr(z->e[0].name, '/', z->e[0].nlen) : NULL;
	if (!slash)
		return tfs_fail(
			d, TFS_ERR_FORMAT,
			"a zip archive but not a PyTorch checkpoint: its entries are not under one directory holding data.pkl");
	*top = z->e[0].name;
	*tl = (size_t)(slash - *top);
	for (uint32_t i = 0; i < z->n; i++)
		if (z->e[i].nlen <= *tl || memcmp(z->e[i].name, *top, *tl + 1) != 0) {
			char q[160];
			tfs_quote(q, sizeof q, z->e[i].name, z->e[i].nlen);
			return tfs_fail(
				d, TFS_ERR_FORMAT,
				"zip entry %s is outside the archive's top directory (not a torch.save archive)",
				q);
		}
	return TFS_OK;
}

static tfs_err check_byteorder(const unsigned char *bo, size_t bl, struct tfs_diag *d)
{
	if (bl == 3 && memcmp(bo, "big", 3) == 0)
		return tfs_fail(
			d, TFS_ERR_FORMAT,
			"written on a big-endian machine (byteorder \"big\"): tensorfs serves stored bytes as they are and does not swap them");
	if (bl != 6 || memcmp(bo, "little", 6) != 0)
		return tfs_fail(d, TFS_ERR_FORMAT, "the byteorder record is neither \"little\" nor \"big\"");
	return TFS_OK;
}

/* What --inspect shows beside the tensors: what the walk left out. */
static tfs_err add_facts(struct tfs_table *out, const struct walk *w, unsigned storages, int has_byteorder)
{
	char tmp[700];
	int n = snprintf(tmp, sizeof tmp, "%s", has_byteorder ? "little" : "absent (little)");
	tfs_err e = tfs_table_fact(out, "byteorder", tmp, (size_t)n);
	if (e)
		return e;
	n = snprintf(tmp, sizeof tmp, "%u", storages);
	if ((e = tfs_table_fact(out, "storages", tmp, (size_t)n)))
		return e;
	if (w->hidden) {
		n = snprintf(tmp, sizeof tmp, "%u not contiguous: %.*s%s", w->hidden, (int)w->hlen,
			     w->hidden_names, w->hidden > HIDDEN_NAMED ? ", ..." : "");
		if ((e = tfs_table_fact(out, "hidden", tmp, (size_t)n)))
			return e;
	}
	if (w->meta_dropped) {
		n = snprintf(tmp, sizeof tmp, "%u plain values beyond the first %d not shown",
			     w->meta_dropped, META_MAX);
		if ((e = tfs_table_fact(out, "metadata", tmp, (size_t)n)))
			return e;
	}
	return TFS_OK;
}

tfs_err tfs_torch_read(struct tfs_source *src, const struct tfs_parse_opts *o, struct tfs_table *out,
		       struct tfs_diag *d)
{
	struct tfs_zip z;
	struct tfs_pk *vm = NULL;
	struct tfs_pk_obj *root;
	unsigned char *pkl = NULL, *bo = NULL, *ver = NULL, *seen = NULL;
	size_t pl, bl, vl;
	struct walk *w = NULL;
	tfs_err e;
	memset(out, 0, sizeof *out);
	if ((e = not_zip(src, d)) || (e = tfs_zip_open(src, &z, d)))
		return e;
	const char *top = NULL;
	size_t tl = 0;
	if ((e = archive_top(&z, &top, &tl, d)))
		goto out;
	if ((e = record(src, &z, top, tl, "data.pkl", PKL_MAX, &pkl, &pl, d)) ||
	    (e = record(src, &z, top, tl, "byteorder", 64, &bo, &bl, d)) ||
	    (e = record(src, &z, top, tl, "version", 64, &ver, &vl, d)))
		goto out;
	if (!pkl) {
		e = tfs_fail(
			d, TFS_ERR_FORMAT,
			"a zip archive but not a PyTorch checkpoint: no data.pkl under its top directory");
		goto out;
	}
	if (bo && (e = check_byteorder(bo, trim(bo, bl), d)))
		goto out;
	struct ctx c = {.z = &z, .top = top, .toplen = tl};
	struct tfs_pk_ops ops = {.global = global, .call = call, .persid = persid, .ctx = &c};
	if (!(seen = calloc(z.n ? z.n : 1, 1))) {
		e = tfs_fail(d, TFS_ERR_NOMEM, "out of memory");
		goto out;
	}
	c.seen = seen;
	if ((e = tfs_pk_load(pkl, pl, &ops, &vm, &root, d)))
		goto out;
	w = calloc(1, sizeof *w);
	if (!w) {
		e = tfs_fail(d, TFS_ERR_NOMEM, "out of memory");
		goto out;
	}
	w->t = out;
	w->b.t = out;
	w->o = o;
	w->d = d;
	w->objects = tfs_pk_objects(vm);
	/* (+ the depth bound: an object that contains itself is told as that) */
	w->visit_max = w->objects + pl + DEPTH_MAX + 1;
	out->format = "pytorch";
	out->file_size = src->id.size;
	if (root->kind != TFS_PK_DICT && !(root->kind == TFS_PK_USER && root->ukind == U_TENSOR) &&
	    root->kind != TFS_PK_LIST && root->kind != TFS_PK_TUPLE) {
		e = tfs_fail(d, TFS_ERR_FORMAT, "the checkpoint holds a %s, not a state dict or tensors",
			     root->kind == TFS_PK_USER ? "storage" : "plain value");
		goto out;
	}
	/* names average well under 64 bytes in real state dicts */
	if (tfs_table_reserve(&w->b, c.tensors, (size_t)c.tensors * 64, c.dims)) {
		e = tfs_fail(d, TFS_ERR_NOMEM, "out of memory");
		goto out;
	}
	if ((e = tfs_torch_walk(w, root, 0)))
		goto out;
	if (tfs_table_meta_dedupe(&w->b)) {
		e = tfs_fail(d, TFS_ERR_NOMEM, "out of memory");
		goto out;
	}
	if ((e = tfs_table_fact(out, "archive", top, tl)))
		goto out;
	if (ver && (e = tfs_table_fact(out, "pytorch.version", (const char *)ver, trim(ver, vl))))
		goto out;
	e = add_facts(out, w, c.storages, bo != NULL);
out:
	if (w)
		tfs_table_builder_done(&w->b);
	free(w);
	tfs_pk_free(vm);
	free(pkl);
	free(seen);
	free(bo);
	free(ver);
	tfs_zip_free(&z);
	if (e)
		tfs_table_free(out);
	return e;
}

static int detect(const struct tfs_probe *p)
{
	const char *name;
	uint32_t nl;
	if (is_legacy(p->head, p->nhead))
		return 2;
	/* A bare pickle (torch.save of old, or pickle.dump) is most likely
	 * meant as a PyTorch checkpoint: this reader says what it is. */
	if (p->nhead >= 2 && p->head[0] == 0x80 && p->head[1] >= 2 && p->head[1] <= 5)
		return 1;
	if (!tfs_zip_sniff(p->head, p->nhead, &name, &nl))
		return 0;
	if (nl >= 4 && memcmp(name + nl - 4, ".npy", 4) == 0)
		return 0;
	/* Any other zip may be one (a damaged or re-zipped archive): this
	 * reader says what is wrong with it, or the name decides. */
	const char *slash = memchr(name, '/', nl);
	if (!slash)
		return 1;
	size_t rest = nl - (size_t)(slash + 1 - name);
	const char *r = slash + 1;
	if ((rest == 8 && memcmp(r, "data.pkl", 8) == 0) ||
	    (rest == 15 && memcmp(r, ".format_version", 15) == 0))
		return 2;
	return 1;
}

static const char *const other_ext[] = {".pt", ".pth", NULL};

const struct tfs_format tfs_format_torch = {
	.name = "pytorch",
	.ext = ".bin",
	.other_ext = other_ext,
	.detect = detect,
	.read = tfs_torch_read,
};
