/* Unit tests of -o zarr (views/zarr.c): the slabs, the chunk keys, what a
 * chunk's bytes are made of, the documents (parsed back with json-c), and
 * the store in a tree built from a safetensors file in memory, read through
 * the view's pieces. No FUSE here. */
#include <json.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/names.h"
#include "core/opts.h"
#include "formats/safetensors.h"
#include "model/model.h"
#include "views/tree.h"
#include "views/view.h"
#include "compute/zarrdoc.h"

#include "check.h"

/* One tensor's table, by hand. */
struct one {
	struct tfs_table h;
	struct tfs_tensor t;
	uint64_t dims[8];
	char arena[300];
};

static void one(struct one *o, const char *name, size_t name_len, unsigned dtype, uint32_t ndim,
		const uint64_t *dims, uint64_t bytes)
{
	memset(o, 0, sizeof *o);
	memcpy(o->arena, name, name_len);
	o->h.arena = o->arena;
	o->h.arena_len = name_len + 1;
	o->h.dims = o->dims;
	o->h.ndims = ndim;
	o->h.t = &o->t;
	o->h.n = 1;
	if (ndim)
		memcpy(o->dims, dims, ndim * sizeof *dims);
	o->t.name_len = (uint32_t)name_len;
	o->t.ndim = ndim;
	o->t.dtype = (uint16_t)dtype;
	o->t.begin = 0;
	o->t.end = bytes;
}

static void test_geometry(void)
{
	current = "geometry";
	struct one o;
	struct tfs_zarr_geom g;

	/* A prime row count: slabs of the rows nearest 64 MiB, not a divisor. */
	uint64_t d1[] = {10007, 4096};
	one(&o, "w", 1, TFS_DT_F32, 2, d1, 10007ull * 4096 * 4);
	CHECK(tfs_zarr_geom(&o.h, &o.t, 64 << 20, &g) == TFS_OK, "geom");
	CHECK(g.row_bytes == 16384 && g.slab_rows == 4096 && g.chunk_bytes == 64 << 20, "slab %llu",
	      (unsigned long long)g.slab_rows);
	CHECK(g.nchunks == 3 && g.bytes == 10007ull * 16384, "chunks %llu", (unsigned long long)g.nchunks);
	CHECK(!strcmp(g.typestr, "<f4") && !strcmp(g.data_type, "float32") && !g.converted && !g.raw, "f32");

	/* Nearest: 2.4 rows -> 2, 2.6 rows -> 3; never under one row. */
	uint64_t d2[] = {100, 10};
	one(&o, "w", 1, TFS_DT_I8, 2, d2, 1000);
	tfs_zarr_geom(&o.h, &o.t, 24, &g);
	CHECK(g.slab_rows == 2 && g.nchunks == 50, "2.4 rows: %llu", (unsigned long long)g.slab_rows);
	tfs_zarr_geom(&o.h, &o.t, 26, &g);
	CHECK(g.slab_rows == 3 && g.nchunks == 34 && g.chunk_bytes == 30, "2.6 rows: %llu",
	      (unsigned long long)g.slab_rows);
	tfs_zarr_geom(&o.h, &o.t, 3, &g);
	CHECK(g.slab_rows == 1 && g.nchunks == 100, "under a row: one row");
	tfs_zarr_geom(&o.h, &o.t, 1 << 20, &g);
	CHECK(g.slab_rows == 100 && g.nchunks == 1 && g.chunk_bytes == 1000, "small tensor: one chunk");
	CHECK(!strcmp(g.typestr, "|i1"), "i8");

	/* A scalar: one chunk, key "0". */
	one(&o, "s", 1, TFS_DT_I64, 0, NULL, 8);
	tfs_zarr_geom(&o.h, &o.t, 64 << 20, &g);
	char key[64];
	CHECK(g.nchunks == 1 && g.chunk_bytes == 8 && g.ndim == 0, "scalar");
	CHECK(tfs_zarr_chunk_key(&g, 0, key, sizeof key) == 1 && !strcmp(key, "0"), "scalar key %s", key);

	/* Empty tensors: metadata, no chunk. */
	uint64_t d3[] = {0, 5}, d4[] = {3, 0, 2};
	one(&o, "e", 1, TFS_DT_F16, 2, d3, 0);
	tfs_zarr_geom(&o.h, &o.t, 64 << 20, &g);
	CHECK(g.nchunks == 0 && g.bytes == 0 && g.slab_rows == 1, "empty rows");
	one(&o, "e", 1, TFS_DT_F16, 3, d4, 0);
	tfs_zarr_geom(&o.h, &o.t, 64 << 20, &g);
	CHECK(g.nchunks == 0 && g.bytes == 0, "empty inner axis");

	/* Converted dtypes: float32, 4 bytes per element. */
	uint64_t d5[] = {7, 3};
	one(&o, "b", 1, TFS_DT_BF16, 2, d5, 42);
	tfs_zarr_geom(&o.h, &o.t, 24, &g);
	CHECK(g.converted && g.itemsize == 4 && g.row_bytes == 12 && g.slab_rows == 2 && g.nchunks == 4,
	      "bf16 slab %llu", (unsigned long long)g.slab_rows);
	CHECK(tfs_zarr_chunk_key(&g, 3, key, sizeof key) == 3 && !strcmp(key, "3.0"), "key %s", key);
	uint64_t d6[] = {256};
	one(&o, "q", 1, TFS_DT_Q4_0, 1, d6, 8 * 18);
	tfs_zarr_geom(&o.h, &o.t, 64 << 20, &g);
	CHECK(g.converted && g.bytes == 1024, "q4_0");
	/* No NumPy type and no decoding: its bytes. */
	one(&o, "iq", 2, TFS_DT_IQ2_XXS, 1, d6, 66);
	tfs_zarr_geom(&o.h, &o.t, 64 << 20, &g);
	CHECK(g.raw && g.ndim == 1 && g.rows == 66 && g.bytes == 66 && !strcmp(g.typestr, "|u1"), "raw");

	/* Overflow: no Zarr form. */
	uint64_t d7[] = {1ull << 40, 1ull << 40};
	one(&o, "x", 1, TFS_DT_F32, 2, d7, 0);
	CHECK(tfs_zarr_geom(&o.h, &o.t, 64 << 20, &g) == TFS_ERR_UNHANDLED, "overflow");
}

