/* libFuzzer target for the -o edits=FILE parser and its application. The
 * first byte picks the table the edits go to (a small GGUF with typed
 * pairs, or a safetensors file's string pairs); the rest is the edits
 * file. Besides crashes, leaks and UB, it checks what an accepted edit
 * promises: __metadata__.json is JSON, a refusal is one line, and the
 * generated files made from the edited table (model.gguf, or
 * model.safetensors) are files our strict readers accept, carrying the
 * edited metadata and the tensors' bytes. */
#include <json.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "core/edits.h"
#include "core/model.h"
#include "formats/gguf.h"
#include "formats/safetensors.h"
#include "fuzz_check.h"

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

/* A GGUF with pairs of several types and two F32 tensors. */
static size_t make_gguf(unsigned char *b)
{
	size_t at = 0;
	memcpy(b, "GGUF", 4);
	at = put(b, 4, 3, 4);
	at = put(b, at, 2, 8);
	at = put(b, at, 5, 8);
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
	struct tfs_tree_opts to = {.layout = TFS_LAYOUT_FLAT, .export = 1};
	if (tfs_tree_build(m, &to, &tr, &d) != TFS_OK)
		abort();
	for (uint32_t i = 2; i < tr.nnodes; i++) {
		const struct tfs_node *nd = &tr.nodes[i];
		if (nd->kind != (gguf ? TFS_NODE_GGUF : TFS_NODE_EXPORT))
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
			if (tfs_table_meta_json(&m->shards[0].h, &a, &al) || tfs_table_meta_json(&x, &b, &bl) ||
			    al != bl || memcmp(a, b, al))
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

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (size < 1)
		return 0;
	int gguf = data[0] & 1;
	static unsigned char file[4096];
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
	if (e) {
		if (!memchr(d.msg, 0, sizeof d.msg) || strchr(d.msg, '\n') || !strstr(d.msg, "fuzz.json"))
			abort(); /* one line naming the file */
	} else {
		char *js;
		size_t jl;
		if (tfs_table_meta_json(&m.shards[0].h, &js, &jl))
			abort();
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
