/* Unit tests of the tools (tools/tools.h) with no mount: --inspect,
 * --verify (with and without a manifest, a mismatch, a missing manifest),
 * diff (the same checkpoint, one value changed, the tensors only B has in
 * B's order), the model's lookup by name, --stats and --list, each
 * called as a library function over a checkpoint opened through the one
 * pipeline (fs/mount.h), its results read from a memory stream and its
 * exit class checked. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <openssl/evp.h>

#include "compute/compare.h"
#include "fs/mount.h"
#include "model/lookup.h"
#include "tools/tools.h"

#include "check.h"

/* The tools by name (tools/registry.c names them for everyone else). */
extern const struct tfs_tool tfs_tool_inspect, tfs_tool_verify, tfs_tool_stats, tfs_tool_diff, tfs_tool_list;

/* w: F32 2x3, 1..6 (the last one given); b: F32 2. */
static char path_a[64], path_b[64], path_m[64];

static void make_file(char *path, float last)
{
	const char *hd = "{\"w\":{\"dtype\":\"F32\",\"shape\":[2,3],\"data_offsets\":[0,24]},"
			 "\"b\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[24,32]}}";
	char hdr[256];
	size_t hl = strlen(hd), pad = (8 - hl % 8) % 8;
	memcpy(hdr, hd, hl);
	memset(hdr + hl, ' ', pad);
	hl += pad;
	unsigned char len8[8];
	for (int i = 0; i < 8; i++)
		len8[i] = (unsigned char)((uint64_t)hl >> (8 * i));
	float data[8] = {1, 2, 3, 4, 5, last, -1, 0.5f};
	strcpy(path, "/tmp/tfs-test-tools-XXXXXX");
	int fd = mkstemp(path);
	if (fd < 0 || write(fd, len8, 8) != 8 || write(fd, hdr, hl) != (ssize_t)hl ||
	    write(fd, data, sizeof data) != (ssize_t)sizeof data) {
		perror("test file");
		exit(1);
	}
	close(fd);
}

/* A checkpoint of one-element F32 tensors named names[0..n), in order. */
static void make_named(char *path, const char *const *names, int n)
{
	char hd[1024];
	size_t hl = 1;
	hd[0] = '{';
	for (int i = 0; i < n; i++)
		hl += (size_t)snprintf(hd + hl, sizeof hd - hl,
				       "%s\"%s\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[%d,%d]}",
				       i ? "," : "", names[i], 4 * i, 4 * i + 4);
	hd[hl++] = '}';
	while (hl % 8)
		hd[hl++] = ' ';
	unsigned char len8[8], zeros[4 * 16] = {0};
	for (int i = 0; i < 8; i++)
		len8[i] = (unsigned char)((uint64_t)hl >> (8 * i));
	strcpy(path, "/tmp/tfs-test-tools-XXXXXX");
	int fd = mkstemp(path);
	if (fd < 0 || write(fd, len8, 8) != 8 || write(fd, hd, hl) != (ssize_t)hl ||
	    write(fd, zeros, (size_t)(4 * n)) != 4 * n) {
		perror("test file");
		exit(1);
	}
	close(fd);
}

static void sha256_hex(const void *p, size_t n, char *hex)
{
	unsigned char md[32];
	unsigned int ml = 32;
	EVP_Digest(p, n, md, &ml, EVP_sha256(), NULL);
	for (int i = 0; i < 32; i++)
		sprintf(hex + 2 * i, "%02x", md[i]);
}

static struct tfs_model_opts model_opts;

static int open_one(const char *path, struct tfs_mount *m)
{
	char line[TFS_MOUNT_LINE_MAX];
	struct tfs_mount_opts o = {.source = path, .shown = path, .model = &model_opts, .tree = 1};
	if (tfs_mount_open(&o, m, line, sizeof line) != TFS_OK) {
		fprintf(stderr, "open %s: %s\n", path, line);
		return -1;
	}
	return 0;
}

/* Runs tool t over a (and b), its results into *text (freed by the
 * caller) and `got`; its exit class. */
