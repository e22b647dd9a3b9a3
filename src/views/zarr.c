/* -o zarr: __zarr__/ at the root, every tensor as an array of a Zarr store
 * that format 2 readers (zarr-python 2) and format 3 readers (zarr-python
 * 3, TensorStore) read from the same files. Groups follow the dotted names
 * as the tree layout does, with its escaping. An array is cut in slabs of
 * whole rows along its first axis, so that every chunk file is one range
 * of the tensor's bytes, served as the tensor's file is (spliced, or the
 * remote cache's zero-copy path); both formats name a chunk the same file
 * ("3.0.0": v2's "." separator, v3's "v2" chunk key encoding). The last
 * slab's file is full size, its rows past the tensor's zeros from one
 * buffer of zeros: nothing of the tensor is copied. */
#include "views/zarr.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/json.h"
#include "core/hash.h"
#include "core/names.h"
#include "core/opts.h"
#include "views/convert.h"
#include "views/tree.h"
#include "views/view.h"

/* ---- the arrays ---- */

struct ztype {
	unsigned dtype;
	const char *typestr, *data_type;
};

/* The dtypes NumPy has, shown as they are. */
static const struct ztype native[] = {
	{TFS_DT_BOOL, "|b1", "bool"},     {TFS_DT_U8, "|u1", "uint8"},         {TFS_DT_I8, "|i1", "int8"},
	{TFS_DT_I16, "<i2", "int16"},     {TFS_DT_U16, "<u2", "uint16"},       {TFS_DT_F16, "<f2", "float16"},
	{TFS_DT_I32, "<i4", "int32"},     {TFS_DT_U32, "<u4", "uint32"},       {TFS_DT_F32, "<f4", "float32"},
	{TFS_DT_C64, "<c8", "complex64"}, {TFS_DT_F64, "<f8", "float64"},      {TFS_DT_I64, "<i8", "int64"},
	{TFS_DT_U64, "<u8", "uint64"},    {TFS_DT_C128, "<c16", "complex128"},
};

static uint64_t mul(uint64_t a, uint64_t b, int *over)
{
	if (a && b > UINT64_MAX / a)
		*over = 1;
	return a * b;
}

tfs_err tfs_zarr_geom(const struct tfs_table *h, const struct tfs_tensor *t, uint64_t target,
		      struct tfs_zarr_geom *g)
{
	memset(g, 0, sizeof *g);
	g->dtype = t->dtype;
	for (size_t k = 0; k < sizeof native / sizeof native[0]; k++)
		if (native[k].dtype == t->dtype) {
			g->typestr = native[k].typestr;
			g->data_type = native[k].data_type;
			g->itemsize = tfs_dtype_info(t->dtype)->bits / 8;
		}
	if (!g->typestr && tfs_converts(t->dtype)) {
		g->converted = 1;
		g->typestr = "<f4";
		g->data_type = "float32";
		g->itemsize = 4;
	}
	if (!g->typestr) {
		g->raw = 1;
		g->typestr = "|u1";
		g->data_type = "uint8";
		g->itemsize = 1;
	}
	int over = 0;
	g->ndim = g->raw ? 1 : t->ndim;
	if (g->raw) {
		g->rows = tfs_tensor_size(t);
		g->row_bytes = 1;
	} else {
		g->rows = t->ndim ? h->dims[t->dims_off] : 1;
		g->row_bytes = g->itemsize;
		for (uint32_t k = 1; k < t->ndim; k++)
			g->row_bytes = mul(g->row_bytes, h->dims[t->dims_off + k], &over);
	}
	g->bytes = mul(g->rows, g->row_bytes, &over);
	if (over)
		return TFS_ERR_UNHANDLED;
	if (!g->bytes) {
		g->slab_rows = 1;
		return TFS_OK;
	}
	if (!target)
		target = 1;
	/* The row count nearest the target: never over it by more than half
	 * a row, at least one. No divisor of the row count is sought: a prime
	 * count would give one-row chunks. */
	uint64_t k = target / g->row_bytes + (target % g->row_bytes >= (g->row_bytes + 1) / 2);
	if (k < 1)
		k = 1;
	if (k > g->rows)
		k = g->rows;
	g->slab_rows = k;
	g->chunk_bytes = k * g->row_bytes;
	g->nchunks = g->rows / k + (g->rows % k != 0);
	return TFS_OK;
}

