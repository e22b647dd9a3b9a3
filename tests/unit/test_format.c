/* Unit tests of the format layer: every rule of
 * shared/docs/safetensors-format.md with valid and invalid inputs, the name
 * mapping, the inode table and the metadata JSON. No FUSE here. */
#include <json.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "model/index.h"
#include "core/jscan.h"
#include "formats/safetensors.h"
#include "core/names.h"
#include "views/tree.h"

#include "check.h"

/* ---- building files in memory ---- */

struct file {
	unsigned char *p;
	size_t len;
};

/* 8-byte little-endian N, the header bytes, then `data` zero bytes. */
static struct file mkfile_n(const char *hdr, size_t hlen, size_t data)
{
	struct file f;
	f.len = 8 + hlen + data;
	f.p = calloc(1, f.len ? f.len : 1);
	for (int i = 0; i < 8; i++)
		f.p[i] = (unsigned char)((uint64_t)hlen >> (8 * i));
	memcpy(f.p + 8, hdr, hlen);
	return f;
}

static int warnings;
static void count_warn(void *ctx, const char *msg)
{
	(void)ctx;
	(void)msg;
	warnings++;
}

static tfs_err parse_file(struct file f, unsigned flags, struct tfs_table *h, struct tfs_diag *d)
{
	struct tfs_source *src;
	struct tfs_parse_opts o = {.flags = flags, .warn = count_warn};
	if (tfs_source_open_mem(f.p, f.len, "mem", &src))
		abort();
	d->msg[0] = 0;
	tfs_err e = tfs_st_read(src, &o, h, d);
	tfs_source_close(src);
	return e;
}

/* Parses a header with `data` bytes of data and returns the verdict. When
 * the parser accepts, json-c must accept the same header text too. */
static tfs_err verdict_flags(const char *hdr, size_t hlen, size_t data, unsigned flags, char *msg)
{
	struct file f = mkfile_n(hdr, hlen, data);
	struct tfs_table h;
	struct tfs_diag d;
	tfs_err e = parse_file(f, flags, &h, &d);
	if (msg)
		strcpy(msg, d.msg);
	if (e == TFS_OK) {
		struct json_tokener *tok = json_tokener_new_ex(TFS_NESTING_MAX + 1);
		json_tokener_set_flags(tok, JSON_TOKENER_STRICT);
		json_object *o = json_tokener_parse_ex(tok, hdr, (int)hlen);
		/* json-c stops at the value; trailing padding is ours to allow. */
		CHECK(o != NULL || json_tokener_get_error(tok) == json_tokener_continue || hlen > 100000,
		      "accepted a header json-c refuses: %.80s", hdr);
		json_object_put(o);
		json_tokener_free(tok);
		tfs_table_free(&h);
	}
	free(f.p);
	return e;
}

static tfs_err verdict(const char *hdr, size_t data)
{
	return verdict_flags(hdr, strlen(hdr), data, 0, NULL);
}

#define ACCEPT(hdr, data) CHECK(verdict(hdr, data) == TFS_OK, "should accept: %s", hdr)
#define REFUSE(hdr, data) CHECK(verdict(hdr, data) == TFS_ERR_FORMAT, "should refuse: %s", hdr)

static void refuse_msg(const char *hdr, size_t data, const char *want)
{
	char msg[TFS_DIAG_MAX];
	tfs_err e = verdict_flags(hdr, strlen(hdr), data, 0, msg);
	CHECK(e == TFS_ERR_FORMAT, "should refuse: %s", hdr);
	CHECK(strstr(msg, want) != NULL, "message '%s' lacks '%s'", msg, want);
}

/* A flat tree over one parsed header; the model takes the header. */
static tfs_err tree_of(struct tfs_table *h, struct tfs_model *m, struct tfs_tree *tr, struct tfs_diag *d)
{
	struct tfs_source *src;
	if (tfs_source_open_mem("", 0, "mem", &src) || tfs_model_single(m, src, h))
		abort();
	struct tfs_tree_opts o = {.layout = TFS_LAYOUT_FLAT};
	tfs_err e = tfs_tree_build(m, &o, tr, d);
	return e;
}

#define T1(extra) "{\"t\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]" extra "}}"

/* ---- §1 reading order ---- */

static void test_prefix(void)
{
	current = "prefix";
	struct tfs_table h;
	struct tfs_diag d;
	struct file f;

	f.p = calloc(1, 8);
	for (size_t n = 0; n < 8; n++) {
		f.len = n;
		CHECK(parse_file(f, 0, &h, &d) == TFS_ERR_FORMAT, "file of %zu bytes", n);
	}
	free(f.p);

	/* N over the cap is refused before it is compared with the size. */
	f = mkfile_n("{}", 2, 0);
	uint64_t big = 100000001;
	for (int i = 0; i < 8; i++)
		f.p[i] = (unsigned char)(big >> (8 * i));
	CHECK(parse_file(f, 0, &h, &d) == TFS_ERR_FORMAT, "N = 100000001");
	CHECK(strstr(d.msg, "100000000") != NULL, "msg: %s", d.msg);
	free(f.p);

	/* N larger than the file. */
	f = mkfile_n("{}", 2, 0);
	f.p[0] = 3;
	CHECK(parse_file(f, 0, &h, &d) == TFS_ERR_FORMAT, "N past end");
	CHECK(strstr(d.msg, "truncated") != NULL, "msg: %s", d.msg);
	free(f.p);

	/* N exactly at the cap, padded with spaces. */
	size_t n = 100000000;
	char *hdr = malloc(n);
	memset(hdr, ' ', n);
	memcpy(hdr, "{}", 2);
	CHECK(verdict_flags(hdr, n, 0, 0, NULL) == TFS_OK, "N = 100000000 accepted");
	free(hdr);
}

static void test_sniff(void)
{
	current = "sniff";
	struct tfs_table h;
	struct tfs_diag d;
	const char *lfs = "version https://git-lfs.github.com/spec/v1\noid sha256:4d7a\nsize 12345\n";
	struct file f = {(unsigned char *)strdup(lfs), strlen(lfs)};
	CHECK(parse_file(f, 0, &h, &d) == TFS_ERR_FORMAT, "lfs");
	CHECK(strstr(d.msg, "Git LFS pointer") != NULL, "msg: %s", d.msg);
	free(f.p);

	const char *html = "<!DOCTYPE html><html><body>404</body></html>";
	f.p = (unsigned char *)strdup(html);
	f.len = strlen(html);
	CHECK(parse_file(f, 0, &h, &d) == TFS_ERR_FORMAT, "html");
	CHECK(strstr(d.msg, "HTML") != NULL, "msg: %s", d.msg);
	free(f.p);

	f.p = calloc(1, 16);
	f.len = 0;
	CHECK(parse_file(f, 0, &h, &d) == TFS_ERR_FORMAT && strstr(d.msg, "empty"), "empty: %s", d.msg);
	free(f.p);

	/* A truncated download: the data ends early. */
	const char *hd = T1("");
	char msg[TFS_DIAG_MAX];
	CHECK(verdict_flags(hd, strlen(hd), 2, 0, msg) == TFS_ERR_FORMAT, "short data");
	CHECK(strstr(msg, "truncated") && strstr(msg, "2 bytes missing"), "msg: %s", msg);
}

