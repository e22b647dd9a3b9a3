/* Unit tests of the pure pieces of Xet (src/compute/): BLAKE3, Xet's
 * chunk, xorb and file hashes, the chunk decoder, the reconstruction
 * parser, the token answer's parser and the chunk map, against vectors from independent implementations
 * (xet_vectors.h: Debian's b3sum and the Xet double's Python, which
 * tests/integration/test_xet.py checks against @huggingface/hub), and
 * against hostile input: every lie a chunk or a reconstruction can tell is
 * refused with one line, never a crash or a byte past a buffer. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "compute/blake3.h"
#include "compute/xetchunk.h"
#include "compute/xethash.h"
#include "compute/xetmap.h"
#include "compute/xetplan.h"
#include "compute/xettoken.h"

#include "check.h"
#include "xet_vectors.h"

static unsigned char *pattern(size_t n)
{
	unsigned char *p = malloc(n + 1);
	for (size_t i = 0; i < n; i++)
		p[i] = (unsigned char)(i % 251);
	return p;
}

static void hex(const uint8_t *b, size_t n, char *out)
{
	for (size_t i = 0; i < n; i++)
		sprintf(out + 2 * i, "%02x", b[i]);
}

static int one_line(const struct tfs_diag *d)
{
	return d->msg[0] && !strchr(d->msg, '\n');
}

/* ---- BLAKE3 ---- */

static void test_blake3(void)
{
	current = "blake3";
	for (size_t v = 0; v < sizeof B3V / sizeof *B3V; v++) {
		size_t n = B3V[v].len;
		unsigned char *d = pattern(n);
		uint8_t out[131];
		char h[263];
		tfs_blake3(NULL, d, n, out);
		hex(out, 32, h);
		CHECK(strcmp(h, B3V[v].plain) == 0, "plain, %zu bytes: %s", n, h);
		tfs_blake3((const uint8_t *)KEY2, d, n, out);
		hex(out, 32, h);
		CHECK(strcmp(h, B3V[v].keyed) == 0, "keyed, %zu bytes: %s", n, h);
		/* every path this CPU has: portable, 8 and 16 chunks at once */
		for (int lanes = 1; lanes <= tfs_blake3_lanes(); lanes *= lanes == 1 ? 8 : 2) {
			tfs_blake3_with(lanes, (const uint8_t *)KEY2, d, n, out);
			hex(out, 32, h);
			CHECK(strcmp(h, B3V[v].keyed) == 0, "keyed, %zu bytes, %d lanes: %s", n, lanes, h);
			tfs_blake3_with(lanes, NULL, d, n, out);
			hex(out, 32, h);
			CHECK(strcmp(h, B3V[v].plain) == 0, "plain, %zu bytes, %d lanes: %s", n, lanes, h);
		}
		/* the same in uneven pieces, and any output length */
		static const size_t steps[] = {1, 7, 63, 64, 65, 1000, 1024, 4097};
		for (size_t s = 0; s < sizeof steps / sizeof *steps; s++) {
			struct tfs_blake3 b;
			tfs_blake3_init(&b, (const uint8_t *)KEY2);
			for (size_t at = 0; at < n; at += steps[s])
				tfs_blake3_update(&b, d + at, n - at < steps[s] ? n - at : steps[s]);
			tfs_blake3_final(&b, out, sizeof out);
			hex(out, sizeof out, h);
			CHECK(strcmp(h, B3V[v].xof) == 0, "keyed, %zu bytes in pieces of %zu, 131 out", n,
			      steps[s]);
		}
		free(d);
	}
}

/* ---- Xet's hashes ---- */