uint64_t tfs_zarr_dim(const struct tfs_zarr_geom *g, const struct tfs_table *h, const struct tfs_tensor *t,
		      uint32_t k)
{
	return g->raw ? g->rows : h->dims[t->dims_off + k];
}

size_t tfs_zarr_chunk_key(const struct tfs_zarr_geom *g, uint64_t c, char *out, size_t cap)
{
	int n = snprintf(out, cap, "%llu", (unsigned long long)c);
	size_t o = n > 0 ? (size_t)n : 0;
	for (uint32_t k = 1; k < g->ndim && o + 3 <= cap; k++) {
		memcpy(out + o, ".0", 3);
		o += 2;
	}
	return o;
}

void tfs_zarr_chunk_span(const struct tfs_zarr_geom *g, uint64_t c, uint64_t off, uint64_t len,
			 uint64_t *from, uint64_t *data, uint64_t *zeros)
{
	uint64_t at = c * g->chunk_bytes + off;
	uint64_t have = at < g->bytes ? g->bytes - at : 0;
	*from = at;
	*data = len < have ? len : have;
	*zeros = len - *data;
}

/* ---- the documents ---- */

/* zarr-python 2 reads its metadata as ASCII (json.dumps' ensure_ascii
 * form): the tail of *buf from `from` on, valid UTF-8 as the one JSON
 * writer leaves it, is rewritten with every other character as \uXXXX (a
 * surrogate pair past U+FFFF). Only strings hold such bytes. */
static tfs_err ascii_from(char **buf, size_t *len, size_t *cap, size_t from)
{
	size_t k = from;
	while (k < *len && !((unsigned char)(*buf)[k] & 0x80))
		k++;
	if (k == *len)
		return TFS_OK;
	char *nb = NULL;
	size_t nl = 0, nc = 0;
	const unsigned char *s = (const unsigned char *)*buf;
	tfs_err e = tfs_json_put(&nb, &nl, &nc, *buf, k);
	while (!e && k < *len) {
		if (s[k] < 0x80) {
			e = tfs_json_put(&nb, &nl, &nc, *buf + k, 1);
			k++;
			continue;
		}
		unsigned n = s[k] >= 0xf0 ? 4 : s[k] >= 0xe0 ? 3 : 2;
		uint32_t cp = s[k] & (0x7f >> n);
		for (unsigned j = 1; j < n && k + j < *len; j++)
			cp = cp << 6 | (s[k + j] & 0x3f);
		k += n;
		char esc[16];
		int el = cp > 0xffff ? snprintf(esc, sizeof esc, "\\u%04x\\u%04x",
						0xd800 + ((cp - 0x10000) >> 10),
						0xdc00 + ((cp - 0x10000) & 0x3ff))
				     : snprintf(esc, sizeof esc, "\\u%04x", cp);
		e = tfs_json_put(&nb, &nl, &nc, esc, (size_t)el);
	}
	if (e) {
		free(nb);
		return e;
	}
	free(*buf);
	*buf = nb;
	*len = nl;
	*cap = nc;
	return TFS_OK;
}

struct out {
	char **buf;
	size_t *len, *cap;
	tfs_err e;
};

static void put(struct out *o, const char *s)
{
	if (!o->e)
		o->e = tfs_json_puts(o->buf, o->len, o->cap, s);
}

static void put_u64(struct out *o, uint64_t v)
{
	if (!o->e)
		o->e = tfs_json_u64(o->buf, o->len, o->cap, v);
}

static void put_str(struct out *o, const char *s, size_t n)
{
	if (!o->e)
		o->e = tfs_json_str(o->buf, o->len, o->cap, s, n);
}

/* The array's shape, or (chunks) a chunk's: every axis whole but the
 * first, in slabs; a chunk is never 0 along an axis (an empty array's
 * chunks are still shapes of at least 1). */
static void put_dims(struct out *o, const struct tfs_zarr_geom *g, const struct tfs_table *h,
		     const struct tfs_tensor *t, int chunks)
{
	put(o, "[");
	for (uint32_t k = 0; k < g->ndim; k++) {
		uint64_t d = chunks && !k ? g->slab_rows : tfs_zarr_dim(g, h, t, k);
		put(o, k ? ", " : "");
		put_u64(o, chunks && !d ? 1 : d);
	}
	put(o, "]");
}