static void test_utf8(void)
{
	current = "utf8";
	ACCEPT("{\"\xc3\xa9\":{\"dtype\":\"U8\",\"shape\":[1],\"data_offsets\":[0,1]}}", 1);
	ACCEPT("{\"\xf0\x9f\x98\x80\":{\"dtype\":\"U8\",\"shape\":[1],\"data_offsets\":[0,1]}}", 1);
	ACCEPT("{\"\xf4\x8f\xbf\xbf\":{\"dtype\":\"U8\",\"shape\":[1],\"data_offsets\":[0,1]}}", 1);
	REFUSE("{\"\xc0\xaf\":{\"dtype\":\"U8\",\"shape\":[1],\"data_offsets\":[0,1]}}", 1);
	REFUSE("{\"\xe0\x80\xaf\":{\"dtype\":\"U8\",\"shape\":[1],\"data_offsets\":[0,1]}}", 1);
	REFUSE("{\"\xed\xa0\x80\":{\"dtype\":\"U8\",\"shape\":[1],\"data_offsets\":[0,1]}}", 1);
	REFUSE("{\"\xf4\x90\x80\x80\":{\"dtype\":\"U8\",\"shape\":[1],\"data_offsets\":[0,1]}}", 1);
	REFUSE("{\"\xff\":{\"dtype\":\"U8\",\"shape\":[1],\"data_offsets\":[0,1]}}", 1);
	REFUSE("{\"\xc3\":{\"dtype\":\"U8\",\"shape\":[1],\"data_offsets\":[0,1]}}", 1);
	/* Invalid UTF-8 in the padding is refused too. */
	CHECK(verdict_flags("{}  \xff", 5, 0, 0, NULL) == TFS_ERR_FORMAT, "bad padding");
	CHECK(tfs_utf8_check((const unsigned char *)"abcdefghij\xe2\x82\xac", 13) == 13, "euro");
	CHECK(tfs_utf8_check((const unsigned char *)"abcdefghij\xe2\x82", 12) == 10, "cut");
}

/* ---- §2 header JSON ---- */

static void test_whitespace(void)
{
	current = "whitespace";
	ACCEPT(" \t\r\n{}", 0);
	ACCEPT("{}  \t\r\n  ", 0);
	ACCEPT("\n" T1("") "\n   ", 4);
	CHECK(verdict_flags("{}\0", 3, 0, 0, NULL) == TFS_ERR_FORMAT, "NUL padding");
	REFUSE("{}\f", 0);
	REFUSE("\f{}", 0);
	REFUSE("\xef\xbb\xbf{}", 0);
	REFUSE("\xc2\xa0{}", 0);
	REFUSE("{}{}", 0);
	REFUSE("{} x", 0);
	REFUSE("", 0);
	REFUSE("   ", 0);
}

static void test_syntax(void)
{
	current = "syntax";
	REFUSE("{/*c*/}", 0);
	REFUSE("{\"a\":1,}", 0);
	REFUSE(T1(",\"x\":[1,]"), 4);
	REFUSE("{'t':{}}", 0);
	REFUSE(T1(",\"x\":NaN"), 4);
	REFUSE(T1(",\"x\":Infinity"), 4);
	REFUSE(T1(",\"x\":-Infinity"), 4);
	REFUSE(T1(",\"x\":01"), 4);
	REFUSE(T1(",\"x\":1."), 4);
	REFUSE(T1(",\"x\":.5"), 4);
	REFUSE(T1(",\"x\":1e"), 4);
	REFUSE(T1(",\"x\":+1"), 4);
	REFUSE(T1(",\"x\":tru"), 4);
	REFUSE(T1(",\"x\":nul"), 4);
	REFUSE(T1(",\"x\":\"a\x01\""), 4);
	REFUSE(T1(",\"x\":\"a\tb\""), 4);
	REFUSE(T1(",\"x\":\"\\x\""), 4);
	REFUSE(T1(",\"x\":\"\\u12\""), 4);
	REFUSE(T1(",\"x\":\"\\u12G4\""), 4);
	REFUSE(T1(",\"x\":\"abc"), 4);
	REFUSE("{\"t\"", 0);
	REFUSE("{\"t\":", 0);
	REFUSE("{\"t\" {}}", 0);
	REFUSE("{t:1}", 0);
	REFUSE("[]", 0);
	REFUSE("\"x\"", 0);
	REFUSE("null", 0);
	REFUSE("1", 0);
	ACCEPT(T1(",\"x\":{\"y\":[true,false,null,\"s\",-1.5e-3,0,{}]}"), 4);
	ACCEPT(T1(",\"x\":\"\\\"\\\\\\/\\b\\f\\n\\r\\t\\u00e9\""), 4);
}

static void test_escapes(void)
{
	current = "escapes";
	char msg[TFS_DIAG_MAX];
	struct file f;
	struct tfs_table h;
	struct tfs_diag d;

	/* Keys compare after unescaping. */
	const char *hd =
		"{\"\\u0061\":{\"\\u0064type\":\"F\\u0033\\u0032\",\"shape\":[1],\"data_offsets\":[0,4]}}";
	f = mkfile_n(hd, strlen(hd), 4);
	CHECK(parse_file(f, 0, &h, &d) == TFS_OK, "escaped keys: %s", d.msg);
	CHECK(h.n == 1 && h.t[0].name_len == 1 && tfs_tensor_name(&h, &h.t[0])[0] == 'a', "name a");
	CHECK(h.t[0].dtype == TFS_DT_F32, "dtype F32");
	tfs_table_free(&h);
	free(f.p);

	hd = "{\"\\u005f_metadata__\":{\"k\":\"v\"}}";
	f = mkfile_n(hd, strlen(hd), 0);
	CHECK(parse_file(f, 0, &h, &d) == TFS_OK, "escaped __metadata__: %s", d.msg);
	CHECK(h.n == 0 && h.has_metadata && h.nmeta == 1, "it is the metadata");
	tfs_table_free(&h);
	free(f.p);

	/* Surrogates: pairs join, lone ones are refused anywhere. */
	hd = "{\"\\ud83d\\ude00\\u0000x\":{\"dtype\":\"U8\",\"shape\":[1],\"data_offsets\":[0,1]}}";
	f = mkfile_n(hd, strlen(hd), 1);
	CHECK(parse_file(f, 0, &h, &d) == TFS_OK, "pair: %s", d.msg);
	CHECK(h.n == 1 && h.t[0].name_len == 6 &&
		      memcmp(tfs_tensor_name(&h, &h.t[0]), "\xf0\x9f\x98\x80\0x", 6) == 0,
	      "pair and NUL decoded");
	tfs_table_free(&h);
	free(f.p);

	REFUSE("{\"\\ud800\":{\"dtype\":\"U8\",\"shape\":[1],\"data_offsets\":[0,1]}}", 1);
	REFUSE("{\"\\udc00\":{\"dtype\":\"U8\",\"shape\":[1],\"data_offsets\":[0,1]}}", 1);
	REFUSE("{\"\\ud800\\u0041\":{\"dtype\":\"U8\",\"shape\":[1],\"data_offsets\":[0,1]}}", 1);
	REFUSE("{\"\\ud800x\":{\"dtype\":\"U8\",\"shape\":[1],\"data_offsets\":[0,1]}}", 1);
	REFUSE(T1(",\"ignored\":\"\\udfff\""), 4);
	REFUSE("{\"__metadata__\":{\"k\":\"\\ud801\"}}", 0);
	CHECK(verdict_flags(T1(",\"x\":\"\\ud800\""), strlen(T1(",\"x\":\"\\ud800\"")), 4, 0, msg) ==
			      TFS_ERR_FORMAT &&
		      strstr(msg, "surrogate"),
	      "msg: %s", msg);
}