static void test_span(void)
{
	current = "span";
	struct one o;
	struct tfs_zarr_geom g;
	uint64_t d[] = {10, 4};
	one(&o, "w", 1, TFS_DT_F32, 2, d, 160);
	tfs_zarr_geom(&o.h, &o.t, 48, &g); /* 3 rows of 16 bytes */
	CHECK(g.slab_rows == 3 && g.nchunks == 4 && g.chunk_bytes == 48, "geom");
	uint64_t from, data, zeros;
	tfs_zarr_chunk_span(&g, 1, 8, 40, &from, &data, &zeros);
	CHECK(from == 56 && data == 40 && zeros == 0, "middle");
	/* The last slab: one row of the tensor, two of zeros. */
	tfs_zarr_chunk_span(&g, 3, 0, 48, &from, &data, &zeros);
	CHECK(from == 144 && data == 16 && zeros == 32, "last %llu %llu", (unsigned long long)data,
	      (unsigned long long)zeros);
	tfs_zarr_chunk_span(&g, 3, 20, 28, &from, &data, &zeros);
	CHECK(data == 0 && zeros == 28, "past the tensor");
	tfs_zarr_chunk_span(&g, 3, 10, 10, &from, &data, &zeros);
	CHECK(from == 154 && data == 6 && zeros == 4, "across the end");
}

static json_object *parse(const char *s, size_t n)
{
	struct json_tokener *tok = json_tokener_new();
	json_tokener_set_flags(tok, JSON_TOKENER_STRICT | JSON_TOKENER_VALIDATE_UTF8);
	json_object *o = json_tokener_parse_ex(tok, s, (int)n);
	if (json_tokener_get_error(tok) != json_tokener_success) {
		json_object_put(o);
		o = NULL;
	}
	json_tokener_free(tok);
	return o;
}

static json_object *get(json_object *o, const char *path)
{
	char buf[128];
	snprintf(buf, sizeof buf, "%s", path);
	for (char *k = strtok(buf, "/"); k && o; k = strtok(NULL, "/")) {
		if (json_object_is_type(o, json_type_array))
			o = json_object_array_get_idx(o, (size_t)atoi(k));
		else if (!json_object_object_get_ex(o, k, &o))
			o = NULL;
	}
	return o;
}