static void put_fill(struct out *o, const struct tfs_zarr_geom *g)
{
	char k = g->typestr[1];
	if (k == 'b')
		put(o, "false");
	else if (k == 'f')
		put(o, "0.0");
	else if (k == 'c')
		put(o, "[0.0, 0.0]"); /* (real, imaginary) in both formats */
	else
		put(o, "0");
}

static void put_dim_names(struct out *o, const struct tfs_zarr_geom *g, const char *leaf, size_t leaf_len)
{
	char buf[TFS_NAME_MAX + 32];
	put(o, "[");
	for (uint32_t k = 0; k < g->ndim; k++) {
		int n = snprintf(buf, sizeof buf, "%.*s.%u", (int)leaf_len, leaf, (unsigned)k);
		put(o, k ? ", " : "");
		put_str(o, buf, n > 0 ? (size_t)n : 0);
	}
	put(o, "]");
}

/* The tensor's own name, stored dtype and shape. */
static void put_tensor_attrs(struct out *o, const struct tfs_table *h, const struct tfs_tensor *t,
			     const char *indent)
{
	size_t dl;
	const char *dt = tfs_tensor_dtype(h, t, &dl);
	put(o, indent);
	put(o, "\"tensor_dtype\": ");
	put_str(o, dt, dl);
	put(o, ",\n");
	put(o, indent);
	put(o, "\"tensor_name\": ");
	put_str(o, tfs_tensor_name(h, t), t->name_len);
	put(o, ",\n");
	put(o, indent);
	put(o, "\"tensor_shape\": [");
	for (uint32_t k = 0; k < t->ndim; k++) {
		put(o, k ? ", " : "");
		put_u64(o, h->dims[t->dims_off + k]);
	}
	put(o, "]");
}

tfs_err tfs_zarr_zarray(const struct tfs_zarr_geom *g, const struct tfs_table *h, const struct tfs_tensor *t,
			char **buf, size_t *len, size_t *cap)
{
	struct out o = {buf, len, cap, TFS_OK};
	put(&o, "{\n    \"chunks\": ");
	put_dims(&o, g, h, t, 1);
	put(&o, ",\n    \"compressor\": null,\n    \"dimension_separator\": \".\",\n    \"dtype\": \"");
	put(&o, g->typestr);
	put(&o, "\",\n    \"fill_value\": ");
	put_fill(&o, g);
	put(&o, ",\n    \"filters\": null,\n    \"order\": \"C\",\n    \"shape\": ");
	put_dims(&o, g, h, t, 0);
	put(&o, ",\n    \"zarr_format\": 2\n}\n");
	return o.e;
}

tfs_err tfs_zarr_zattrs(const struct tfs_zarr_geom *g, const struct tfs_table *h, const struct tfs_tensor *t,
			const char *leaf, size_t leaf_len, char **buf, size_t *len, size_t *cap)
{
	struct out o = {buf, len, cap, TFS_OK};
	size_t from = *len;
	/* xarray's name for the dimensions. */
	put(&o, "{\n    \"_ARRAY_DIMENSIONS\": ");
	put_dim_names(&o, g, leaf, leaf_len);
	put(&o, ",\n");
	put_tensor_attrs(&o, h, t, "    ");
	put(&o, "\n}\n");
	return o.e ? o.e : ascii_from(buf, len, cap, from);
}