static void nest(char *out, int depth_in_ignored)
{
	/* top object (1) + tensor object (2) + the ignored field's levels */
	strcpy(out, "{\"t\":{\"dtype\":\"U8\",\"shape\":[1],\"data_offsets\":[0,1],\"x\":");
	for (int i = 0; i < depth_in_ignored; i++)
		strcat(out, "[");
	for (int i = 0; i < depth_in_ignored; i++)
		strcat(out, "]");
	strcat(out, "}}");
}

static void test_nesting(void)
{
	current = "nesting";
	char buf[1024];
	nest(buf, 125); /* 127 levels in all */
	CHECK(verdict(buf, 1) == TFS_OK, "127 levels accepted");
	nest(buf, 126); /* 128 */
	CHECK(verdict(buf, 1) == TFS_ERR_FORMAT, "128 levels refused");
	/* Nesting inside __metadata__ is refused anyway (values are strings). */
	REFUSE("{\"__metadata__\":{\"k\":[]}}", 0);
}

static void test_numbers(void)
{
	current = "numbers";
	REFUSE(T1(",\"x\":1e400"), 4);
	REFUSE(T1(",\"x\":-1e400"), 4);
	REFUSE(T1(",\"x\":1.7976931348623159e308"), 4);
	ACCEPT(T1(",\"x\":1.7976931348623157e308"), 4);
	ACCEPT(T1(",\"x\":1e-400"), 4);
	ACCEPT(T1(",\"x\":123456789012345678901234567890"), 4);
	ACCEPT(T1(",\"x\":-123456789012345678901234567890"), 4);
	ACCEPT(T1(",\"x\":-0"), 4);
	ACCEPT(T1(",\"x\":0.0"), 4);
	ACCEPT(T1(",\"x\":1E+2"), 4);
	/* 400 digits overflow f64 even as an integer. */
	char buf[1024];
	strcpy(buf, "{\"t\":{\"dtype\":\"U8\",\"shape\":[1],\"data_offsets\":[0,1],\"x\":");
	for (int i = 0; i < 400; i++)
		strcat(buf, "9");
	strcat(buf, "}}");
	REFUSE(buf, 1);
}

static void test_metadata(void)
{
	current = "metadata";
	struct file f;
	struct tfs_table h;
	struct tfs_diag d;

	ACCEPT("{\"__metadata__\":null}", 0);
	ACCEPT("{\"__metadata__\":{}}", 0);
	ACCEPT("{\"__metadata__\":{\"a\":\"b\",\"c\":\"\"}}", 0);
	REFUSE("{\"__metadata__\":{\"a\":\"b\"},\"__metadata__\":{\"a\":\"b\"}}", 0);
	REFUSE("{\"__metadata__\":null,\"__metadata__\":null}", 0);
	REFUSE("{\"__metadata__\":{\"a\":1}}", 0);
	REFUSE("{\"__metadata__\":{\"a\":null}}", 0);
	REFUSE("{\"__metadata__\":{\"a\":{}}}", 0);
	REFUSE("{\"__metadata__\":[]}", 0);
	REFUSE("{\"__metadata__\":\"x\"}", 0);
	REFUSE("{\"__metadata__\":1}", 0);
	REFUSE("{\"__metadata__\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]}}", 4);

	/* Duplicate keys: last value, first place. */
	const char *hd = "{\"__metadata__\":{\"a\":\"1\",\"b\":\"2\",\"a\":\"3\"}}";
	f = mkfile_n(hd, strlen(hd), 0);
	CHECK(parse_file(f, 0, &h, &d) == TFS_OK, "dup meta: %s", d.msg);
	char *js;
	size_t jl;
	CHECK(tfs_table_meta_json(&h, &js, &jl) == TFS_OK, "meta json");
	CHECK(strcmp(js, "{\n  \"a\": \"3\",\n  \"b\": \"2\"\n}\n") == 0, "got: %s", js);
	free(js);
	tfs_table_free(&h);
	free(f.p);

	/* null and absent both give {}. */
	hd = "{\"__metadata__\":null}";
	f = mkfile_n(hd, strlen(hd), 0);
	CHECK(parse_file(f, 0, &h, &d) == TFS_OK && !h.has_metadata, "null is absent");
	CHECK(tfs_table_meta_json(&h, &js, &jl) == TFS_OK && strcmp(js, "{}\n") == 0, "null -> {}");
	free(js);
	tfs_table_free(&h);
	free(f.p);

	/* Escapes survive the trip: control characters, quotes, U+0000, and
	 * the result parses back with json-c to the same values. */
	hd = "{\"__metadata__\":{\"k\\u0000ey\":\"v\\n\\\"\\u0001\\u00e9/\",\"x\":\"{\\\"j\\\": 1}\"}}";
	f = mkfile_n(hd, strlen(hd), 0);
	CHECK(parse_file(f, 0, &h, &d) == TFS_OK, "escaped meta: %s", d.msg);
	CHECK(tfs_table_meta_json(&h, &js, &jl) == TFS_OK, "json");
	CHECK(strstr(js, "\"k\\u0000ey\": \"v\\n\\\"\\u0001\xc3\xa9/\"") != NULL, "got: %s", js);
	json_object *o = json_tokener_parse(js);
	CHECK(o != NULL, "json-c parses our output");
	json_object *x;
	CHECK(o && json_object_object_get_ex(o, "x", &x) &&
		      strcmp(json_object_get_string(x), "{\"j\": 1}") == 0,
	      "x round-trips");
	json_object_put(o);
	free(js);
	tfs_table_free(&h);
	free(f.p);
}