static struct tfs_tool_result got;

static int run(const struct tfs_tool *t, struct tfs_tool_args *a, char **text)
{
	size_t len;
	memset(&got, 0xff, sizeof got);
	a->result = &got;
	a->out = open_memstream(text, &len);
	if (!a->out)
		abort();
	int rc = t->run(a);
	fclose(a->out);
	return rc;
}

static void test_registry(void)
{
	CHECK(tfs_tool_named("--verify") == &tfs_tool_verify, "--verify is in the table");
	CHECK(tfs_tool_named("diff") == &tfs_tool_diff && tfs_tool_diff.sources == 2, "diff opens two");
	CHECK(tfs_tool_named("--mount") == NULL, "no such tool");
	int n = 0;
	for (const struct tfs_tool *const *t = tfs_tools; *t; t++)
		n += (*t)->run != NULL && (*t)->usage != NULL;
	CHECK(n == 5, "five tools, each with its usage: %d", n);
}

static void test_inspect(void)
{
	struct tfs_mount m;
	if (open_one(path_a, &m)) {
		CHECK(0, "open");
		return;
	}
	char *text = NULL;
	struct tfs_tool_args a = {.a = &m, .shown = path_a};
	int rc = run(&tfs_tool_inspect, &a, &text);
	CHECK(rc == TFS_EXIT_OK && got.tensors == 2, "inspect: %d, %llu tensors", rc,
	      (unsigned long long)got.tensors);
	CHECK(text && strstr(text, "w") && strstr(text, "F32") && strstr(text, "[2, 3]"), "the table: %s",
	      text);
	free(text);
	a.json = 1;
	rc = run(&tfs_tool_inspect, &a, &text);
	CHECK(rc == TFS_EXIT_OK && text && text[0] == '{' && strstr(text, "\"w\""), "inspect --json: %s",
	      text);
	free(text);
	tfs_mount_close(&m);
}

static void test_verify(void)
{
	struct tfs_mount m;
	if (open_one(path_a, &m)) {
		CHECK(0, "open");
		return;
	}
	float w[6] = {1, 2, 3, 4, 5, 6}, b[2] = {-1, 0.5f};
	char hw[65], hb[65], want[256];
	sha256_hex(w, sizeof w, hw);
	sha256_hex(b, sizeof b, hb);
	/* No manifest: one in sha256sum's form, a line per tensor. */
	char *text = NULL;
	struct tfs_tool_args a = {.a = &m, .shown = path_a};
	int rc = run(&tfs_tool_verify, &a, &text);
	snprintf(want, sizeof want, "%s  w\n", hw);
	CHECK(rc == TFS_EXIT_OK && text && strstr(text, want), "the manifest: %s", text);
	CHECK(got.tensors == 2 && got.checked == 0 && got.differ == 0 && got.missing == 0,
	      "hashed, none checked");
	snprintf(want, sizeof want, "%s  b\n", hb);
	CHECK(text && strstr(text, want), "b's line: %s", text);
	free(text);
	/* A manifest that agrees, then one that does not. */
	for (int bad = 0; bad < 2; bad++) {
		FILE *f = fopen(path_m, "w");
		fprintf(f, "%s  w\n%s  b\n", hw, bad ? hw : hb);
		fclose(f);
		a.manifest = path_m;
		rc = run(&tfs_tool_verify, &a, &text);
		CHECK(rc == (bad ? TFS_EXIT_MISMATCH : TFS_EXIT_OK), "verify against a manifest (bad %d): %d",
		      bad, rc);
		CHECK(!bad || (text && strstr(text, "b") && strstr(text, "differs")),
		      "the mismatch named: %s", text);
		CHECK(got.checked == 2 && got.differ == (uint64_t)bad && got.missing == 0,
		      "the counts (bad %d)", bad);
		free(text);
	}
	/* A manifest that is not there: a usage error, nothing hashed. */
	a.manifest = "/nonexistent/manifest.sha256";
	rc = run(&tfs_tool_verify, &a, &text);
	CHECK(rc == TFS_EXIT_USAGE, "a missing manifest: %d", rc);
	free(text);
	/* --xxh64 --json. */
	a.manifest = NULL;
	a.xxh64 = a.json = 1;
	rc = run(&tfs_tool_verify, &a, &text);
	CHECK(rc == TFS_EXIT_OK && text && strstr(text, "\"xxh64\"") && strstr(text, "\"ok\": true"),
	      "json: %s", text);
	free(text);
	tfs_mount_close(&m);
}