tfs_err tfs_zarr_array_json(const struct tfs_zarr_geom *g, const struct tfs_table *h,
			    const struct tfs_tensor *t, const char *leaf, size_t leaf_len, char **buf,
			    size_t *len, size_t *cap)
{
	struct out o = {buf, len, cap, TFS_OK};
	size_t from = *len;
	put(&o, "{\n    \"zarr_format\": 3,\n    \"node_type\": \"array\",\n    \"shape\": ");
	put_dims(&o, g, h, t, 0);
	put(&o, ",\n    \"data_type\": \"");
	put(&o, g->data_type);
	put(&o, "\",\n    \"chunk_grid\": {\"name\": \"regular\", \"configuration\": {\"chunk_shape\": ");
	put_dims(&o, g, h, t, 1);
	put(&o, "}},\n    \"chunk_key_encoding\": {\"name\": \"v2\", \"configuration\": {\"separator\": "
		"\".\"}},\n    \"fill_value\": ");
	put_fill(&o, g);
	/* One-byte types have no byte order to name. */
	put(&o, g->itemsize > 1 ? ",\n    \"codecs\": [{\"name\": \"bytes\", \"configuration\": {\"endian\": "
				  "\"little\"}}],\n"
				: ",\n    \"codecs\": [{\"name\": \"bytes\"}],\n");
	put(&o, "    \"attributes\": {\n");
	put_tensor_attrs(&o, h, t, "        ");
	put(&o, "\n    },\n    \"dimension_names\": ");
	put_dim_names(&o, g, leaf, leaf_len);
	put(&o, "\n}\n");
	return o.e ? o.e : ascii_from(buf, len, cap, from);
}

tfs_err tfs_zarr_zgroup(char **buf, size_t *len, size_t *cap)
{
	return tfs_json_puts(buf, len, cap, "{\n    \"zarr_format\": 2\n}\n");
}

tfs_err tfs_zarr_group_json(const char *attrs, size_t attrs_len, char **buf, size_t *len, size_t *cap)
{
	struct out o = {buf, len, cap, TFS_OK};
	size_t from = *len;
	put(&o, "{\n  \"zarr_format\": 3,\n  \"node_type\": \"group\",\n  \"attributes\": ");
	while (attrs_len && (attrs[attrs_len - 1] == '\n' || attrs[attrs_len - 1] == ' '))
		attrs_len--;
	if (!o.e)
		o.e = tfs_json_nested(buf, len, cap, attrs, attrs_len);
	put(&o, "\n}\n");
	return o.e ? o.e : ascii_from(buf, len, cap, from);
}

/* ---- the view: its files in the tree ---- */

/* What a file of the view is (its node's ref indexes these). */
enum { F_ZGROUP, F_GROUP_ZATTRS, F_GROUP_JSON, F_ZARRAY, F_ZATTRS, F_ARRAY_JSON, F_CHUNK };

struct zfile {
	uint32_t shard, ref; /* an array's tensor; a group's: 1 for the root, else 0 */
	uint64_t what;       /* F_*, F_CHUNK + the chunk's number */
};

/* Names live as long as the tree: blocks that never move. */
struct zblock {
	struct zblock *next;
	size_t used, cap;
	char text[];
};

/* (parent, bytes) -> node, for the groups by their raw names and every
 * hashed name given (hashed names alone can meet another). */
struct zmap {
	uint32_t *parent, *node;
	const char **key;
	uint32_t *klen;
	size_t n, cap;
};

struct tfs_zarr {
	uint64_t target;
	struct zfile *files;
	uint32_t nfiles;
	size_t fcap;
	struct zblock *names;
	struct zmap groups, hashed;
	/* The root's attributes (the checkpoint's __metadata__), made when
	 * first asked for. */
	pthread_mutex_t lock;
	char *root_attrs, *root_json;
	size_t root_attrs_len, root_json_len;
	int root_ready;
	const struct tfs_model *m;
};

/* The option's value (check refuses a bad one before anything is opened). */
static int parse_target(const char *v, uint64_t *n)
{
	*n = TFS_ZARR_CHUNK_DEFAULT;
	return v && (tfs_opt_number(v, 1, 1ull << 40, n) || *n == 0) ? -1 : 0;
}

static void *state_new(const struct tfs_model *m, const struct tfs_tree_opts *o)
{
	struct tfs_zarr *z = calloc(1, sizeof *z);
	if (z) {
		pthread_mutex_init(&z->lock, NULL);
		z->m = m;
		parse_target(tfs_opts_get(o->opts, "zarr_chunk_size"), &z->target);
	}
	return z;
}

static void map_free(struct zmap *m)
{
	free(m->parent);
	free(m->node);
	free(m->key);
	free(m->klen);
}