static int is_str(json_object *o, const char *path, const char *v)
{
	json_object *x = get(o, path);
	return x && json_object_is_type(x, json_type_string) && !strcmp(json_object_get_string(x), v);
}

static int is_int(json_object *o, const char *path, int64_t v)
{
	json_object *x = get(o, path);
	return x && json_object_is_type(x, json_type_int) && json_object_get_int64(x) == v;
}

/* zarr.json of a one-dimensional tensor named `name` (its first dim of
 * dims), parsed. */
static json_object *array_json(const char *name, unsigned dtype, const uint64_t *dims, uint64_t bytes)
{
	struct one o;
	struct tfs_zarr_geom g;
	char *b = NULL;
	size_t n = 0, cap = 0;
	one(&o, name, strlen(name), dtype, 1, dims, bytes);
	tfs_zarr_geom(&o.h, &o.t, 64, &g);
	tfs_zarr_array_json(&g, &o.h, &o.t, name, strlen(name), &b, &n, &cap);
	json_object *j = parse(b, n);
	free(b);
	return j;
}

static void test_documents(void)
{
	current = "documents";
	struct one o;
	struct tfs_zarr_geom g;
	/* A hostile name: a quote, a control character, bytes that are not
	 * UTF-8, a NUL. */
	static const char name[] = "a\"b\x01\xff\xfe.c\0d";
	uint64_t d[] = {5, 2, 3};
	one(&o, name, sizeof name - 1, TFS_DT_BF16, 3, d, 60);
	tfs_zarr_geom(&o.h, &o.t, 50, &g); /* 24-byte rows: 2 rows */
	char *b = NULL;
	size_t n = 0, cap = 0;

	CHECK(tfs_zarr_zarray(&g, &o.h, &o.t, &b, &n, &cap) == TFS_OK, "zarray");
	json_object *j = parse(b, n);
	CHECK(j && is_int(j, "zarr_format", 2) && is_str(j, "dtype", "<f4") && is_str(j, "order", "C"),
	      "zarray fields: %s", b);
	CHECK(j && is_int(j, "shape/0", 5) && is_int(j, "shape/2", 3) && is_int(j, "chunks/0", 2) &&
		      is_int(j, "chunks/1", 2) && is_int(j, "chunks/2", 3),
	      "shape, chunks");
	CHECK(j && get(j, "compressor") == NULL && json_object_object_get_ex(j, "compressor", NULL) &&
		      json_object_object_get_ex(j, "filters", NULL) && is_str(j, "dimension_separator", "."),
	      "no compressor, no filters");
	CHECK(j && json_object_is_type(get(j, "fill_value"), json_type_double), "fill");
	json_object_put(j);

	n = 0;
	CHECK(tfs_zarr_zattrs(&g, &o.h, &o.t, "c", 1, &b, &n, &cap) == TFS_OK, "zattrs");
	j = parse(b, n);
	CHECK(j != NULL, "zattrs is valid UTF-8 JSON: %s", b);
	int ascii = 1;
	for (size_t k = 0; k < n; k++)
		ascii &= !((unsigned char)b[k] & 0x80);
	/* (zarr-python 2 reads metadata as ASCII) */
	CHECK(ascii && strstr(b, "\\ufffd\\ufffd"), "ASCII only: %s", b);
	CHECK(j && is_str(j, "tensor_dtype", "BF16") && is_str(j, "_ARRAY_DIMENSIONS/1", "c.1") &&
		      is_int(j, "tensor_shape/0", 5),
	      "attrs");
	json_object *nm = j ? get(j, "tensor_name") : NULL;
	/* The one rule: bytes that are not UTF-8 as U+FFFD, the NUL kept. */
	CHECK(nm && json_object_get_string_len(nm) == 14 &&
		      !memcmp(json_object_get_string(nm), "a\"b\x01\xef\xbf\xbd\xef\xbf\xbd.c\0d", 14),
	      "name");
	json_object_put(j);

	n = 0;
	CHECK(tfs_zarr_array_json(&g, &o.h, &o.t, "c", 1, &b, &n, &cap) == TFS_OK, "zarr.json");
	j = parse(b, n);
	CHECK(j && is_int(j, "zarr_format", 3) && is_str(j, "node_type", "array") &&
		      is_str(j, "data_type", "float32"),
	      "v3: %s", b);
	CHECK(j && is_str(j, "chunk_grid/name", "regular") &&
		      is_int(j, "chunk_grid/configuration/chunk_shape/0", 2) &&
		      is_str(j, "chunk_key_encoding/name", "v2") &&
		      is_str(j, "chunk_key_encoding/configuration/separator", "."),
	      "v3 grid and keys");
	CHECK(j && json_object_array_length(get(j, "codecs")) == 1 && is_str(j, "codecs/0/name", "bytes") &&
		      is_str(j, "codecs/0/configuration/endian", "little"),
	      "v3 codecs");
	CHECK(j && is_str(j, "attributes/tensor_dtype", "BF16") && is_str(j, "dimension_names/0", "c.0"),
	      "v3 attributes");
	json_object_put(j);

	/* Complex and bool fill values, in each format's form. */
	j = array_json("z", TFS_DT_C64, d, 40);
	CHECK(j && json_object_array_length(get(j, "fill_value")) == 2 && is_str(j, "data_type", "complex64"),
	      "complex fill");
	json_object_put(j);
	j = array_json("t", TFS_DT_BOOL, d, 5);
	CHECK(j && json_object_is_type(get(j, "fill_value"), json_type_boolean) &&
		      get(j, "codecs/0/configuration") == NULL,
	      "bool: no byte order");
	json_object_put(j);

	n = 0;
	CHECK(tfs_zarr_group_json("{\n  \"k\": \"v\"\n}\n", 15, &b, &n, &cap) == TFS_OK, "group");
	j = parse(b, n);
	CHECK(j && is_str(j, "node_type", "group") && is_str(j, "attributes/k", "v"), "group: %s", b);
	json_object_put(j);
	n = 0;
	tfs_zarr_zgroup(&b, &n, &cap);
	j = parse(b, n);
	CHECK(j && is_int(j, "zarr_format", 2), "zgroup");
	json_object_put(j);
	free(b);
}

