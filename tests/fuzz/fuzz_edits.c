/* libFuzzer target for the -o edits=FILE parser and its application. The
 * first byte picks the table the edits go to (a small GGUF with typed
 * pairs, or a safetensors file's string pairs); the rest is the edits
 * file. Besides crashes, leaks and UB, it checks what an accepted edit
 * promises: __metadata__.json is JSON and UTF-8, a refusal is one line,
 * and the generated files made from the edited table (model.gguf, or
 * model.safetensors) are files our strict readers accept, carrying the
 * edited metadata and the tensors' bytes; and that nothing is changed
 * without a word: an integer past 64 bits, U+0000 or bytes that are not
 * UTF-8 are refused, and the GGUF's key of LONG_KEY bytes (past any fixed
 * buffer) is set or deleted exactly (the corpus holds edits of it). */
#include <json.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "model/edits.h"
#include "core/kv.h"
#include "core/utf8.h"
#include "model/model.h"
#include "formats/gguf.h"
#include "formats/safetensors.h"
#include "fuzz_check.h"
#include "views/view.h"

static size_t put(unsigned char *b, size_t at, uint64_t v, unsigned n)
{
	for (unsigned i = 0; i < n; i++)
		b[at + i] = (unsigned char)(v >> (8 * i));
	return at + n;
}

static size_t put_s(unsigned char *b, size_t at, const char *s)
{
	at = put(b, at, strlen(s), 8);
	memcpy(b + at, s, strlen(s));
	return at + strlen(s);
}

/* "x.long.kkk...k", LONG_KEY bytes: past the 4096 bytes a key once had. */
#define LONG_KEY 4100
static char long_key[LONG_KEY + 1];

static void make_long_key(void)
{
	memset(long_key, 'k', LONG_KEY);
	memcpy(long_key, "x.long.", 7);
	long_key[LONG_KEY] = 0;
}

/* A GGUF with pairs of several types, one with a long key, and two F32
 * tensors. */
static size_t make_gguf(unsigned char *b)
{
	size_t at = 0;
	memcpy(b, "GGUF", 4);
	at = put(b, 4, 3, 4);
	at = put(b, at, 2, 8);
	at = put(b, at, 6, 8);
	at = put_s(b, at, long_key);
	at = put(b, at, 10, 4); /* UINT64 */
	at = put(b, at, 0x1234567, 8);
	at = put_s(b, at, "general.alignment");
	at = put(b, at, 4, 4);
	at = put(b, at, 32, 4);
	at = put_s(b, at, "general.architecture");
	at = put(b, at, 8, 4);
	at = put_s(b, at, "llama");
	at = put_s(b, at, "llama.context_length");
	at = put(b, at, 4, 4);
	at = put(b, at, 4096, 4);
	at = put_s(b, at, "x.scores");
	at = put(b, at, 9, 4);
	at = put(b, at, 6, 4);
	at = put(b, at, 2, 8);
	at = put(b, at, 0x3f000000, 4);
	at = put(b, at, 0xbf800000, 4);
	at = put_s(b, at, "tokenizer.ggml.tokens");
	at = put(b, at, 9, 4);
	at = put(b, at, 8, 4);
	at = put(b, at, 2, 8);
	at = put_s(b, at, "<s>");
	at = put_s(b, at, "a");
	for (int k = 0; k < 2; k++) {
		at = put_s(b, at, k ? "b" : "a");
		at = put(b, at, 1, 4);
		at = put(b, at, 3, 8);
		at = put(b, at, 0, 4);
		at = put(b, at, k ? 32 : 0, 8);
	}
	while (at % 32)
		b[at++] = 0;
	for (int k = 0; k < 64; k++)
		b[at++] = (unsigned char)(k * 7);
	return at;
}

static size_t make_st(unsigned char *b)
{
	const char *h = "{\"__metadata__\":{\"format\":\"pt\",\"x\":\"y\"},"
			"\"w\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]}}";
	size_t n = strlen(h), at = put(b, 0, n, 8);
	memcpy(b + at, h, n);
	at += n;
	for (int k = 0; k < 8; k++)
		b[at++] = (unsigned char)k;
	return at;
}

static void check_generated(const struct tfs_model *m, int gguf)
{
	struct tfs_tree tr;
	struct tfs_diag d;
	char *ek[] = {"export"}, *ev[] = {""};
	struct tfs_opts eo = {ek, ev, 1};
	struct tfs_tree_opts to = {.layout = TFS_LAYOUT_FLAT, .opts = &eo};
	if (tfs_tree_build(m, &to, &tr, &d) != TFS_OK)
		abort();
	for (uint32_t i = 2; i < tr.nnodes; i++) {
		const struct tfs_node *nd = &tr.nodes[i];
		if (nd->kind != (gguf ? tfs_view_kind("gguf") : tfs_view_kind("export")))
			continue;
		uint64_t size = tfs_node_size(&tr, nd);
		if (!size)
			continue; /* a header past safetensors' limit: not at this size */
		unsigned char *whole = fuzz_read_node(&tr, nd, size, 0);
		struct tfs_source *src;
		struct tfs_table x;
		struct tfs_parse_opts strict = {.flags = TFS_PARSE_STRICT};
		if (tfs_source_open_mem(whole, size, "gen", &src))
			abort();
		tfs_err e = gguf ? tfs_gguf_read(src, &strict, &x, &d) : tfs_st_read(src, &strict, &x, &d);
		if (e)
			abort(); /* a generated file our own reader refuses */
		if (x.n != m->shards[0].h.n)
			abort();
		if (gguf) {
			char *a, *b;
			size_t al, bl;
			if (tfs_table_meta_json(&m->shards[0].h, &a, &al) ||
			    tfs_table_meta_json(&x, &b, &bl) || al != bl || memcmp(a, b, al))
				abort(); /* the edits, as __metadata__.json shows them */
			free(a);
			free(b);
		}
		tfs_table_free(&x);
		tfs_source_close(src);
		free(whole);
	}
	tfs_tree_free(&tr);
}