static void state_free(void *state)
{
	struct tfs_zarr *z = state;
	for (struct zblock *b = z->names, *nx; b; b = nx) {
		nx = b->next;
		free(b);
	}
	free(z->files);
	map_free(&z->groups);
	map_free(&z->hashed);
	free(z->root_attrs);
	free(z->root_json);
	pthread_mutex_destroy(&z->lock);
	free(z);
}

static const char *keep(struct tfs_zarr *z, const char *s, size_t n)
{
	if (!z->names || z->names->cap - z->names->used < n + 1) {
		size_t cap = n + 1 > 65536 ? n + 1 : 65536;
		struct zblock *b = malloc(sizeof *b + cap);
		if (!b)
			return NULL;
		b->next = z->names;
		b->used = 0;
		b->cap = cap;
		z->names = b;
	}
	char *p = z->names->text + z->names->used;
	memcpy(p, s, n);
	p[n] = 0;
	z->names->used += n + 1;
	return p;
}

static size_t map_slot(const struct zmap *m, uint32_t parent, const char *k, size_t n)
{
	size_t j = tfs_hash(k, n, tfs_hash_seed ^ ((uint64_t)parent * 0x9e3779b97f4a7c15ull)) & (m->cap - 1);
	while (m->node[j] && !(m->parent[j] == parent && m->klen[j] == n && memcmp(m->key[j], k, n) == 0))
		j = (j + 1) & (m->cap - 1);
	return j;
}

static uint32_t map_get(const struct zmap *m, uint32_t parent, const char *k, size_t n)
{
	return m->cap ? m->node[map_slot(m, parent, k, n)] : 0;
}

/* k must live while the map does. */
static tfs_err map_put(struct zmap *m, uint32_t parent, const char *k, size_t n, uint32_t node)
{
	if ((m->n + 1) * 2 > m->cap) {
		struct zmap g = {0};
		g.cap = m->cap ? m->cap * 2 : 256;
		g.parent = calloc(g.cap, sizeof *g.parent);
		g.node = calloc(g.cap, sizeof *g.node);
		g.key = calloc(g.cap, sizeof *g.key);
		g.klen = calloc(g.cap, sizeof *g.klen);
		if (!g.parent || !g.node || !g.key || !g.klen) {
			map_free(&g);
			return TFS_ERR_NOMEM;
		}
		for (size_t i = 0; i < m->cap; i++)
			if (m->node[i]) {
				size_t j = map_slot(&g, m->parent[i], m->key[i], m->klen[i]);
				g.parent[j] = m->parent[i];
				g.node[j] = m->node[i];
				g.key[j] = m->key[i];
				g.klen[j] = m->klen[i];
			}
		g.n = m->n;
		map_free(m);
		*m = g;
	}
	size_t j = map_slot(m, parent, k, n);
	m->parent[j] = parent;
	m->node[j] = node;
	m->key[j] = k;
	m->klen[j] = (uint32_t)n;
	m->n++;
	return TFS_OK;
}

static tfs_err add_file(struct tfs_zarr *z, struct tfs_tree_add *a, uint32_t dir, const char *name,
			uint32_t shard, uint32_t ref, uint64_t what)
{
	if (z->nfiles == UINT32_MAX ||
	    tfs_grow((void **)&z->files, &z->fcap, (size_t)z->nfiles + 1, sizeof *z->files))
		return TFS_ERR_NOMEM;
	z->files[z->nfiles] = (struct zfile){shard, ref, what};
	return tfs_tree_add_node(a, dir, name, 0, z->nfiles++, NULL);
}

/* A group's three documents (from F_ZGROUP) or an array's (from F_ZARRAY). */
static tfs_err add_docs(struct tfs_zarr *z, struct tfs_tree_add *a, uint32_t dir, uint32_t shard,
			uint32_t ref, uint64_t first)
{
	static const char *const names[] = {".zgroup", ".zattrs", "zarr.json",
					    ".zarray", ".zattrs", "zarr.json"};
	tfs_err e = TFS_OK;
	for (uint64_t k = first; !e && k < first + 3; k++)
		e = add_file(z, a, dir, names[k], shard, ref, k);
	return e;
}

/* A directory under `parent` named after raw[0..len) as the tree layout
 * names it: room kept for `room` more bytes, then `suffix`; a hashed
 * name that meets another gets "-N". */