static void test_hashes(void)
{
	current = "hashes";
	for (size_t v = 0; v < sizeof XHV / sizeof *XHV; v++) {
		size_t n = XHV[v].n;
		struct tfs_xet_node *a = malloc(n * sizeof *a), *b = malloc(n * sizeof *b);
		for (size_t i = 0; i < n; i++) {
			size_t len = 1000 + 37 * i;
			unsigned char *d = pattern(len);
			tfs_xet_chunk_hash(d + i % 7, len - i % 7, a[i].hash);
			a[i].len = len;
			free(d);
		}
		memcpy(b, a, n * sizeof *a);
		uint8_t x[32], f[32];
		char hx[65], hf[65];
		tfs_xet_xorb_hash(a, n, x);
		tfs_xet_file_hash(b, n, f);
		tfs_xet_hash_hex(x, hx);
		tfs_xet_hash_hex(f, hf);
		CHECK(strcmp(hx, XHV[v].xorb) == 0, "xorb hash of %zu chunks: %s", n, hx);
		CHECK(strcmp(hf, XHV[v].file) == 0, "file hash of %zu chunks: %s", n, hf);
		uint8_t back[32];
		CHECK(tfs_xet_hash_parse(hx, 64, back) == TFS_OK && memcmp(back, x, 32) == 0,
		      "hex round trip");
		free(a);
		free(b);
	}
	uint8_t z[32], zero[32] = {0}, h[32];
	tfs_xet_xorb_hash(NULL, 0, z);
	CHECK(memcmp(z, zero, 32) == 0, "no chunks: the zero hash");
	tfs_xet_file_hash(NULL, 0, z);
	CHECK(memcmp(z, zero, 32) == 0, "an empty file: the zero hash");
	const char *bad[] = {"", "0123", "g000000000000000000000000000000000000000000000000000000000000000",
			     "000000000000000000000000000000000000000000000000000000000000000",
			     "00000000000000000000000000000000000000000000000000000000000000000"};
	for (size_t i = 0; i < sizeof bad / sizeof *bad; i++)
		CHECK(tfs_xet_hash_parse(bad[i], strlen(bad[i]), h) != TFS_OK, "refused hash text %zu", i);
	CHECK(tfs_xet_hash_parse("0123456789ABCDEF0123456789abcdef0123456789abcdef0123456789abcdef", 64, h) ==
			      TFS_OK &&
		      h[0] == 0xef && h[7] == 0x01,
	      "each word little-endian, either case");
}

/* ---- chunks ---- */

#define NCV (sizeof CV / sizeof *CV)
#define RUN_LEN (sizeof CHUNK_RUN - 1)

/* Decodes a run; 0 when refused (one line), 1 when it decoded. */
static int decodes(struct tfs_xet_dec *x, const uint8_t *run, size_t n, uint32_t nchunks, uint8_t *out,
		   size_t cap)
{
	struct tfs_diag d = {{0}};
	size_t raw;
	if (tfs_xet_decode_run(x, run, n, nchunks, out, cap, NULL, &raw, &d) == TFS_OK)
		return 1;
	CHECK(one_line(&d), "a refusal is one line: %s", d.msg);
	return 0;
}

static void test_chunk_vectors(struct tfs_xet_dec *x, uint8_t *out, size_t cap)
{
	uint32_t lens[NCV];
	size_t raw;
	struct tfs_diag d;
	int types[3] = {0};
	CHECK(tfs_xet_decode_run(x, (const uint8_t *)CHUNK_RUN, RUN_LEN, NCV, out, cap, lens, &raw, &d) ==
		      TFS_OK,
	      "the run decodes: %s", d.msg);
	size_t at = 0;
	for (size_t i = 0; i < NCV; i++) {
		uint8_t h[32];
		char hx[65];
		CHECK(lens[i] == CV[i].len, "chunk %zu: %u bytes, want %u", i, lens[i], CV[i].len);
		tfs_xet_chunk_hash(out + at, lens[i], h);
		tfs_xet_hash_hex(h, hx);
		CHECK(strcmp(hx, CV[i].hash) == 0, "chunk %zu (type %d): hash %s", i, CV[i].type, hx);
		types[CV[i].type] = 1;
		at += lens[i];
	}
	CHECK(raw == at && types[0] && types[1] && types[2], "all three types, %zu bytes", raw);
	CHECK(!decodes(x, (const uint8_t *)CHUNK_RUN, RUN_LEN, NCV + 1, out, cap),
	      "one chunk more than there is");
	CHECK(!decodes(x, (const uint8_t *)CHUNK_RUN, RUN_LEN, NCV - 1, out, cap), "bytes after the chunks");
	CHECK(!decodes(x, (const uint8_t *)CHUNK_RUN, RUN_LEN, NCV, out, raw - 1),
	      "no room for the last byte");
	for (size_t cut = 1; cut < RUN_LEN; cut += cut < 64 ? 1 : 97)
		CHECK(!decodes(x, (const uint8_t *)CHUNK_RUN, RUN_LEN - cut, NCV, out, cap), "cut by %zu",
		      cut);
}

/* Whether chunk i of a decoded run is the true one. */
static int same_chunk(const uint8_t *out, size_t i)
{
	size_t at = 0;
	uint8_t h[32];
	char hx[65];
	for (size_t k = 0; k < i; k++)
		at += CV[k].len;
	tfs_xet_chunk_hash(out + at, CV[i].len, h);
	tfs_xet_hash_hex(h, hx);
	return strcmp(hx, CV[i].hash) == 0;
}