/* A name written in slices cut anywhere (tfs_zarr_name_cut) is the name
 * written whole: bytes that are not UTF-8, sequences cut short, 4-byte
 * characters (two escapes), control characters, quotes. */
static void test_name_slices(void)
{
	current = "name slices";
	static const char *const bits[] = {
		"a",    "\xc3\xa9", "\xf0\x9f\x98\x80", "\xe2\x82\xac", "\x80",
		"\xff", "\xc3",     "\xe2\x82",         "\"",           "\\",
		"\x01", "\x7f",     "\xf4\x90\x80\x80", "\xed\xa0\x80", "\xc0\xaf"};
	size_t n = 0, cap = 40000;
	char *name = malloc(cap);
	unsigned r = 1;
	while (n + 4 < cap) {
		r = r * 1103515245u + 12345u;
		const char *b = bits[(r >> 16) % (sizeof bits / sizeof *bits)];
		memcpy(name + n, b, strlen(b));
		n += strlen(b);
	}
	char *whole = NULL, *cut = NULL;
	size_t wl = 0, wc = 0, cl = 0, cc = 0;
	CHECK(tfs_zarr_name_part(name, 0, n, &whole, &wl, &wc) == TFS_OK && wl > n, "whole");
	int ascii = 1;
	for (size_t k = 0; k < wl; k++)
		ascii &= !((unsigned char)whole[k] & 0x80);
	CHECK(ascii && strstr(whole, "\\ud83d\\ude00") && strstr(whole, "\\ufffd") &&
		      strstr(whole, "\\u0001"),
	      "in ASCII, with surrogate pairs and U+FFFD");
	static const size_t steps[] = {1, 2, 3, 5, 7, 64, 1000, 39999};
	for (size_t k = 0; k < sizeof steps / sizeof *steps; k++) {
		cl = 0;
		int grew = 1;
		for (size_t at = 0; at < n;) {
			size_t to = tfs_zarr_name_cut(name, n, at + steps[k]);
			grew &= to > at && to <= n && to - at <= steps[k] + 3;
			if (tfs_zarr_name_part(name, at, to, &cut, &cl, &cc) != TFS_OK)
				break;
			at = to;
		}
		CHECK(grew && cl == wl && !memcmp(cut, whole, wl), "slices of %zu bytes make the whole",
		      steps[k]);
	}
	free(name);
	free(whole);
	free(cut);
}

/* ---- the store in a tree ---- */

static char *grow(size_t need)
{
	static char *s;
	char *n = realloc(s, need);
	if (n)
		s = n;
	return n;
}