static tfs_err add_dir(struct tfs_zarr *z, struct tfs_tree_add *a, uint32_t parent, const char *raw,
		       size_t len, size_t room, const char *suffix, uint32_t *out)
{
	char buf[TFS_NAME_MAX + 32];
	int hashed;
	size_t n = tfs_name_map_max(raw, len, buf, TFS_NAME_MAX - room, &hashed);
	memcpy(buf + n, suffix, strlen(suffix) + 1);
	n += strlen(suffix);
	if (hashed) {
		size_t base = n;
		for (unsigned k = 1; map_get(&z->hashed, parent, buf, n); k++)
			n = base + (size_t)snprintf(buf + base, sizeof buf - base, "-%u", k);
	}
	const char *name = keep(z, buf, n);
	if (!name)
		return TFS_ERR_NOMEM;
	tfs_err e = tfs_tree_add_node(a, parent, name, 1, 0, out);
	if (!e && hashed)
		e = map_put(&z->hashed, parent, name, n, *out);
	return e;
}

/* Room every directory's name keeps in the tree layout (for
 * D.dir.safetensors): a group's name is the tree's directory's. */
#define GROUP_ROOM (sizeof ".dir.safetensors" - 1)

static tfs_err add_array(struct tfs_zarr *z, struct tfs_tree_add *a, uint32_t parent, const char *raw,
			 size_t len, uint32_t shard, uint32_t ref, const struct tfs_zarr_geom *g)
{
	int conflict = map_get(&z->groups, parent, raw, len) != 0;
	uint32_t dir;
	tfs_err e = add_dir(z, a, parent, raw, len, conflict ? strlen(TFS_CONFLICT_SUFFIX) : 0,
			    conflict ? TFS_CONFLICT_SUFFIX : "", &dir);
	if (!e)
		e = add_docs(z, a, dir, shard, ref, F_ZARRAY);
	const char *name = NULL;
	for (uint64_t c = 0; !e && c < g->nchunks; c++) {
		char key[64];
		size_t kl = tfs_zarr_chunk_key(g, c, key, sizeof key);
		if (!(name = keep(z, key, kl)))
			return TFS_ERR_NOMEM;
		e = add_file(z, a, dir, name, shard, ref, F_CHUNK + c);
	}
	return e;
}

static tfs_err check(const struct tfs_opts *o, struct tfs_diag *d)
{
	const char *v = tfs_opts_get(o, "zarr_chunk_size");
	uint64_t n;
	if (parse_target(v, &n))
		return tfs_fail(d, TFS_ERR_INVAL,
				"-o zarr_chunk_size=%s: expected a size from 1 to 1T (64M, 256K...)", v);
	return TFS_OK;
}

static int wanted(const struct tfs_tree_opts *o)
{
	return tfs_opts_get(o->opts, "zarr") != NULL;
}

static const char *const *reserves(const struct tfs_tree_opts *o)
{
	static const char *const names[] = {TFS_ZARR_DIR, NULL};
	(void)o;
	return names;
}