/* The header fields of the chunk at `off` of a copy of the run, changed. */
static void test_chunk_lies(struct tfs_xet_dec *x, uint8_t *out, size_t cap)
{
	uint8_t *run = malloc(RUN_LEN);
	size_t off = 0;
	for (size_t i = 0; i < NCV; i++) {
		struct tfs_xet_chunk_hdr h;
		struct tfs_diag d;
		CHECK(tfs_xet_chunk_header((const uint8_t *)CHUNK_RUN + off, RUN_LEN - off, &h, &d) == TFS_OK,
		      "hdr");
		static const int delta[][3] = {{0, 1, 0}, {0, -1, 0},      {0, 0, 1},      {0, 0, -1},
					       {1, 0, 0}, {0, 0, 0x20000}, {0, 0x40000, 0}};
		for (size_t k = 0; k < sizeof delta / sizeof *delta; k++) {
			memcpy(run, CHUNK_RUN, RUN_LEN);
			uint8_t *p = run + off;
			uint32_t c = h.comp_len + (uint32_t)delta[k][1],
				 r = h.raw_len + (uint32_t)delta[k][2];
			p[0] = (uint8_t)delta[k][0];
			p[1] = (uint8_t)c, p[2] = (uint8_t)(c >> 8), p[3] = (uint8_t)(c >> 16);
			p[5] = (uint8_t)r, p[6] = (uint8_t)(r >> 8), p[7] = (uint8_t)(r >> 16);
			CHECK(!decodes(x, run, RUN_LEN, NCV, out, cap), "chunk %zu (type %d), lie %zu", i,
			      h.type, k);
		}
		memcpy(run, CHUNK_RUN, RUN_LEN);
		run[off + 4] = 3;
		CHECK(!decodes(x, run, RUN_LEN, NCV, out, cap), "chunk %zu of type 3", i);
		/* A frame with its content checksum (odd chunks): any byte
		 * changed in it is refused, or changes nothing (an offset
		 * into zeros), never gives other bytes. */
		if (h.type != TFS_XET_STORED && i % 2 == 1)
			for (size_t b = 0; b < h.comp_len; b++) {
				memcpy(run, CHUNK_RUN, RUN_LEN);
				run[off + 8 + b] ^= 0x10;
				CHECK(!decodes(x, run, RUN_LEN, NCV, out, cap) || same_chunk(out, i),
				      "chunk %zu: byte %zu changed", i, b);
			}
		off += 8 + h.comp_len;
	}
	free(run);
}

static void test_chunks(void)
{
	current = "chunks";
	struct tfs_xet_dec *x = tfs_xet_dec_new();
	size_t cap = 2 << 20;
	uint8_t *out = malloc(cap);
	test_chunk_vectors(x, out, cap);
	test_chunk_lies(x, out, cap);
	/* the byte planes, every remainder */
	for (size_t n = 0; n < 40; n++) {
		uint8_t a[40], b[40], c[40];
		for (size_t i = 0; i < n; i++)
			a[i] = (uint8_t)(i * 13 + 1);
		tfs_xet_bg4_split(a, n, b);
		tfs_xet_bg4_regroup(b, n, c);
		CHECK(memcmp(a, c, n) == 0 && (n < 5 || b[1] == a[4]), "planes of %zu bytes", n);
	}
	free(out);
	tfs_xet_dec_free(x);
}

/* ---- reconstructions ---- */

static tfs_err parse(const char *json, uint64_t first, uint64_t last, struct tfs_xet_plan *p,
		     struct tfs_diag *d)
{
	return tfs_xet_plan_parse(json, strlen(json), first, last, PLAN_SIZE, p, d);
}