/* Bytes [off, off + len) of node ni through its view. */
/* The node of inode ino: the tree's, or a generated entry's (kept until
 * the next call). */
static const struct tfs_node *node(const struct tfs_tree *t, uint64_t ino)
{
	static struct tfs_node tmp;
	return tfs_tree_node(t, ino, &tmp);
}

static int read_node(const struct tfs_tree *t, uint64_t ni, uint64_t off, size_t len, unsigned char *to)
{
	struct tfs_piece v[8];
	static char out[1 << 16];
	struct tfs_pieces p = {.v = v, .max = 8, .out = out, .cap = sizeof out, .grow = grow};
	if (tfs_node_pieces(t, node(t, ni), off, len, &p))
		return -1;
	size_t at = 0;
	for (unsigned k = 0; k < p.n; k++) {
		if (v[k].mem)
			memcpy(to + at, v[k].mem, v[k].len);
		else if (tfs_source_serve(v[k].src, to + at, v[k].len, v[k].off, v[k].limit))
			return -1;
		at += v[k].len;
	}
	return at == len ? 0 : -1;
}

/* The inode of a path, through generated directories too; 0 if none. */
static uint64_t walk(const struct tfs_tree *t, const char *path)
{
	char buf[256];
	uint64_t at = 1;
	snprintf(buf, sizeof buf, "%s", path);
	for (char *k = strtok(buf, "/"); k && at; k = strtok(NULL, "/"))
		at = at < t->nnodes && t->nodes[at].kind == TFS_NODE_DIR
			     ? tfs_tree_find(t, (uint32_t)at, k, strlen(k))
			     : 0;
	return at;
}

/* A model of one safetensors file in memory: the header hdr (hl bytes),
 * then dlen bytes of data; the file's bytes, to free after the model. */
static unsigned char *model_of(const char *hdr, size_t hl, const unsigned char *data, size_t dlen,
			       struct tfs_model *m)
{
	size_t len = 8 + hl + dlen;
	unsigned char *file = calloc(1, len);
	struct tfs_source *src;
	struct tfs_table h;
	struct tfs_diag d;
	struct tfs_parse_opts po = {0};
	if (!file)
		abort();
	for (int i = 0; i < 8; i++)
		file[i] = (unsigned char)((uint64_t)hl >> (8 * i));
	memcpy(file + 8, hdr, hl);
	memcpy(file + 8 + hl, data, dlen);
	if (tfs_source_open_mem(file, len, "mem", &src) || tfs_st_read(src, &po, &h, &d) ||
	    tfs_model_single(m, src, &h))
		abort();
	return file;
}