/* The whole store: __zarr__/, its groups and arrays. */
static tfs_err at_root(struct tfs_tree_add *a, void *state, struct tfs_diag *d)
{
	struct tfs_zarr *z = state;
	const struct tfs_model *m = z->m;
	uint32_t root;
	tfs_err e = tfs_tree_add_node(a, TFS_TREE_ROOT, TFS_ZARR_DIR, 1, 0, &root);
	if (!e)
		e = add_docs(z, a, root, 0, 1, F_ZGROUP);
	/* The groups first, so that an array knows whether a group has its
	 * name (tensors "a.b" and "a.b.c": the array "b.tensor"); each
	 * tensor's group kept for the second pass. Names mostly come sorted:
	 * a name with the previous one's groups takes them as they are. */
	size_t total = 0;
	for (uint32_t s = 0; s < m->nshards; s++)
		total += m->shards[s].h.n;
	uint32_t *leaf = e ? NULL : malloc((total + 1) * sizeof *leaf);
	const char *prev = NULL;
	size_t prev_len = 0, at = 0;
	uint32_t prev_dir = root;
	if (!e && !leaf)
		e = TFS_ERR_NOMEM;
	for (uint32_t s = 0; !e && s < m->nshards; s++) {
		const struct tfs_table *h = &m->shards[s].h;
		for (uint32_t i = 0; !e && i < h->n; i++, at++) {
			const char *name = tfs_tensor_name(h, &h->t[i]);
			const char *dot = memrchr(name, '.', h->t[i].name_len);
			/* (the prefix with its last '.': "." is not "") */
			size_t plen = dot ? (size_t)(dot - name) + 1 : 0;
			uint32_t parent = root;
			if (prev && plen == prev_len && memcmp(name, prev, plen) == 0) {
				leaf[at] = prev_dir;
				continue;
			}
			size_t start = 0;
			for (size_t k = 0; !e && k < plen; k++) {
				if (name[k] != '.')
					continue;
				uint32_t dir = map_get(&z->groups, parent, name + start, k - start);
				if (!dir) {
					e = add_dir(z, a, parent, name + start, k - start, GROUP_ROOM, "",
						    &dir);
					if (!e)
						e = map_put(&z->groups, parent, name + start, k - start, dir);
					if (!e)
						e = add_docs(z, a, dir, 0, 0, F_ZGROUP);
				}
				parent = dir;
				start = k + 1;
			}
			leaf[at] = parent;
			prev = name;
			prev_len = plen;
			prev_dir = parent;
		}
	}
	at = 0;
	for (uint32_t s = 0; !e && s < m->nshards; s++) {
		const struct tfs_table *h = &m->shards[s].h;
		for (uint32_t i = 0; !e && i < h->n; i++, at++) {
			const struct tfs_tensor *t = &h->t[i];
			const char *name = tfs_tensor_name(h, t);
			const char *dot = memrchr(name, '.', t->name_len);
			size_t start = dot ? (size_t)(dot - name) + 1 : 0;
			struct tfs_zarr_geom g;
			if (tfs_zarr_geom(h, t, z->target, &g))
				continue; /* (no such tensor passes the formats' checks) */
			e = add_array(z, a, leaf[at], name + start, t->name_len - start, s, i, &g);
		}
	}
	free(leaf);
	return e ? tfs_fail(d, e, "out of memory building -o zarr's store") : TFS_OK;
}

/* ---- the view: reading ---- */

static tfs_err root_docs(const struct tfs_tree *t, struct tfs_zarr *z)
{
	tfs_err e = TFS_OK;
	pthread_mutex_lock(&z->lock);
	if (!z->root_ready) {
		size_t cap = 0;
		e = tfs_model_meta_json(t->m, &z->root_attrs, &z->root_attrs_len);
		if (!e)
			e = ascii_from(&z->root_attrs, &z->root_attrs_len, &cap, 0);
		cap = 0;
		if (!e)
			e = tfs_zarr_group_json(z->root_attrs, z->root_attrs_len, &z->root_json,
						&z->root_json_len, &cap);
		z->root_ready = !e;
	}
	pthread_mutex_unlock(&z->lock);
	return e;
}

/* A document's text: into *buf (malloc'd, the caller frees it), or the
 * root's kept one (*buf NULL, *doc set). */
static tfs_err doc(const struct tfs_tree *t, const struct tfs_node *n, const char **text, size_t *len,
		   char **buf)
{
	struct tfs_zarr *z = t->vstate[n->kind];
	const struct zfile *f = &z->files[n->ref];
	size_t cap = 0;
	tfs_err e = TFS_OK;
	*text = *buf = NULL;
	*len = 0;
	if ((f->what == F_GROUP_ZATTRS || f->what == F_GROUP_JSON) && f->ref) {
		if ((e = root_docs(t, z)))
			return e;
		*text = f->what == F_GROUP_ZATTRS ? z->root_attrs : z->root_json;
		*len = f->what == F_GROUP_ZATTRS ? z->root_attrs_len : z->root_json_len;
		return TFS_OK;
	}
	const struct tfs_node *dir = &t->nodes[n->parent];
	struct tfs_zarr_geom g;
	const struct tfs_table *h = f->what >= F_ZARRAY ? &t->m->shards[f->shard].h : NULL;
	const struct tfs_tensor *ts = h ? &h->t[f->ref] : NULL;
	if (h && (e = tfs_zarr_geom(h, ts, z->target, &g)))
		return e; /* (no such tensor passes the formats' checks) */
	if (f->what == F_ZGROUP)
		e = tfs_zarr_zgroup(buf, len, &cap);
	else if (f->what == F_GROUP_ZATTRS)
		e = tfs_json_puts(buf, len, &cap, "{}\n");
	else if (f->what == F_GROUP_JSON)
		e = tfs_zarr_group_json("{}", 2, buf, len, &cap);
	else if (f->what == F_ZARRAY)
		e = tfs_zarr_zarray(&g, h, ts, buf, len, &cap);
	else if (f->what == F_ZATTRS)
		e = tfs_zarr_zattrs(&g, h, ts, dir->fname, dir->fname_len, buf, len, &cap);
	else
		e = tfs_zarr_array_json(&g, h, ts, dir->fname, dir->fname_len, buf, len, &cap);
	*text = *buf;
	return e;
}