static void test_plan_vectors(struct tfs_xet_plan *whole)
{
	for (size_t v = 0; v < sizeof PV / sizeof *PV; v++) {
		struct tfs_xet_plan p;
		struct tfs_diag d;
		const struct pv *w = &PV[v];
		CHECK(parse(w->json, w->first, w->last, &p, &d) == TFS_OK, "plan %zu: %s", v, d.msg);
		CHECK(p.skip == w->skip && p.nterm == w->nterm && p.v2 == w->v2, "plan %zu: skip, terms", v);
		for (uint32_t i = 0; i < p.nterm && i < w->nterm; i++) {
			const struct tfs_xet_term *t = &p.term[i];
			const struct tfs_xet_fetch *f = &p.fetch[t->fetch];
			char hx[65];
			tfs_xet_hash_hex(t->xorb, hx);
			CHECK(strcmp(hx, w->term[i].xorb) == 0 && t->start == w->term[i].start &&
				      t->end == w->term[i].end && t->unpacked == w->term[i].unpacked,
			      "plan %zu term %u", v, i);
			CHECK(memcmp(f->xorb, t->xorb, 32) == 0 && f->start <= t->start && t->end <= f->end &&
				      strncmp(p.url[f->url], "https://cas.example/xorbs/", 26) == 0,
			      "plan %zu term %u: its fetch", v, i);
		}
		CHECK(p.nterm && p.term[0].at == w->first - w->skip, "plan %zu: where it starts", v);
		if (v == 0)
			*whole = p;
		else {
			CHECK(tfs_xet_plan_within(whole, &p, &d) == TFS_OK, "plan %zu within the file's: %s",
			      v, d.msg);
			tfs_xet_plan_free(&p);
		}
	}
}

static void test_plan_wrong_ranges(const struct tfs_xet_plan *whole)
{
	struct tfs_xet_plan p;
	struct tfs_diag d;
	const char *start = NULL, *all = PV[0].json;
	for (size_t v = 0; v < sizeof PV / sizeof *PV; v++)
		if (PV[v].first == 0 && PV[v].last == 20000 && !PV[v].v2)
			start = PV[v].json;
	/* the file's start answered for bytes 250000-270000 (as long) */
	CHECK(parse(start, 250000, 270000, &p, &d) == TFS_OK, "same length: it parses");
	CHECK(tfs_xet_plan_within(whole, &p, &d) != TFS_OK && one_line(&d), "but not where asked: %s", d.msg);
	tfs_xet_plan_free(&p);
	/* the whole file answered for a range */
	CHECK(parse(all, 1, 300000, &p, &d) != TFS_OK && one_line(&d), "the whole file for a range: %s",
	      d.msg);
	CHECK(parse(PV[1].json, 0, 1, &p, &d) != TFS_OK, "too short an answer: %s", d.msg);
	CHECK(parse(all, 0, PLAN_SIZE - 1, &p, &d) == TFS_OK, "the whole file");
	tfs_xet_plan_free(&p);
	CHECK(tfs_xet_plan_parse(all, strlen(all), 0, PLAN_SIZE - 1, PLAN_SIZE - 1, &p, &d) != TFS_OK,
	      "terms past the file's end: %s", d.msg);
	CHECK(parse(all, 5, 4, &p, &d) == TFS_ERR_INVAL, "a backwards request");
}

/* One term of xorb X (chunks 0-2, 100 bytes), fetch entry E (v1). */
#define X "\"0000000000000000000000000000000000000000000000000000000000000001\""
#define TERM "{\"hash\":" X ",\"range\":{\"start\":0,\"end\":2},\"unpacked_length\":100}"
#define FETCH(e) "\"fetch_info\":{" X ":[" e "]}"
#define E "{\"range\":{\"start\":0,\"end\":2},\"url\":\"http://h/x\",\"url_range\":{\"start\":0,\"end\":99}}"
#define PLAN(terms, fetch) "{\"offset_into_first_range\":0,\"terms\":[" terms "]," fetch "}"