static void test_diff(void)
{
	struct tfs_mount ma, mb;
	if (open_one(path_a, &ma) || open_one(path_b, &mb)) {
		CHECK(0, "open");
		return;
	}
	char *text = NULL;
	struct tfs_tool_args a = {.a = &ma, .b = &ma, .shown = "A", .shown_b = "A"};
	int rc = run(&tfs_tool_diff, &a, &text);
	CHECK(rc == 0 && text && strstr(text, "2 identical"), "the same: %d %s", rc, text);
	CHECK(got.tensors == 2 && got.differ == 0 && got.missing == 0, "the same: the counts");
	free(text);
	a.b = &mb;
	a.shown_b = "B";
	rc = run(&tfs_tool_diff, &a, &text);
	CHECK(rc == 1 && text && strstr(text, "1 identical") && strstr(text, "1 differ"),
	      "one differs: %d %s", rc, text);
	CHECK(got.tensors == 2 && got.differ == 1 && got.missing == 0, "one differs: the counts");
	free(text);
	a.json = 1;
	rc = run(&tfs_tool_diff, &a, &text);
	CHECK(rc == 1 && text && strstr(text, "\"same\": false"), "json: %s", text);
	free(text);
	tfs_mount_close(&mb);
	tfs_mount_close(&ma);
}

/* The tensors only B has come in B's order (they came in a hash's), and
 * the model's lookup finds each tensor where it is. */
static void test_diff_order(void)
{
	static const char *const a_names[] = {"w"}, *const b_names[] = {"w", "z", "a", "m", "q", "b"};
	char pa[64], pb[64];
	make_named(pa, a_names, 1);
	make_named(pb, b_names, 6);
	struct tfs_mount ma, mb;
	if (open_one(pa, &ma) || open_one(pb, &mb)) {
		CHECK(0, "open");
		return;
	}
	struct tfs_model_names *nm = NULL;
	struct tfs_model_pos at;
	CHECK(tfs_model_names_new(&mb.model, &nm) == TFS_OK, "the lookup");
	CHECK(nm && tfs_model_find(nm, "q", 1, &at) && at.shard == 0 && at.idx == 4 && at.n == 4,
	      "q is the fifth");
	CHECK(nm && !tfs_model_find(nm, "qq", 2, &at) && !tfs_model_find(nm, "", 0, &at), "no such tensor");
	tfs_model_names_free(nm);
	char *text = NULL;
	struct tfs_tool_args a = {.a = &ma, .b = &mb, .shown = "A", .shown_b = "B", .json = 1};
	int rc = run(&tfs_tool_diff, &a, &text);
	const char *p = text;
	int in_order = rc == 1;
	for (int i = 1; i < 6 && p; i++) {
		char want[32];
		snprintf(want, sizeof want, "\"name\": \"%s\"", b_names[i]);
		p = strstr(p, want);
		in_order &= p != NULL;
	}
	CHECK(in_order, "only in B, in B's order: %s", text);
	CHECK(got.tensors == 6 && got.differ == 0 && got.missing == 5, "five only in B");
	free(text);
	tfs_mount_close(&mb);
	tfs_mount_close(&ma);
	unlink(pa);
	unlink(pb);
}

/* diff's figures (compute/compare.h): NaN meets NaN, an infinity only the
 * same one, the largest difference of the finite pairs. */