static void test_store(void)
{
	current = "store";
	/* a.b beside a.b.c (the array "b.tensor"), __zarr__ itself, a BF16
	 * tensor of 5 rows in slabs of 2, an F32 one of 3 rows of 2. */
	char hdr[1024];
	int hl = snprintf(hdr, sizeof hdr,
			  "{\"__metadata__\":{\"k\":\"v\"},"
			  "\"a.b\":{\"dtype\":\"F32\",\"shape\":[3,2],\"data_offsets\":[0,24]},"
			  "\"a.b.c\":{\"dtype\":\"BF16\",\"shape\":[5,2],\"data_offsets\":[24,44]},"
			  "\"__zarr__\":{\"dtype\":\"U8\",\"shape\":[],\"data_offsets\":[44,45]}}");
	unsigned char data[45];
	for (int i = 0; i < 45; i++)
		data[i] = (unsigned char)(i * 7 + 1);
	struct tfs_diag d;
	struct tfs_model m;
	unsigned char *file = model_of(hdr, (size_t)hl, data, sizeof data, &m);
	struct tfs_opts opts = {0};
	tfs_opts_add(&opts, "zarr", 4, "");
	tfs_opts_add(&opts, "zarr_chunk_size", 15, "18"); /* 8-byte rows: 2.25 -> 2 rows */
	struct tfs_tree_opts o = {.layout = TFS_LAYOUT_FLAT, .opts = &opts};
	struct tfs_tree tr;
	CHECK(tfs_tree_build(&m, &o, &tr, &d) == TFS_OK, "build: %s", d.msg);
	CHECK(walk(&tr, "%5F_zarr__") != 0 && walk(&tr, "__zarr__/.zgroup") != 0, "__zarr__ reserved");
	CHECK(walk(&tr, "__zarr__/__zarr__/0") != 0, "the tensor __zarr__ in the store");
	CHECK(walk(&tr, "__zarr__/a/.zgroup") && walk(&tr, "__zarr__/a/zarr.json") &&
		      walk(&tr, "__zarr__/a/b/.zgroup"),
	      "groups");
	CHECK(walk(&tr, "__zarr__/a/b.tensor/.zarray") && walk(&tr, "__zarr__/a/b.tensor/1.0") &&
		      !walk(&tr, "__zarr__/a/b.tensor/2.0"),
	      "array beside a group of its name");
	uint64_t c[3];
	for (int k = 0; k < 3; k++) {
		char p[64];
		snprintf(p, sizeof p, "__zarr__/a/b/c/%d.0", k);
		c[k] = walk(&tr, p);
	}
	CHECK(c[0] && c[1] && c[2] && !walk(&tr, "__zarr__/a/b/c/3.0"), "3 chunks");
	CHECK(c[2] && tfs_node_size(&tr, node(&tr, c[2])) == 16, "last chunk full size");
	unsigned char got[16];
	uint32_t want[4];
	for (int k = 0; k < 4; k++) /* rows 2, 3 of the BF16 tensor as float32 */
		want[k] = (uint32_t)(data[24 + 8 + 2 * k] | data[24 + 8 + 2 * k + 1] << 8) << 16;
	CHECK(c[1] && read_node(&tr, c[1], 0, 16, got) == 0 && !memcmp(got, want, 16), "chunk 1 decoded");
	want[0] = (uint32_t)(data[24 + 16] | data[24 + 17] << 8) << 16;
	want[1] = (uint32_t)(data[24 + 18] | data[24 + 19] << 8) << 16;
	want[2] = want[3] = 0;
	CHECK(c[2] && read_node(&tr, c[2], 0, 16, got) == 0 && !memcmp(got, want, 16),
	      "last chunk zero-filled");
	CHECK(c[2] && read_node(&tr, c[2], 6, 6, got) == 0 && !memcmp(got, (char *)want + 6, 6), "a range");
	/* F32: a range of the source itself, then zeros: no copy. */
	uint64_t f0 = walk(&tr, "__zarr__/a/b.tensor/1.0");
	struct tfs_piece v[4];
	static char out[64];
	struct tfs_pieces p = {.v = v, .max = 4, .out = out, .cap = sizeof out, .grow = grow};
	CHECK(f0 && tfs_node_pieces(&tr, node(&tr, f0), 0, 16, &p) == TFS_OK && p.n == 2 &&
		      v[0].mem == NULL && v[0].off == 8 + (uint64_t)hl + 16 && v[0].len == 8 && v[1].mem &&
		      v[1].len == 8,
	      "source piece, then zeros");
	uint64_t za = walk(&tr, "__zarr__/.zattrs");
	char text[64] = {0};
	uint64_t zl = za ? tfs_node_size(&tr, node(&tr, za)) : 0;
	CHECK(zl && zl < sizeof text && read_node(&tr, za, 0, zl, (unsigned char *)text) == 0 &&
		      !strcmp(text, "{\n  \"k\": \"v\"\n}\n"),
	      "root attributes: __metadata__ (%s)", text);
	tfs_tree_free(&tr);

	/* A bad chunk size: one line. */
	opts.val[1][0] = '0';
	opts.val[1][1] = 0;
	CHECK(tfs_views_check(&opts, &d) == TFS_ERR_INVAL && strstr(d.msg, "zarr_chunk_size"), "0: %s",
	      d.msg);
	/* Without -o zarr, no store, and the tensor __zarr__ keeps its name. */
	struct tfs_tree_opts plain = {.layout = TFS_LAYOUT_FLAT};
	CHECK(tfs_tree_build(&m, &plain, &tr, &d) == TFS_OK && walk(&tr, "__zarr__") &&
		      tr.nodes[walk(&tr, "__zarr__")].kind == TFS_NODE_TENSOR,
	      "no -o zarr");
	tfs_tree_free(&tr);
	tfs_opts_free(&opts);
	tfs_model_free(&m);
	free(file);
}

/* The tree layout: a directory __zarr__ of the root (tensors __zarr__.x
 * and __zarr__) is escaped, the tensor __zarr__ gets ".tensor". */