static void test_plan_hostile(void)
{
	static const struct {
		const char *json, *why;
	} bad[] = {
		{"", "empty"},
		{"[]", "not an object"},
		{PLAN(TERM, FETCH(E)) "x", "text after it"},
		{"{\"offset_into_first_range\":0,\"terms\":[" TERM "]}", "no fetch_info"},
		{PLAN(TERM, FETCH(E)) "}", "unbalanced"},
		{"{\"offset_into_first_range\":0,\"offset_into_first_range\":0,\"terms\":[" TERM
		 "]," FETCH(E) "}",
		 "a key twice"},
		{PLAN(TERM, FETCH(E) ",\"xorbs\":{}"), "both fetch_info and xorbs"},
		{PLAN("{\"hash\":\"01\",\"range\":{\"start\":0,\"end\":2},\"unpacked_length\":100}",
		      FETCH(E)),
		 "a short hash"},
		{PLAN("{\"hash\":" X ",\"range\":{\"start\":2,\"end\":2},\"unpacked_length\":100}", FETCH(E)),
		 "an empty chunk range"},
		{PLAN("{\"hash\":" X ",\"range\":{\"start\":0,\"end\":2},\"unpacked_length\":0}", FETCH(E)),
		 "nothing unpacked"},
		{PLAN("{\"hash\":" X ",\"range\":{\"start\":0,\"end\":2},\"unpacked_length\":300000}",
		      FETCH(E)),
		 "more than two chunks hold"},
		{PLAN("{\"hash\":" X ",\"range\":{\"start\":0,\"end\":2},\"unpacked_length\":-5}", FETCH(E)),
		 "a negative length"},
		{PLAN("{\"hash\":" X ",\"range\":{\"start\":0,\"end\":2},\"unpacked_length\":1.5}", FETCH(E)),
		 "a fraction"},
		{PLAN("{\"hash\":" X ",\"range\":{\"start\":0,\"end\":99999999},\"unpacked_length\":100}",
		      FETCH(E)),
		 "past any xorb"},
		{PLAN("{\"hash\":" X ",\"range\":{\"start\":0},\"unpacked_length\":100}", FETCH(E)),
		 "no end"},
		{PLAN(TERM, "\"fetch_info\":{}"), "no fetch for the term"},
		{PLAN(TERM,
		      FETCH("{\"range\":{\"start\":0,\"end\":1},\"url\":\"http://h/x\",\"url_range\":{\"start\":0,"
			    "\"end\":99}}")),
		 "a fetch holding part of the term"},
		{PLAN(TERM,
		      FETCH("{\"range\":{\"start\":0,\"end\":2},\"url\":\"ftp://h/x\",\"url_range\":{\"start\":0,"
			    "\"end\":99}}")),
		 "not http"},
		{PLAN(TERM,
		      FETCH("{\"range\":{\"start\":0,\"end\":2},\"url\":\"http://h/a b\",\"url_range\":{\"start\":"
			    "0,\"end\":99}}")),
		 "a space in the url"},
		{PLAN(TERM,
		      FETCH("{\"range\":{\"start\":0,\"end\":2},\"url\":\"http://h/x\",\"url_range\":{\"start\":99,"
			    "\"end\":0}}")),
		 "a backwards url_range"},
		{PLAN(TERM,
		      FETCH("{\"range\":{\"start\":0,\"end\":2},\"url\":\"http://h/x\",\"url_range\":{\"start\":0,"
			    "\"end\":10}}")),
		 "a url_range too small for two chunks"},
		{PLAN(TERM,
		      FETCH("{\"range\":{\"start\":0,\"end\":2},\"url\":\"http://h/x\",\"url_range\":{\"start\":0,"
			    "\"end\":999999}}")),
		 "a url_range too large for two chunks"},
		{PLAN(TERM,
		      FETCH("{\"range\":{\"start\":0,\"end\":2},\"url_range\":{\"start\":0,\"end\":99}}")),
		 "no url"},
		{PLAN(TERM,
		      FETCH("{\"range\":{\"start\":0,\"end\":65536},\"url\":\"http://h/x\",\"url_range\":{"
			    "\"start\":0,\"end\":68000000}}")),
		 "a fetch of more bytes than a xorb holds"},
		{PLAN("{\"hash\":" X ",\"range\":{\"start\":0,\"end\":32769},\"unpacked_length\":4294967396}",
		      FETCH("{\"range\":{\"start\":0,\"end\":32769},\"url\":\"http://h/x\",\"url_range\":{"
			    "\"start\":0,\"end\":999999}}")),
		 "an unpacked_length past 32 bits"},
		{"{\"offset_into_first_range\":100,\"terms\":[" TERM "]," FETCH(E) "}",
		 "a skip past the term"},
		{"{\"offset_into_first_range\":0,\"terms\":[]," FETCH(E) "}", "no terms"},
		{PLAN(TERM, "\"xorbs\":{" X ":[{\"url\":\"http://h/x\",\"ranges\":[]}]}"),
		 "v2 without ranges"},
		{PLAN(TERM, "\"xorbs\":{" X
			    ":[{\"ranges\":[{\"chunks\":{\"start\":0,\"end\":2},\"bytes\":{\"start\":0,"
			    "\"end\":99}}]}]}"),
		 "v2 without url"},
		{"{\"offset_into_first_range\":0,\"terms\":[" TERM
		 "]," FETCH(E) ",\"x\":[[[[[[[[[[[]]]]]]]]]]]}",
		 "nested too deep"},
		{"\xff", "not UTF-8"},
	};
	struct tfs_xet_plan p;
	struct tfs_diag d;
	for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
		tfs_err e = tfs_xet_plan_parse(bad[i].json, strlen(bad[i].json), 0, 99, 1000, &p, &d);
		CHECK(e != TFS_OK && one_line(&d), "refused: %s (%s)", bad[i].why, e ? d.msg : "taken");
		if (!e)
			tfs_xet_plan_free(&p);
	}
	const char *good[] = {
		PLAN(TERM, FETCH(E)),
		"{\"new\":{\"a\":[1,2]},"
		"\"offset_into_first_range\":0,\"terms\":[" TERM "]," FETCH(E) "}",
		PLAN(TERM, "\"xorbs\":{" X
			   ":[{\"ranges\":[{\"chunks\":{\"start\":0,\"end\":2},\"bytes\":{\"start\":0,"
			   "\"end\":99}}],\"url\":\"https://h/y\"}]}"),
	};
	for (size_t i = 0; i < sizeof good / sizeof *good; i++) {
		tfs_err e = tfs_xet_plan_parse(good[i], strlen(good[i]), 0, 99, 1000, &p, &d);
		CHECK(e == TFS_OK && p.nterm == 1 && p.nfetch == 1 && p.nurl == 1, "taken %zu: %s", i,
		      e ? d.msg : "");
		if (!e)
			tfs_xet_plan_free(&p);
	}
	/* a URL of the longest length taken, one more refused */
	for (size_t len = TFS_XET_URL_MAX; len <= TFS_XET_URL_MAX + 1; len++) {
		const char *pre =
			"{\"offset_into_first_range\":0,\"terms\":[" TERM "],\"fetch_info\":{" X
			":[{\"range\":{\"start\":0,\"end\":2},\"url_range\":{\"start\":0,\"end\":99},\"url\":\"";
		size_t n = strlen(pre);
		char *j = malloc(n + len + 8);
		memcpy(j, pre, n);
		memcpy(j + n, "http://", 7);
		memset(j + n + 7, 'a', len - 7);
		strcpy(j + n + len, "\"}]}}");
		tfs_err e = tfs_xet_plan_parse(j, strlen(j), 0, 99, 1000, &p, &d);
		CHECK((e == TFS_OK) == (len == TFS_XET_URL_MAX), "a url of %zu bytes", len);
		if (!e)
			tfs_xet_plan_free(&p);
		free(j);
	}
}