static void test_tensor_objects(void)
{
	current = "tensor objects";
	ACCEPT("{\"t\":{\"data_offsets\":[0,4],\"shape\":[1],\"dtype\":\"F32\"}}", 4);
	REFUSE("{\"t\":{\"shape\":[1],\"data_offsets\":[0,4]}}", 4);
	REFUSE("{\"t\":{\"dtype\":\"F32\",\"data_offsets\":[0,4]}}", 4);
	REFUSE("{\"t\":{\"dtype\":\"F32\",\"shape\":[1]}}", 4);
	REFUSE("{\"t\":{}}", 0);
	REFUSE(T1(",\"dtype\":\"F32\""), 4);
	REFUSE(T1(",\"shape\":[1]"), 4);
	REFUSE(T1(",\"data_offsets\":[0,4]"), 4);
	ACCEPT(T1(",\"extra\":1,\"extra\":[2],\"other\":{\"a\":null}"), 4);
	REFUSE("{\"t\":1}", 0);
	REFUSE("{\"t\":\"F32\"}", 0);
	REFUSE("{\"t\":null}", 0);
	/* The array form. */
	ACCEPT("{\"t\":[\"F32\",[1],[0,4]]}", 4);
	ACCEPT("{\"t\":[{\"F32\":null},[],[0,4]]}", 4);
	REFUSE("{\"t\":[\"F32\",[1]]}", 4);
	REFUSE("{\"t\":[\"F32\",[1],[0,4],1]}", 4);
	REFUSE("{\"t\":[]}", 0);
	/* dtype spellings and the map form. */
	ACCEPT("{\"t\":{\"dtype\":{\"F32\":null},\"shape\":[1],\"data_offsets\":[0,4]}}", 4);
	REFUSE("{\"t\":{\"dtype\":{\"F32\":1},\"shape\":[1],\"data_offsets\":[0,4]}}", 4);
	REFUSE("{\"t\":{\"dtype\":{\"F32\":null,\"F16\":null},\"shape\":[1],\"data_offsets\":[0,4]}}", 4);
	REFUSE("{\"t\":{\"dtype\":{},\"shape\":[1],\"data_offsets\":[0,4]}}", 4);
	REFUSE("{\"t\":{\"dtype\":32,\"shape\":[1],\"data_offsets\":[0,4]}}", 4);
	REFUSE("{\"t\":{\"dtype\":null,\"shape\":[1],\"data_offsets\":[0,4]}}", 4);
	REFUSE("{\"t\":{\"dtype\":[\"F32\"],\"shape\":[1],\"data_offsets\":[0,4]}}", 4);
}

static void test_unknown_dtype(void)
{
	current = "unknown dtype";
	const char *names[] = {"F8_E4M3FN", "C128", "U128", "f32", "F32 ", "bf16", ""};
	for (size_t i = 0; i < sizeof names / sizeof *names; i++) {
		char hd[256];
		snprintf(hd, sizeof hd, "{\"t\":{\"dtype\":\"%s\",\"shape\":[3],\"data_offsets\":[0,7]}}",
			 names[i]);
		warnings = 0;
		CHECK(verdict_flags(hd, strlen(hd), 7, 0, NULL) == TFS_OK, "lenient accepts %s", names[i]);
		CHECK(warnings == 1, "one warning for %s (got %d)", names[i], warnings);
		CHECK(verdict_flags(hd, strlen(hd), 7, TFS_PARSE_STRICT, NULL) == TFS_ERR_FORMAT,
		      "strict refuses %s", names[i]);
	}
	/* Every other rule still holds for an unknown dtype. */
	const char *gap = "{\"t\":{\"dtype\":\"X\",\"shape\":[3],\"data_offsets\":[1,7]}}";
	CHECK(verdict_flags(gap, strlen(gap), 7, 0, NULL) == TFS_ERR_FORMAT, "unknown dtype, gap");
	const char *trail = "{\"t\":{\"dtype\":\"X\",\"shape\":[3],\"data_offsets\":[0,7]}}";
	CHECK(verdict_flags(trail, strlen(trail), 8, 0, NULL) == TFS_ERR_FORMAT, "unknown dtype, trailing");
	/* In strict mode an earlier duplicate copy is refused too. */
	const char *dup = "{\"t\":{\"dtype\":\"X\",\"shape\":[1],\"data_offsets\":[0,4]},"
			  "\"t\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]}}";
	CHECK(verdict_flags(dup, strlen(dup), 4, TFS_PARSE_STRICT, NULL) == TFS_ERR_FORMAT, "strict dup");
	warnings = 0;
	CHECK(verdict_flags(dup, strlen(dup), 4, 0, NULL) == TFS_OK && warnings == 0,
	      "lenient: the winning copy is F32, no warning");

	/* The dtype string is passed through as stored. */
	struct tfs_table h;
	struct tfs_diag d;
	struct file f = mkfile_n(trail, strlen(trail), 7);
	CHECK(parse_file(f, 0, &h, &d) == TFS_OK, "parse");
	size_t len;
	const char *dt = tfs_tensor_dtype(&h, &h.t[0], &len);
	CHECK(len == 1 && dt[0] == 'X' && h.unknown_dtypes == 1, "passed through");
	tfs_table_free(&h);
	free(f.p);
}