static void test_compare(void)
{
	struct tfs_compare f;
	const double x[] = {1, 2, NAN, INFINITY, 5}, y[] = {1, 3, NAN, -INFINITY, 5};
	tfs_compare_init(&f);
	tfs_compare_pairs(&f, x, y, 5);
	CHECK(f.max_abs == 1 && f.d2 == 1 && f.a2 == 30 && f.b2 == 35 && f.ab == 32,
	      "the sums: %g %g %g %g %g", f.max_abs, f.d2, f.a2, f.b2, f.ab);
	CHECK(f.nan_a == 1 && f.nan_b == 1 && f.inf_a == 1 && f.inf_b == 1 && f.unmatched == 1,
	      "NaN and Inf: %llu %llu %llu", (unsigned long long)f.nan_a, (unsigned long long)f.inf_b,
	      (unsigned long long)f.unmatched);
	/* Values near DBL_MAX: the difference kept halved, the sums finite. */
	const double bx[] = {1e308}, by[] = {-1e308};
	tfs_compare_init(&f);
	tfs_compare_pairs(&f, bx, by, 1);
	CHECK(f.max_over && f.max_abs == 1e308 && isfinite(f.d2) && f.scale > 0, "past DBL_MAX: %g",
	      f.max_abs);
}

static void test_stats(void)
{
	struct tfs_mount m;
	if (open_one(path_a, &m)) {
		CHECK(0, "open");
		return;
	}
	char *text = NULL;
	struct tfs_tool_args a = {.a = &m, .shown = path_a, .json = 1};
	int rc = run(&tfs_tool_stats, &a, &text);
	CHECK(rc == TFS_EXIT_OK && got.tensors == 2, "stats: %d", rc);
	/* w: 1..6, mean 3.5, min 1, max 6. */
	const char *w = text ? strstr(text, "\"w\"") : NULL;
	CHECK(w && strstr(w, "\"mean\": 3.5") && strstr(w, "\"min\": 1") && strstr(w, "\"max\": 6"),
	      "w's: %s", text);
	free(text);
	tfs_mount_close(&m);
}

/* Two mounts in one process share no stop: a long computation over one
 * stopped (its unmount) gives up, the other's goes on. */
static void test_stop_is_the_mounts(void)
{
	struct tfs_mount m1, m2;
	if (open_one(path_a, &m1) || open_one(path_a, &m2)) {
		CHECK(0, "open");
		return;
	}
	tfs_sources_start(m1.model.sources);
	tfs_sources_start(m2.model.sources);
	tfs_sources_stop(m1.model.sources);
	char *text = NULL;
	struct tfs_tool_args a = {.a = &m2, .shown = path_a, .json = 1};
	int rc = run(&tfs_tool_stats, &a, &text);
	CHECK(rc == TFS_EXIT_OK && got.tensors == 2, "the other mount's stats: %d", rc);
	free(text);
	text = NULL;
	a.a = &m1;
	rc = run(&tfs_tool_stats, &a, &text);
	CHECK(rc == TFS_EXIT_SOURCE, "the stopped mount's stats gave up: %d", rc);
	CHECK(tfs_sources_stopped(m1.model.sources) && !tfs_sources_stopped(m2.model.sources),
	      "one stop each");
	free(text);
	tfs_mount_close(&m2);
	tfs_mount_close(&m1);
}

static void test_list(void)
{
	char *text = NULL;
	struct tfs_tool_args a = {0};
	int rc = run(&tfs_tool_list, &a, &text);
	CHECK(rc == TFS_EXIT_OK, "list: %d", rc);
	free(text);
}

int main(int argc, char **argv)
{
	check_args(argc, argv);
	make_file(path_a, 6);
	make_file(path_b, 7);
	strcpy(path_m, "/tmp/tfs-test-tools-m-XXXXXX");
	int fd = mkstemp(path_m);
	if (fd < 0)
		return 1;
	close(fd);
	RUN(test_registry);
	RUN(test_inspect);
	RUN(test_verify);
	RUN(test_diff);
	RUN(test_diff_order);
	RUN(test_compare);
	RUN(test_stats);
	RUN(test_stop_is_the_mounts);
	RUN(test_list);
	unlink(path_a);
	unlink(path_b);
	unlink(path_m);
	return check_report();
}