static void test_plans(void)
{
	current = "plans";
	struct tfs_xet_plan whole;
	memset(&whole, 0, sizeof whole);
	test_plan_vectors(&whole);
	test_plan_wrong_ranges(&whole);
	CHECK(tfs_xet_plan_term_at(&whole, 0) == 0 && tfs_xet_plan_term_at(&whole, PLAN_SIZE) == -1,
	      "term_at");
	tfs_xet_plan_free(&whole);
	test_plan_hostile();
}

/* ---- the token ---- */

static tfs_err token(const char *json, struct tfs_xet_token *t, struct tfs_diag *d)
{
	return tfs_xet_token_parse(json, strlen(json), t, d);
}

static void test_token(void)
{
	current = "token";
	struct tfs_xet_token *t = malloc(sizeof *t);
	struct tfs_diag d;
	CHECK(token("{\"accessToken\":\"xet_ab\\u0063\",\"exp\":1700000000,\"other\":[1,{}],"
		    "\"casUrl\":\"https://cas.example:8443/\"}",
		    t, &d) == TFS_OK,
	      "a token: %s", d.msg);
	CHECK(strcmp(t->token, "xet_abc") == 0 && t->exp == 1700000000, "its value and expiry");
	CHECK(strcmp(t->cas, "https://cas.example:8443") == 0 && strcmp(t->origin, t->cas) == 0, "%s %s",
	      t->cas, t->origin);
	CHECK(token("{\"casUrl\":\"http://h/p/q//\",\"exp\":0,\"accessToken\":\"t\"}", t, &d) == TFS_OK &&
		      strcmp(t->cas, "http://h/p/q") == 0 && strcmp(t->origin, "http://h") == 0,
	      "a CAS under a path: %s %s", t->cas, t->origin);
	static const char *const bad[] = {
		"{\"accessToken\":\"t\",\"exp\":1}",
		"{\"accessToken\":\"t\",\"exp\":1,\"casUrl\":\"https://h\",\"exp\":2}",
		"{\"accessToken\":\"a b\",\"exp\":1,\"casUrl\":\"https://h\"}",
		"{\"accessToken\":\"a\\nb\",\"exp\":1,\"casUrl\":\"https://h\"}",
		"{\"accessToken\":\"\",\"exp\":1,\"casUrl\":\"https://h\"}",
		"{\"accessToken\":\"t\",\"exp\":-1,\"casUrl\":\"https://h\"}",
		"{\"accessToken\":\"t\",\"exp\":1.5,\"casUrl\":\"https://h\"}",
		"{\"accessToken\":\"t\",\"exp\":\"1\",\"casUrl\":\"https://h\"}",
		"{\"accessToken\":\"t\",\"exp\":1,\"casUrl\":\"https://user:pw@h\"}",
		"{\"accessToken\":\"t\",\"exp\":1,\"casUrl\":\"ftp://h\"}",
		"{\"accessToken\":\"t\",\"exp\":1,\"casUrl\":\"https:///p\"}",
		"{\"accessToken\":\"t\",\"exp\":1,\"casUrl\":\"https://h/?x\"}",
		"{\"accessToken\":\"t\",\"exp\":1,\"casUrl\":\"https://h/a b\"}",
		"{\"accessToken\":\"t\",\"exp\":1,\"casUrl\":\"https://h\\\\x\"}",
		"{\"accessToken\":\"t\",\"exp\":1,\"casUrl\":\"https://h\"} x",
		"[\"accessToken\"]",
		"{\"accessToken\":\"t\xff\",\"exp\":1,\"casUrl\":\"https://h\"}",
	};
	for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
		CHECK(token(bad[i], t, &d) != TFS_OK && one_line(&d), "refused %zu: %s", i, d.msg);
		CHECK(!t->token[0] && !t->cas[0], "refused %zu leaves nothing", i);
	}
	char *big = malloc(TFS_XET_TOKEN_MAX + 200);
	int n = snprintf(big, 200, "{\"exp\":1,\"casUrl\":\"https://h\",\"accessToken\":\"");
	memset(big + n, 'a', TFS_XET_TOKEN_MAX + 1);
	strcpy(big + n + TFS_XET_TOKEN_MAX + 1, "\"}");
	CHECK(token(big, t, &d) != TFS_OK, "a token past the limit");
	big[n + TFS_XET_TOKEN_MAX] = '"';
	strcpy(big + n + TFS_XET_TOKEN_MAX + 1, "}");
	CHECK(token(big, t, &d) == TFS_OK && strlen(t->token) == TFS_XET_TOKEN_MAX, "one at it: %s", d.msg);
	free(big);
	free(t);
}