static void test_integers(void)
{
	current = "integers";
	REFUSE("{\"t\":{\"dtype\":\"U8\",\"shape\":[-1],\"data_offsets\":[0,1]}}", 1);
	REFUSE("{\"t\":{\"dtype\":\"U8\",\"shape\":[1.0],\"data_offsets\":[0,1]}}", 1);
	REFUSE("{\"t\":{\"dtype\":\"U8\",\"shape\":[1e0],\"data_offsets\":[0,1]}}", 1);
	REFUSE("{\"t\":{\"dtype\":\"U8\",\"shape\":[-0],\"data_offsets\":[0,0]}}", 0);
	REFUSE("{\"t\":{\"dtype\":\"U8\",\"shape\":[\"1\"],\"data_offsets\":[0,1]}}", 1);
	REFUSE("{\"t\":{\"dtype\":\"U8\",\"shape\":[true],\"data_offsets\":[0,1]}}", 1);
	REFUSE("{\"t\":{\"dtype\":\"U8\",\"shape\":[null],\"data_offsets\":[0,1]}}", 1);
	REFUSE("{\"t\":{\"dtype\":\"U8\",\"shape\":1,\"data_offsets\":[0,1]}}", 1);
	REFUSE("{\"t\":{\"dtype\":\"U8\",\"shape\":[1],\"data_offsets\":[0,1,2]}}", 1);
	REFUSE("{\"t\":{\"dtype\":\"U8\",\"shape\":[1],\"data_offsets\":[1]}}", 1);
	REFUSE("{\"t\":{\"dtype\":\"U8\",\"shape\":[1],\"data_offsets\":[]}}", 1);
	REFUSE("{\"t\":{\"dtype\":\"U8\",\"shape\":[1],\"data_offsets\":{\"a\":0}}}", 1);
	REFUSE("{\"t\":{\"dtype\":\"U8\",\"shape\":[1],\"data_offsets\":[0,-1]}}", 1);
	REFUSE("{\"t\":{\"dtype\":\"U8\",\"shape\":[1],\"data_offsets\":[0,1.0]}}", 1);
	REFUSE("{\"t\":{\"dtype\":\"U8\",\"shape\":[18446744073709551616],\"data_offsets\":[0,0]}}", 0);
	ACCEPT("{\"t\":{\"dtype\":\"U8\",\"shape\":[18446744073709551615,0],\"data_offsets\":[0,0]}}", 0);
	REFUSE("{\"t\":{\"dtype\":\"U8\",\"shape\":[18446744073709551615,2,0],\"data_offsets\":[0,0]}}", 0);
	/* elements fit, bits do not */
	REFUSE("{\"t\":{\"dtype\":\"F64\",\"shape\":[2305843009213693952],\"data_offsets\":[0,0]}}", 0);
	REFUSE("{\"t\":{\"dtype\":\"U8\",\"shape\":[1],\"data_offsets\":[0,18446744073709551615]}}", 1);
	ACCEPT("{\"t\":{\"dtype\":\"U8\",\"shape\":[ 1 , 1 ],\"data_offsets\":[ 0 , 1 ]}}", 1);
}

static void test_offsets(void)
{
	current = "offsets";
	/* Holes, overlaps, a first tensor not at 0, begin > end. */
	refuse_msg("{\"a\":{\"dtype\":\"U8\",\"shape\":[4],\"data_offsets\":[4,8]}}", 8, "gap");
	refuse_msg("{\"a\":{\"dtype\":\"U8\",\"shape\":[4],\"data_offsets\":[0,4]},"
		   "\"b\":{\"dtype\":\"U8\",\"shape\":[4],\"data_offsets\":[5,9]}}",
		   9, "gap");
	refuse_msg("{\"a\":{\"dtype\":\"U8\",\"shape\":[4],\"data_offsets\":[0,4]},"
		   "\"b\":{\"dtype\":\"U8\",\"shape\":[4],\"data_offsets\":[2,6]}}",
		   6, "overlap");
	refuse_msg("{\"a\":{\"dtype\":\"U8\",\"shape\":[4],\"data_offsets\":[0,4]},"
		   "\"b\":{\"dtype\":\"U8\",\"shape\":[4],\"data_offsets\":[0,4]}}",
		   4, "overlap");
	refuse_msg("{\"a\":{\"dtype\":\"U8\",\"shape\":[0],\"data_offsets\":[4,0]},"
		   "\"b\":{\"dtype\":\"U8\",\"shape\":[4],\"data_offsets\":[0,4]}}",
		   4, "end before");
	refuse_msg("{\"x.weight\":{\"dtype\":\"F32\",\"shape\":[2,2],\"data_offsets\":[0,12]}}", 12,
		   "tensor 'x.weight': data_offsets [0,12] hold 12 bytes but F32 [2,2] needs 16");
	/* Out of order in the header is fine. */
	ACCEPT("{\"b\":{\"dtype\":\"U8\",\"shape\":[4],\"data_offsets\":[4,8]},"
	       "\"a\":{\"dtype\":\"U8\",\"shape\":[4],\"data_offsets\":[0,4]}}",
	       8);
	/* Zero-size tensors may sit on any boundary, several at one offset. */
	ACCEPT("{\"z0\":{\"dtype\":\"F32\",\"shape\":[0],\"data_offsets\":[0,0]},"
	       "\"a\":{\"dtype\":\"U8\",\"shape\":[4],\"data_offsets\":[0,4]},"
	       "\"z1\":{\"dtype\":\"F32\",\"shape\":[3,0],\"data_offsets\":[4,4]},"
	       "\"z2\":{\"dtype\":\"I64\",\"shape\":[0,7],\"data_offsets\":[4,4]},"
	       "\"b\":{\"dtype\":\"U8\",\"shape\":[4],\"data_offsets\":[4,8]},"
	       "\"z3\":{\"dtype\":\"U8\",\"shape\":[0],\"data_offsets\":[8,8]}}",
	       8);
	REFUSE("{\"a\":{\"dtype\":\"U8\",\"shape\":[0],\"data_offsets\":[4,4]},"
	       "\"b\":{\"dtype\":\"U8\",\"shape\":[4],\"data_offsets\":[0,4]}}",
	       8);
	/* A scalar has one element. */
	ACCEPT("{\"s\":{\"dtype\":\"I64\",\"shape\":[],\"data_offsets\":[0,8]}}", 8);
	REFUSE("{\"s\":{\"dtype\":\"I64\",\"shape\":[],\"data_offsets\":[0,0]}}", 0);
	/* Sub-byte dtypes. */
	ACCEPT("{\"t\":{\"dtype\":\"F4\",\"shape\":[2],\"data_offsets\":[0,1]}}", 1);
	refuse_msg("{\"t\":{\"dtype\":\"F4\",\"shape\":[3],\"data_offsets\":[0,2]}}", 2,
		   "not a whole number of bytes");
	ACCEPT("{\"t\":{\"dtype\":\"F6_E2M3\",\"shape\":[4],\"data_offsets\":[0,3]}}", 3);
	REFUSE("{\"t\":{\"dtype\":\"F6_E3M2\",\"shape\":[3],\"data_offsets\":[0,3]}}", 3);
	REFUSE("{\"t\":{\"dtype\":\"F4\",\"shape\":[],\"data_offsets\":[0,1]}}", 1);
	/* The exact end of the buffer. */
	ACCEPT("{}", 0);
	refuse_msg("{}", 1, "unexpected bytes");
	refuse_msg(T1(""), 5, "1 unexpected bytes");
	refuse_msg(T1(""), 3, "truncated");
	refuse_msg("{\"t\":{\"dtype\":\"U8\",\"shape\":[100],\"data_offsets\":[0,100]}}", 10, "truncated");
}