/* Whether the text holds, outside its strings, an integer literal that
 * no 64-bit integer holds, or inside one the escape \u0000: what json-c
 * would saturate or cut without a word. */
static int has_unrepresentable(const char *t, size_t n)
{
	int in_str = 0;
	for (size_t i = 0; i < n; i++) {
		if (in_str) {
			if (t[i] == '\\' && i + 1 < n) {
				if (t[i + 1] == 'u' && i + 5 < n && memcmp(t + i + 2, "0000", 4) == 0)
					return 1;
				i++;
			} else if (t[i] == '"') {
				in_str = 0;
			}
			continue;
		}
		if (t[i] == '"') {
			in_str = 1;
			continue;
		}
		if (!(t[i] == '-' || (t[i] >= '0' && t[i] <= '9')) ||
		    (i && ((t[i - 1] >= '0' && t[i - 1] <= '9') || strchr(".eE+-", t[i - 1]))))
			continue;
		size_t j = i + (t[i] == '-');
		uint64_t v = 0;
		int over = 0;
		for (; j < n && t[j] >= '0' && t[j] <= '9'; j++) {
			unsigned dig = (unsigned)(t[j] - '0');
			over |= v > (UINT64_MAX - dig) / 10;
			v = over ? 0 : v * 10 + dig;
		}
		if (j < n && strchr(".eE", t[j]))
			continue; /* a double */
		if (over || (t[i] == '-' && v > (uint64_t)INT64_MAX + 1))
			return 1;
		i = j - 1;
	}
	return 0;
}

/* The long key's value after accepted edits: deleted when they delete
 * it, their integer when they set one, else as it was. */
static void check_long_key(const char *edits, size_t n, const struct tfs_table *h)
{
	json_tokener *tok = json_tokener_new();
	json_object *obj = tok ? json_tokener_parse_ex(tok, edits, (int)n) : NULL, *v = NULL;
	json_tokener_free(tok);
	int named = obj && json_object_is_type(obj, json_type_object) &&
		    json_object_object_get_ex(obj, long_key, &v);
	struct tfs_kv kv;
	size_t pos = 0;
	int found = 0;
	uint64_t val = 0;
	while (tfs_kvs_next(&h->kv, &pos, &kv))
		if (kv.klen == LONG_KEY && memcmp(kv.key, long_key, LONG_KEY) == 0)
			found = tfs_kv_uint(&kv, &val) ? 1 : 2;
	if (named && !v && found)
		abort(); /* deleted, yet there */
	if (named && v && json_object_is_type(v, json_type_int) &&
	    (found != 1 || val != json_object_get_uint64(v)))
		abort(); /* set, yet not to its value */
	if (!named && (found != 1 || val != 0x1234567))
		abort();
	json_object_put(obj);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (size < 1)
		return 0;
	int gguf = data[0] & 1;
	static unsigned char file[16384];
	if (!long_key[0])
		make_long_key();
	size_t flen = gguf ? make_gguf(file) : make_st(file);
	struct tfs_source *src;
	struct tfs_table h;
	struct tfs_diag d;
	struct tfs_parse_opts o = {.flags = TFS_PARSE_STRICT};
	if (tfs_source_open_mem(file, flen, "base", &src))
		return 0;
	if ((gguf ? tfs_gguf_read(src, &o, &h, &d) : tfs_st_read(src, &o, &h, &d)) != TFS_OK)
		abort();
	struct tfs_model m;
	if (tfs_model_single(&m, src, &h))
		abort();
	struct tfs_edits *ed = NULL;
	tfs_err e = tfs_edits_parse((const char *)data + 1, size - 1, "fuzz.json", &ed, &d);
	if (!e)
		e = tfs_edits_apply(ed, &m.shards[0].h, &d);
	const char *text = (const char *)data + 1;
	if (e) {
		if (!memchr(d.msg, 0, sizeof d.msg) || strchr(d.msg, '\n') || !strstr(d.msg, "fuzz.json"))
			abort(); /* one line naming the file */
	} else {
		char *js;
		size_t jl;
		if (has_unrepresentable(text, size - 1) ||
		    tfs_utf8_check((const unsigned char *)text, size - 1) != size - 1)
			abort(); /* taken, and changed without a word */
		if (gguf)
			check_long_key(text, size - 1, &m.shards[0].h);
		if (tfs_table_meta_json(&m.shards[0].h, &js, &jl))
			abort();
		if (tfs_utf8_check((const unsigned char *)js, jl) != jl)
			abort(); /* __metadata__.json is UTF-8 */
		json_object *obj = json_tokener_parse(js);
		if (!obj)
			abort();
		json_object_put(obj);
		free(js);
		check_generated(&m, gguf);
	}
	tfs_edits_free(ed);
	tfs_model_free(&m);
	return 0;
}