/* ---- the chunk map ---- */

/* Two terms: xorb 1's chunks 0-2 (30 bytes), xorb 2's chunks 5-6 (20). */
#define MAP_PLAN                                                                                             \
	"{\"offset_into_first_range\":0,\"terms\":["                                                         \
	"{\"hash\":\"" H1 "\",\"range\":{\"start\":0,\"end\":3},\"unpacked_length\":30},"                    \
	"{\"hash\":\"" H2 "\",\"range\":{\"start\":5,\"end\":7},\"unpacked_length\":20}],"                   \
	"\"fetch_info\":{\"" H1 "\":[{\"range\":{\"start\":0,\"end\":3},\"url\":\"http://h/1\","             \
	"\"url_range\":{\"start\":0,\"end\":53}}],\"" H2 "\":[{\"range\":{\"start\":5,\"end\":7},"           \
	"\"url\":\"http://h/2\",\"url_range\":{\"start\":0,\"end\":35}}]}}"
#define H1 "0000000000000000000000000000000000000000000000000000000000000001"
#define H2 "0000000000000000000000000000000000000000000000000000000000000002"
#define NO TFS_XET_AT_UNKNOWN

static void test_map_facts(struct tfs_xet_map *m)
{
	struct tfs_diag d;
	CHECK(m->nchunk == 5 && m->at[0] == 0 && m->at[3] == 30 && m->at[1] == NO, "the terms' starts");
	CHECK(tfs_xet_map_chunk(m, 1, 6) == 4 && tfs_xet_map_term_of(m, 4) == 1 &&
		      tfs_xet_map_term_of(m, 2) == 0,
	      "chunk numbers");
	CHECK(tfs_xet_map_learn(m, 0, 10, NO, NULL, &d) == TFS_OK && m->at[1] == 10,
	      "a length places the next");
	CHECK(tfs_xet_map_find(m, 0, 5) == 0 && tfs_xet_map_find(m, 0, 10) == -1, "found where known");
	CHECK(tfs_xet_map_learn(m, 0, 11, NO, NULL, &d) != TFS_OK && one_line(&d), "another length: %s",
	      d.msg);
	CHECK(tfs_xet_map_learn(m, 1, 0, 12, NULL, &d) != TFS_OK, "another place: %s", d.msg);
	CHECK(tfs_xet_map_learn(m, 2, 9, 22, NULL, &d) != TFS_OK, "a last chunk past its term's end");
	CHECK(tfs_xet_map_learn(m, 2, 9, 20, NULL, &d) != TFS_OK, "a last chunk short of it");
	CHECK(m->len[2] == 0 && m->at[2] == NO, "a fact refused changes nothing");
	CHECK(tfs_xet_map_learn(m, 2, 10, 20, NULL, &d) == TFS_OK && m->len[1] == 0,
	      "the last chunk, from its place: %s", d.msg);
	CHECK(tfs_xet_map_learn(m, 1, 10, NO, NULL, &d) == TFS_OK && tfs_xet_map_find(m, 0, 15) == 1,
	      "between");
	/* an answer learnt whole or not at all */
	tfs_xet_map_begin(m);
	CHECK(tfs_xet_map_learn(m, 3, 5, 30, NULL, &d) == TFS_OK && m->at[4] == 35, "consistent so far");
	CHECK(tfs_xet_map_learn(m, 4, 16, NO, NULL, &d) != TFS_OK, "until its last chunk");
	tfs_xet_map_undo(m);
	CHECK(m->len[3] == 0 && m->at[4] == NO && m->at[3] == 30, "undone: %u %llu", m->len[3],
	      (unsigned long long)m->at[4]);
	/* from an anchor in the middle (a range's answer), backwards a chunk */
	CHECK(tfs_xet_map_learn(m, 4, 8, 42, NULL, &d) == TFS_OK && m->at[4] == 42, "an anchor");
	CHECK(tfs_xet_map_learn(m, 3, 12, NO, NULL, &d) == TFS_OK && m->at[3] == 30, "the chunk before it");
	CHECK(tfs_xet_map_learn(m, 3, 11, NO, NULL, &d) != TFS_OK, "which must meet it");
	CHECK(tfs_xet_map_learn(m, 5, 1, NO, NULL, &d) != TFS_OK, "past the chunks");
}