static void test_dtypes(void)
{
	current = "dtypes";
	static const struct {
		const char *name;
		unsigned bits;
	} all[] = {
		{"BOOL", 8},        {"F4", 4},      {"F6_E2M3", 6}, {"F6_E3M2", 6}, {"U8", 8},
		{"I8", 8},          {"F8_E5M2", 8}, {"F8_E4M3", 8}, {"F8_E8M0", 8}, {"F8_E4M3FNUZ", 8},
		{"F8_E5M2FNUZ", 8}, {"I16", 16},    {"U16", 16},    {"F16", 16},    {"BF16", 16},
		{"I32", 32},        {"U32", 32},    {"F32", 32},    {"C64", 64},    {"F64", 64},
		{"I64", 64},        {"U64", 64},
	};
	CHECK(sizeof all / sizeof *all == 22 && TFS_DT_SAFETENSORS_END == 22, "22 dtypes");
	for (size_t i = 0; i < sizeof all / sizeof *all; i++) {
		unsigned dt = tfs_dtype_lookup_safetensors(all[i].name, strlen(all[i].name));
		CHECK(dt == i && tfs_dtype_info(dt)->bits == all[i].bits, "%s", all[i].name);
		/* 8 elements always make whole bytes. */
		size_t bytes = all[i].bits;
		char hd[256];
		snprintf(hd, sizeof hd, "{\"t\":{\"dtype\":\"%s\",\"shape\":[2,4],\"data_offsets\":[0,%zu]}}",
			 all[i].name, bytes);
		warnings = 0;
		CHECK(verdict_flags(hd, strlen(hd), bytes, TFS_PARSE_STRICT, NULL) == TFS_OK, "%s ok", hd);
		snprintf(hd, sizeof hd, "{\"t\":{\"dtype\":\"%s\",\"shape\":[2,4],\"data_offsets\":[0,%zu]}}",
			 all[i].name, bytes + 1);
		CHECK(verdict_flags(hd, strlen(hd), bytes + 1, 0, NULL) == TFS_ERR_FORMAT, "%s size", hd);
	}
	CHECK(warnings == 0, "no warnings for known dtypes");
}

static void test_duplicates(void)
{
	current = "duplicates";
	struct file f;
	struct tfs_table h;
	struct tfs_diag d;
	/* The last definition wins, in the first one's place. */
	const char *hd = "{\"a\":{\"dtype\":\"U8\",\"shape\":[99],\"data_offsets\":[0,99]},"
			 "\"b\":{\"dtype\":\"U8\",\"shape\":[2],\"data_offsets\":[4,6]},"
			 "\"a\":{\"dtype\":\"I32\",\"shape\":[1],\"data_offsets\":[0,4]}}";
	f = mkfile_n(hd, strlen(hd), 6);
	CHECK(parse_file(f, 0, &h, &d) == TFS_OK, "dup: %s", d.msg);
	CHECK(h.n == 2, "two tensors, got %u", h.n);
	CHECK(h.t[0].dtype == TFS_DT_I32 && h.t[0].end == 8 + strlen(hd) + 4, "last wins");
	CHECK(h.t[1].begin == 8 + strlen(hd) + 4, "b second, at an absolute offset");
	tfs_table_free(&h);
	free(f.p);
	/* Every earlier copy must still parse. */
	REFUSE("{\"a\":{\"dtype\":\"U8\"},\"a\":{\"dtype\":\"U8\",\"shape\":[1],\"data_offsets\":[0,1]}}", 1);
	REFUSE("{\"a\":{\"dtype\":\"U8\",\"shape\":[1],\"data_offsets\":[0,1],\"x\":1e999},"
	       "\"a\":{\"dtype\":\"U8\",\"shape\":[1],\"data_offsets\":[0,1]}}",
	       1);
	/* Earlier copies do not count toward the offsets. */
	ACCEPT("{\"a\":{\"dtype\":\"U8\",\"shape\":[1],\"data_offsets\":[5,6]},"
	       "\"a\":{\"dtype\":\"U8\",\"shape\":[1],\"data_offsets\":[0,1]}}",
	       1);
	/* Many tensors: the hash table grows, and 70,000 > 65,535. */
	size_t cap = 80000 * 80, o = 0;
	char *big = malloc(cap);
	o += (size_t)sprintf(big + o, "{");
	for (int i = 0; i < 70000; i++)
		o += (size_t)sprintf(
			big + o, "%s\"layer.%d.w\":{\"dtype\":\"U8\",\"shape\":[1],\"data_offsets\":[%d,%d]}",
			i ? "," : "", i, i, i + 1);
	o += (size_t)sprintf(big + o, "}");
	f = mkfile_n(big, o, 70000);
	CHECK(parse_file(f, 0, &h, &d) == TFS_OK && h.n == 70000, "70000 tensors: %s", d.msg);
	struct tfs_tree tr;
	struct tfs_model m;
	CHECK(tree_of(&h, &m, &tr, &d) == TFS_OK, "tree");
	CHECK(tfs_tree_lookup(&tr, 1, "layer.69999.w", 13) == 3 + 69999, "lookup last");
	CHECK(tfs_tree_lookup(&tr, 1, "layer.70000.w", 13) == 0, "lookup missing");
	tfs_tree_free(&tr);
	tfs_model_free(&m);
	free(f.p);
	free(big);
}

/* ---- name mapping ---- */

static void map_is(const char *name, size_t len, const char *want)
{
	char out[TFS_NAME_MAX + 1];
	int hashed;
	size_t n = tfs_name_map(name, len, out, &hashed);
	CHECK(n == strlen(want) && memcmp(out, want, n) == 0, "map -> '%s', want '%s'", out, want);
	char back[512];
	long b = tfs_name_unmap(out, n, back, sizeof back);
	CHECK(b == (long)len && memcmp(back, name, len) == 0, "unmap of '%s'", out);
}

static uint64_t const_hash(const char *n, size_t l)
{
	(void)n;
	(void)l;
	return 42;
}