static void test_tree_layout(void)
{
	current = "tree layout";
	const char *hdr = "{\"__zarr__.x\":{\"dtype\":\"U8\",\"shape\":[1],\"data_offsets\":[0,1]},"
			  "\"__zarr__\":{\"dtype\":\"U8\",\"shape\":[1],\"data_offsets\":[1,2]}}";
	struct tfs_diag d;
	struct tfs_model m;
	unsigned char *file = model_of(hdr, strlen(hdr), (const unsigned char *)"\0", 2, &m);
	struct tfs_opts opts = {0};
	tfs_opts_add(&opts, "zarr", 4, "");
	struct tfs_tree_opts o = {.layout = TFS_LAYOUT_TREE, .opts = &opts};
	struct tfs_tree tr;
	CHECK(tfs_tree_build(&m, &o, &tr, &d) == TFS_OK, "build: %s", d.msg);
	CHECK(walk(&tr, "%5F_zarr__/x") && walk(&tr, "__zarr__.tensor") && walk(&tr, "__zarr__/.zgroup"),
	      "escaped");
	CHECK(walk(&tr, "__zarr__/__zarr__/x/0") && walk(&tr, "__zarr__/__zarr__.tensor/0"), "in the store");
	tfs_tree_free(&tr);
	tfs_opts_free(&opts);
	tfs_model_free(&m);
	free(file);
}

static uint64_t same_hash(const char *name, size_t len)
{
	(void)name;
	(void)len;
	return 42;
}

/* Long names whose hashed forms meet (a forced hash): the second array
 * gets "-1", both are found, each holds its own tensor. */
static void test_hashed_names(void)
{
	current = "hashed names";
	char hdr[2048], n1[300], n2[300];
	memset(n1, 'x', 299);
	n1[299] = 0;
	memcpy(n2, n1, sizeof n1);
	n1[298] = '1';
	n2[298] = '2';
	int hl = snprintf(hdr, sizeof hdr,
			  "{\"g.%s\":{\"dtype\":\"U8\",\"shape\":[1],\"data_offsets\":[0,1]},"
			  "\"g.%s\":{\"dtype\":\"U8\",\"shape\":[1],\"data_offsets\":[1,2]}}",
			  n1, n2);
	struct tfs_diag d;
	struct tfs_model m;
	unsigned char *file = model_of(hdr, (size_t)hl, (const unsigned char *)"AB", 2, &m);
	struct tfs_opts opts = {0};
	tfs_opts_add(&opts, "zarr", 4, "");
	struct tfs_tree_opts o = {.layout = TFS_LAYOUT_FLAT, .opts = &opts};
	struct tfs_tree tr;
	tfs_name_hash_hook = same_hash;
	CHECK(tfs_tree_build(&m, &o, &tr, &d) == TFS_OK, "build: %s", d.msg);
	tfs_name_hash_hook = NULL;
	uint32_t g = (uint32_t)walk(&tr, "__zarr__/g");
	char seen[2] = {0, 0};
	int n = 0;
	for (uint32_t k = 0; g && k < tr.nodes[g].count; k++) {
		const struct tfs_node *a = &tr.nodes[tr.children[tr.nodes[g].first + k]];
		if (a->kind != TFS_NODE_DIR)
			continue;
		n++;
		CHECK(strstr(a->fname, "%~") != NULL, "hashed: %s", a->fname);
		uint64_t c = tfs_tree_find(&tr, tr.children[tr.nodes[g].first + k], "0", 1);
		unsigned char byte = 0;
		CHECK(c && read_node(&tr, c, 0, 1, &byte) == 0 && (byte == 'A' || byte == 'B'), "chunk");
		seen[byte == 'B'] = 1;
		size_t fl = a->fname_len;
		if (fl > 2 && !strcmp(a->fname + fl - 2, "-1"))
			n += 10;
	}
	CHECK(n == 12 && seen[0] && seen[1], "two arrays, one with -1 (%d)", n);
	tfs_tree_free(&tr);
	tfs_opts_free(&opts);
	tfs_model_free(&m);
	free(file);
}

int main(int argc, char **argv)
{
	check_args(argc, argv);
	RUN(test_geometry);
	RUN(test_span);
	RUN(test_documents);
	RUN(test_name_slices);
	RUN(test_store);
	RUN(test_tree_layout);
	RUN(test_hashed_names);
	return check_report();
}