static void test_map_hash(struct tfs_xet_map *m)
{
	struct tfs_xet_node v[5];
	uint8_t want[32], got[32];
	struct tfs_diag d;
	CHECK(!tfs_xet_map_complete(m), "no hash yet");
	for (uint64_t g = 0; g < 5; g++) {
		unsigned char data[16];
		memset(data, (int)g, sizeof data);
		tfs_xet_chunk_hash(data, sizeof data, v[g].hash);
		v[g].len = m->len[g];
		CHECK(tfs_xet_map_learn(m, g, 0, NO, v[g].hash, &d) == TFS_OK, "hash %llu",
		      (unsigned long long)g);
	}
	uint8_t other[32] = {1};
	CHECK(tfs_xet_map_learn(m, 0, 0, NO, other, &d) != TFS_OK, "another hash");
	CHECK(tfs_xet_map_complete(m) && tfs_xet_map_file_hash(m, got, &d) == TFS_OK, "complete");
	tfs_xet_file_hash(v, 5, want);
	CHECK(memcmp(got, want, 32) == 0, "the file's hash over its chunks");
	tfs_xet_map_forget_hashes(m);
	CHECK(!tfs_xet_map_complete(m) && m->nhashed == 0, "forgotten");
}

static void test_map(void)
{
	current = "map";
	struct tfs_xet_plan p;
	struct tfs_xet_map *m = NULL;
	struct tfs_diag d;
	CHECK(tfs_xet_plan_parse(MAP_PLAN, strlen(MAP_PLAN), 0, 49, 50, &p, &d) == TFS_OK, "the plan: %s",
	      d.msg);
	CHECK(tfs_xet_map_new(&p, 50, &m, &d) == TFS_OK, "the map: %s", d.msg);
	if (m) {
		test_map_facts(m);
		test_map_hash(m);
		tfs_xet_map_free(m);
	}
	/* a term of more chunks than bytes, and more chunks than the size allows */
	p.term[1].unpacked = 1;
	CHECK(tfs_xet_map_new(&p, 50, &m, &d) != TFS_OK && one_line(&d), "%s", d.msg);
	p.term[1].unpacked = 20;
	p.term[1].end = 5 + 4000;
	CHECK(tfs_xet_map_new(&p, 50, &m, &d) != TFS_OK && one_line(&d), "%s", d.msg);
	tfs_xet_plan_free(&p);
}

int main(int argc, char **argv)
{
	check_args(argc, argv);
	RUN(test_blake3);
	RUN(test_hashes);
	RUN(test_chunks);
	RUN(test_plans);
	RUN(test_token);
	RUN(test_map);
	return check_report();
}