static uint64_t size(const struct tfs_tree *t, const struct tfs_node *n)
{
	const struct tfs_zarr *z = t->vstate[n->kind];
	const struct zfile *f = &z->files[n->ref];
	if (f->what >= F_CHUNK) {
		struct tfs_zarr_geom g;
		const struct tfs_table *h = &t->m->shards[f->shard].h;
		return tfs_zarr_geom(h, &h->t[f->ref], z->target, &g) ? 0 : g.chunk_bytes;
	}
	const char *text;
	size_t len;
	char *buf;
	tfs_err e = doc(t, n, &text, &len, &buf);
	free(buf);
	return e ? 0 : len;
}

/* Never written: the zeros after a last slab's rows. */
static char zeros[256 << 10];

static tfs_err pieces(const struct tfs_tree *t, const struct tfs_node *n, uint64_t off, size_t len,
		      struct tfs_pieces *out)
{
	const struct tfs_zarr *z = t->vstate[n->kind];
	const struct zfile *f = &z->files[n->ref];
	if (f->what < F_CHUNK) {
		const char *text;
		size_t tl;
		char *buf;
		char *to = NULL;
		tfs_err e = doc(t, n, &text, &tl, &buf);
		if (!e && (off > tl || len > tl - off))
			e = TFS_ERR_IO; /* (its size was asked for before: it cannot change) */
		else if (!e && !(to = tfs_pieces_room(out, len)))
			e = TFS_ERR_NOMEM;
		else if (!e)
			e = tfs_pieces_mem(out, memcpy(to, text + off, len), len);
		free(buf);
		return e;
	}
	const struct tfs_shard *sh = &t->m->shards[f->shard];
	const struct tfs_tensor *ts = &sh->h.t[f->ref];
	struct tfs_zarr_geom g;
	uint64_t from, data, nzero;
	tfs_err e = tfs_zarr_geom(&sh->h, ts, z->target, &g);
	/* A shard changed since the mount: EIO, as its tensors' files give
	 * (whose check is at open; a chunk is spliced from it too). */
	if (e || tfs_source_changed(sh->src))
		return TFS_ERR_IO;
	tfs_zarr_chunk_span(&g, f->what - F_CHUNK, off, len, &from, &data, &nzero);
	if (data && g.converted)
		e = tfs_f32_pieces(sh->src, ts, from, (size_t)data, out);
	else if (data)
		e = tfs_pieces_src(out, sh->src, ts->begin + from, (size_t)data, ts->end);
	while (!e && nzero) {
		size_t k = nzero < sizeof zeros ? (size_t)nzero : sizeof zeros;
		e = tfs_pieces_mem(out, zeros, k);
		nzero -= k;
	}
	return e;
}

static const struct tfs_opt_spec opts[] = {
	{"zarr", 0, "__zarr__/: every tensor as an array of a Zarr store (v2 and v3)", NULL, 0},
	{"zarr_chunk_size", 1, "-o zarr's chunks: slabs of rows this size (64M)", "SIZE", 0},
	{NULL, 0, NULL, NULL, 0},
};

const struct tfs_view_ops tfs_view_zarr = {
	.name = "zarr",
	.size = size,
	.pieces = pieces,
	.state_new = state_new,
	.state_free = state_free,
	.at_root = at_root,
	.opts = opts,
	.check = check,
	.wanted = wanted,
	.reserves = reserves,
};