static void test_names(void)
{
	current = "names";
	map_is("model.layers.0.weight", 21, "model.layers.0.weight");
	map_is("a/b", 3, "a%2Fb");
	map_is("a%2Fb", 5, "a%252Fb");
	map_is("%", 1, "%25");
	map_is("", 0, "%empty");
	map_is(".", 1, "%2E");
	map_is("..", 2, "%2E%2E");
	map_is("...", 3, "...");
	map_is(".hidden", 7, ".hidden");
	map_is("a\0b", 3, "a%00b");
	map_is("line\nbreak\t\x7f", 12, "line%0Abreak%09%7F");
	map_is("/abs", 4, "%2Fabs");
	map_is("__metadata__.json", 17, "%5F_metadata__.json");
	map_is("__index__.json", 14, "%5F_index__.json");
	map_is("__metadata__", 12, "__metadata__");
	map_is("__metadata", 10, "__metadata");
	map_is("\xc3\xa9", 2, "\xc3\xa9");
	map_is("e\xcc\x81", 3, "e\xcc\x81");
	map_is("Weight", 6, "Weight");
	CHECK(tfs_name_unmap("a%2", 3, (char[8]){0}, 8) == -1, "cut escape");
	CHECK(tfs_name_unmap("a%zz", 4, (char[8]){0}, 8) == -1, "bad escape");

	/* Long names: a prefix at a character boundary, then the hash. */
	char longn[400], out[TFS_NAME_MAX + 1];
	int hashed;
	memset(longn, 'x', 300);
	size_t n = tfs_name_map(longn, 300, out, &hashed);
	CHECK(hashed && n == 200 + 18 && memcmp(out + 200, "%~", 2) == 0, "long ascii: %zu", n);
	n = tfs_name_map(longn, 255, out, &hashed);
	CHECK(!hashed && n == 255, "255 bytes fit");
	n = tfs_name_map(longn, 256, out, &hashed);
	CHECK(hashed, "256 bytes do not");
	for (int i = 0; i < 100; i++)
		memcpy(longn + 3 * i, "\xe4\xb8\x80", 3); /* 100 CJK = 300 bytes */
	n = tfs_name_map(longn, 300, out, &hashed);
	CHECK(hashed && n <= TFS_NAME_MAX && tfs_utf8_check((unsigned char *)out, n) == n,
	      "CJK cut on a boundary");
	CHECK((n - 18) % 3 == 0, "whole characters kept: %zu", n - 18);
	for (int i = 0; i < 300; i++)
		longn[i] = '/';
	n = tfs_name_map(longn, 300, out, &hashed);
	CHECK(hashed && n <= TFS_NAME_MAX && (n - 18) % 3 == 0, "escapes kept whole");
	/* 100,000 bytes */
	char *huge = malloc(100000);
	memset(huge, 'q', 100000);
	n = tfs_name_map(huge, 100000, out, &hashed);
	CHECK(hashed && n == 218, "100000-byte name");
	free(huge);

	/* Injective over many awkward names from a small alphabet: unmap is a
	 * left inverse of map, so two names can never share a file name. */
	const char alpha[] = {'a', '.', '/', '%', '_', '\0', '\n', 'F', '2', 'E'};
	unsigned rng = 12345;
	for (int len = 0; len <= 6; len++) {
		int tries = len == 0 ? 1 : 8000;
		for (int k = 0; k < tries; k++) {
			char nm[8];
			for (int i = 0; i < len; i++) {
				rng = rng * 1103515245u + 12345u;
				nm[i] = alpha[(rng >> 16) % sizeof alpha];
			}
			n = tfs_name_map(nm, (size_t)len, out, &hashed);
			int bad = n == 0 || memchr(out, '/', n) || memchr(out, 0, n) ||
				  (n == 1 && out[0] == '.') || (n == 2 && out[0] == '.' && out[1] == '.');
			CHECK(!bad, "mapped name is a valid file name");
			char back[16];
			long b = tfs_name_unmap(out, n, back, sizeof back);
			CHECK(b == len && memcmp(back, nm, (size_t)len) == 0, "round trip");
		}
	}

	/* Forced hash collisions: "-N" suffixes, unique, deterministic. */
	char hd[4096];
	size_t o = (size_t)sprintf(hd, "{");
	for (int i = 0; i < 3; i++) {
		o += (size_t)sprintf(hd + o, "%s\"", i ? "," : "");
		memset(hd + o, 'y', 300);
		o += 300;
		o += (size_t)sprintf(hd + o, "%d\":{\"dtype\":\"U8\",\"shape\":[1],\"data_offsets\":[%d,%d]}",
				     i, i, i + 1);
	}
	o += (size_t)sprintf(hd + o, "}");
	struct file f = mkfile_n(hd, o, 3);
	struct tfs_table h;
	struct tfs_diag d;
	struct tfs_tree tr;
	struct tfs_model m;
	tfs_name_hash_hook = const_hash;
	CHECK(parse_file(f, 0, &h, &d) == TFS_OK, "parse long names");
	CHECK(tree_of(&h, &m, &tr, &d) == TFS_OK, "tree with collisions: %s", d.msg);
	tfs_name_hash_hook = NULL;
	const char *n0 = tr.nodes[3].fname, *n1 = tr.nodes[4].fname, *n2 = tr.nodes[5].fname;
	CHECK(strcmp(n0, n1) && strcmp(n1, n2) && strcmp(n0, n2), "distinct");
	CHECK(strlen(n0) == 218 && strstr(n0, "%~000000000000002a") != NULL, "first keeps the plain form: %s",
	      n0 + 190);
	CHECK(strlen(n1) <= TFS_NAME_MAX && strcmp(n1 + strlen(n1) - 2, "-4") == 0,
	      "second gets its inode, -4: %s", n1 + 190);
	CHECK(strcmp(n2 + strlen(n2) - 2, "-5") == 0, "third gets -5");
	for (uint32_t i = 3; i < 6; i++)
		CHECK(tfs_tree_lookup(&tr, 1, tr.nodes[i].fname, tr.nodes[i].fname_len) == i, "lookup %u", i);
	tfs_tree_free(&tr);
	tfs_model_free(&m);
	free(f.p);
}

static void test_tree(void)
{
	current = "tree";
	const char *hd = "{\"__metadata__\":{\"format\":\"pt\"},"
			 "\"__metadata__.json\":{\"dtype\":\"U8\",\"shape\":[1],\"data_offsets\":[0,1]},"
			 "\"a/b\":{\"dtype\":\"U8\",\"shape\":[1],\"data_offsets\":[1,2]},"
			 "\"\":{\"dtype\":\"U8\",\"shape\":[1],\"data_offsets\":[2,3]},"
			 "\"..\":{\"dtype\":\"U8\",\"shape\":[1],\"data_offsets\":[3,4]}}";
	struct file f = mkfile_n(hd, strlen(hd), 4);
	struct tfs_table h;
	struct tfs_diag d;
	struct tfs_tree tr;
	struct tfs_model m;
	CHECK(parse_file(f, 0, &h, &d) == TFS_OK, "parse");
	CHECK(tree_of(&h, &m, &tr, &d) == TFS_OK, "build");
	CHECK(tr.nnodes == 7 && tr.nodes[1].count == 5, "root holds metadata + 4");
	CHECK(tfs_tree_lookup(&tr, 1, "__metadata__.json", 17) == 2, "synthetic wins the name");
	CHECK(tfs_tree_lookup(&tr, 1, "%5F_metadata__.json", 19) == 3, "tensor escaped");
	CHECK(tfs_tree_lookup(&tr, 1, "a%2Fb", 5) == 4, "slash");
	CHECK(tfs_tree_lookup(&tr, 1, "%empty", 6) == 5, "empty");
	CHECK(tfs_tree_lookup(&tr, 1, "%2E%2E", 6) == 6, "dotdot");
	CHECK(tfs_tree_lookup(&tr, 1, "a/b", 3) == 0, "no raw slash");
	CHECK(tfs_node_size(&tr, &tr.nodes[2]) == strlen("{\n  \"format\": \"pt\"\n}\n"), "meta size");
	/* __metadata__.json is made when first looked at: not in the total. */
	CHECK(tr.total_bytes == 4, "total");
	tfs_tree_free(&tr);
	tfs_model_free(&m);
	free(f.p);
}

struct icol {
	char names[8][32];
	char shards[8][32];
	int n;
	char other[4][64];
	int no;
};

static tfs_err icol_entry(void *ctx, const char *name, size_t nlen, const char *shard, size_t slen,
			  struct tfs_diag *d)
{
	struct icol *c = ctx;
	(void)d;
	if (c->n < 8) {
		snprintf(c->names[c->n], 32, "%.*s", (int)nlen, name);
		snprintf(c->shards[c->n], 32, "%.*s", (int)slen, shard);
	}
	c->n++;
	return TFS_OK;
}

static tfs_err icol_other(void *ctx, const char *key, size_t klen, const char *text, size_t tlen,
			  struct tfs_diag *d)
{
	struct icol *c = ctx;
	(void)d;
	if (c->no < 4)
		snprintf(c->other[c->no], 64, "%.*s=%.*s", (int)klen, key, (int)tlen, text);
	c->no++;
	return TFS_OK;
}

static tfs_err iscan(const char *text, struct icol *c, char *msg)
{
	struct tfs_index_cb cb = {.entry = icol_entry, .other = icol_other, .ctx = c};
	struct tfs_diag d = {{0}};
	memset(c, 0, sizeof *c);
	tfs_err e = tfs_index_scan(text, strlen(text), &cb, &d);
	if (msg)
		strcpy(msg, d.msg);
	return e;
}

static void test_index_scan(void)
{
	current = "index scan";
	struct icol c;
	char msg[TFS_DIAG_MAX];
	CHECK(iscan(" {\"metadata\": {\"total_size\": 7, \"x\": [1, 2]},\n"
		    "  \"weight_map\": {\"a\\u002fb\": \"s1.safetensors\", \"a\": \"s\\u0032\", \"a\": \"s3\"}} \n",
		    &c, msg) == TFS_OK,
	      "valid: %s", msg);
	CHECK(c.n == 3 && strcmp(c.names[0], "a/b") == 0 && strcmp(c.shards[0], "s1.safetensors") == 0,
	      "escaped name decoded: %s", c.names[0]);
	CHECK(strcmp(c.shards[1], "s2") == 0 && strcmp(c.shards[2], "s3") == 0, "duplicates passed in order");
	CHECK(c.no == 1 && strcmp(c.other[0], "metadata={\"total_size\": 7, \"x\": [1, 2]}") == 0,
	      "other member: %s", c.other[0]);
	CHECK(iscan("{\"weight_map\": {}}", &c, msg) == TFS_OK && c.n == 0, "empty map");
	CHECK(iscan("{\"metadata\": {}}", &c, msg) == TFS_ERR_FORMAT && strstr(msg, "no \"weight_map\""),
	      "%s", msg);
	CHECK(iscan("{\"weight_map\": []}", &c, msg) == TFS_ERR_FORMAT && strstr(msg, "not an object"), "%s",
	      msg);
	CHECK(iscan("{\"weight_map\": {\"a\": 1}}", &c, msg) == TFS_ERR_FORMAT && strstr(msg, "'a'"), "%s",
	      msg);
	CHECK(iscan("{\"weight_map\": {}, \"weight_map\": {}}", &c, msg) == TFS_ERR_FORMAT, "two maps");
	CHECK(iscan("{\"weight_map\": {\"a\": \"s\",}}", &c, msg) == TFS_ERR_FORMAT &&
		      strstr(msg, "invalid index JSON"),
	      "%s", msg);
	CHECK(iscan("{\"weight_map\": {}, \"m\": NaN}", &c, msg) == TFS_ERR_FORMAT, "NaN in another member");
	CHECK(iscan("{\"weight_map\": {}} x", &c, msg) == TFS_ERR_FORMAT, "trailing text");
	CHECK(iscan("{\"weight_map\": {\"\\ud800\": \"s\"}}", &c, msg) == TFS_ERR_FORMAT, "lone surrogate");
	CHECK(iscan("[]", &c, msg) == TFS_ERR_FORMAT, "not an object");
	CHECK(iscan("{\"weight_map\": {\"\xff\": \"s\"}}", &c, msg) == TFS_ERR_FORMAT && strstr(msg, "UTF-8"),
	      "%s", msg);
}

static void test_quote(void)
{
	current = "quote";
	char q[32];
	tfs_quote(q, sizeof q, "a\nb'c", 5);
	CHECK(strcmp(q, "'a\\x0ab\\x27c'") == 0, "got %s", q);
	char longn[100];
	memset(longn, 'z', sizeof longn);
	tfs_quote(q, sizeof q, longn, sizeof longn);
	CHECK(strlen(q) < sizeof q && strstr(q, "...'") != NULL, "cut: %s", q);
	/* Valid UTF-8 is kept; a byte outside a valid sequence (a lone
	 * continuation, a lead cut short, an overlong, a surrogate) is
	 * escaped, so the line stays text. */
	tfs_quote(q, sizeof q, "\xc3\xa9t\xc3\xa9", 5);
	CHECK(strcmp(q, "'\xc3\xa9t\xc3\xa9'") == 0, "got %s", q);
	tfs_quote(q, sizeof q, "a\xff\x80\xc3", 4);
	CHECK(strcmp(q, "'a\\xff\\x80\\xc3'") == 0, "got %s", q);
	tfs_quote(q, sizeof q, "\xc0\xaf\xed\xa0\x80", 5);
	CHECK(strcmp(q, "'\\xc0\\xaf\\xed\\xa0\\x80'") == 0, "got %s", q);
	/* Cut before a sequence that does not fit, never inside it. */
	char e[40];
	for (size_t i = 0; i < sizeof e; i += 2)
		memcpy(e + i, "\xc3\xa9", 2);
	tfs_quote(q, sizeof q, e, sizeof e);
	size_t ql = strlen(q);
	CHECK(ql > 5 && strcmp(q + ql - 4, "...'") == 0 && tfs_utf8_check((const unsigned char *)q, ql) == ql,
	      "cut: %s", q);
}

int main(int argc, char **argv)
{
	check_args(argc, argv);
	RUN(test_prefix);
	RUN(test_sniff);
	RUN(test_utf8);
	RUN(test_whitespace);
	RUN(test_syntax);
	RUN(test_escapes);
	RUN(test_nesting);
	RUN(test_numbers);
	RUN(test_metadata);
	RUN(test_tensor_objects);
	RUN(test_unknown_dtype);
	RUN(test_integers);
	RUN(test_offsets);
	RUN(test_dtypes);
	RUN(test_duplicates);
	RUN(test_names);
	RUN(test_tree);
	RUN(test_index_scan);
	RUN(test_quote);
	return check_report();
}
