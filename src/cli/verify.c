/* tensorfs --verify SOURCE [MANIFEST]: every tensor's hash, on every core,
 * compared with a manifest when one is given, and every file the server
 * vouches for (the Hub's LFS oid) checked whole. */
#include "cli/verify.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <openssl/evp.h>

#include "cli/daemon.h"
#include "cli/manifest.h"
#include "core/json.h"
#include "core/userfile.h"
#include "views/digest.h"
#include "views/sums.h"
#include "views/tree.h"

/* A manifest is at most this large (500,000 tensors' lines take 50 MB). */
#define MANIFEST_MAX (1u << 30)

static tfs_err read_manifest(const char *path, struct tfs_manifest *m, struct tfs_diag *d)
{
	char *text;
	size_t len;
	struct tfs_diag od;
	tfs_err e = tfs_file_read(NULL, path, MANIFEST_MAX, &text, &len, &od);
	if (e)
		return tfs_fail(d, e == TFS_ERR_NOMEM ? e : TFS_ERR_INVAL, "cannot open the manifest: %s",
				od.msg);
	e = tfs_manifest_parse(text, len, m, d);
	free(text);
	return e;
}

/* The progress line on a terminal, at most five times a second. */
struct progress {
	int on;
	uint64_t done, total;
	struct timespec last;
};

static void progress_cb(void *ctx, uint64_t bytes)
{
	struct progress *p = ctx;
	p->done += bytes;
	if (!p->on)
		return;
	struct timespec now;
	clock_gettime(CLOCK_MONOTONIC, &now);
	if ((now.tv_sec - p->last.tv_sec) * 1000000000L + (now.tv_nsec - p->last.tv_nsec) < 200000000L &&
	    p->done < p->total)
		return;
	p->last = now;
	fprintf(stderr, "\rtensorfs: hashing: %3.0f%% (%.2f of %.2f GB)",
		p->total ? 100.0 * p->done / p->total : 100.0, p->done / 1e9, p->total / 1e9);
	fflush(stderr);
}

/* Tensor files of the tree, in tree order. */
static uint32_t *tensor_nodes(const struct tfs_tree *t, size_t *n, uint64_t *bytes)
{
	uint32_t *v = malloc(((size_t)t->nnodes + 1) * sizeof *v);
	*n = 0;
	*bytes = 0;
	for (uint32_t i = 1; v && i < t->nnodes; i++)
		if (t->nodes[i].kind == TFS_NODE_TENSOR) {
			v[(*n)++] = i;
			*bytes += tfs_node_size(t, &t->nodes[i]);
		}
	return v;
}

static const char *tensor_name(const struct tfs_tree *t, uint32_t i, size_t *len)
{
	const struct tfs_node *n = &t->nodes[i];
	const struct tfs_table *h = &t->m->shards[n->shard].h;
	const struct tfs_tensor *x = &h->t[n->ref];
	*len = x->name_len;
	return tfs_tensor_name(h, x);
}

/* The node a manifest's name means: a tensor's name, or its file's name in
 * a flat mount (a __sha256sums__.txt of the root). */
static uint32_t find(const struct tfs_tree *t, const uint32_t *nodes, size_t n, const char *name)
{
	size_t nl = strlen(name);
	uint32_t i = tfs_tree_lookup(t, 1, name, nl);
	if (i && t->nodes[i].kind == TFS_NODE_TENSOR)
		return i;
	for (size_t k = 0; k < n; k++) {
		size_t l;
		const char *s = tensor_name(t, nodes[k], &l);
		if (l == nl && memcmp(s, name, nl) == 0)
			return nodes[k];
	}
	return 0;
}

static void put_name(FILE *f, const char *s, size_t n, int json)
{
	if (json) {
		tfs_json_fstr(f, s, n);
		return;
	}
	char q[400];
	tfs_quote(q, sizeof q, s, n);
	fputs(q, f);
}

/* A whole file against the SHA-256 its server vouches for: 0 same, 1 not,
 * -1 unreadable. */
static int check_file(struct tfs_source *src, char *got)
{
	EVP_MD_CTX *c = EVP_MD_CTX_new();
	size_t chunk = 4u << 20;
	unsigned char *buf = malloc(chunk), md[32];
	unsigned int ml = 32;
	int r = c && buf && EVP_DigestInit_ex(c, EVP_sha256(), NULL) == 1 ? 0 : -1;
	for (uint64_t off = 0; !r && off < src->id.size; off += chunk) {
		size_t n = src->id.size - off < chunk ? (size_t)(src->id.size - off) : chunk;
		if (tfs_source_serve(src, buf, n, off, src->id.size))
			r = -1;
		else
			EVP_DigestUpdate(c, buf, n);
	}
	if (!r) {
		EVP_DigestFinal_ex(c, md, &ml);
		for (int i = 0; i < 32; i++)
			sprintf(got + 2 * i, "%02x", md[i]);
		r = strcmp(got, src->sha256) != 0;
	}
	EVP_MD_CTX_free(c);
	free(buf);
	return r;
}

struct run {
	const struct tfs_tree *t;
	const char *source;
	int json;
	FILE *out;
	size_t mismatches, checked, missing;
};

static void mismatch(struct run *r, const char *name, size_t nl, const char *what, const char *want,
		     const char *got)
{
	r->mismatches++;
	if (r->json) {
		fputs(r->mismatches > 1 ? ",\n  {\"name\": " : "\n  {\"name\": ", r->out);
		put_name(r->out, name, nl, 1);
		fprintf(r->out, ", \"what\": \"%s\", \"expected\": \"%s\", \"actual\": \"%s\"}", what, want,
			got);
		return;
	}
	put_name(r->out, name, nl, 0);
	if (*got)
		fprintf(r->out, ": %s differs: expected %s, got %s\n", what, want, got);
	else
		fprintf(r->out, ": %s\n", what);
}

/* Every shard the server vouches for, read whole. */
static int check_files(struct run *r, const struct tfs_model *m, struct tfs_diag *d)
{
	for (uint32_t s = 0; s < m->nshards; s++) {
		struct tfs_source *src = m->shards[s].src;
		char got[80];
		if (!src || !src->sha256[0])
			continue;
		int k = check_file(src, got);
		if (k < 0) {
			tfs_fail(d, TFS_ERR_IO, "%s: cannot be read whole", m->shards[s].name);
			return -1;
		}
		r->checked++;
		if (k)
			mismatch(r, m->shards[s].name, strlen(m->shards[s].name),
				 "file sha256 (the Hub's LFS oid)", src->sha256, got);
	}
	return 0;
}

static void compare(struct run *r, const struct tfs_manifest *man, const uint32_t *nodes, size_t n)
{
	for (size_t k = 0; k < man->n; k++) {
		const struct tfs_manifest_entry *x = &man->e[k];
		uint32_t i = find(r->t, nodes, n, x->name);
		char hex[80];
		if (!i) {
			r->missing++;
			mismatch(r, x->name, strlen(x->name), "in the manifest, not in the checkpoint",
				 x->hex, "");
			continue;
		}
		size_t nl;
		const char *name = tensor_name(r->t, i, &nl);
		r->checked++;
		if (!tfs_digest_known(r->t, i, x->a, hex))
			continue; /* (hashed above, unless memory ran out) */
		if (strcmp(hex, x->hex) != 0)
			mismatch(r, name, nl, tfs_digest_name(x->a), x->hex, hex);
	}
}

/* No manifest: one in sha256sum's form (xxh64sum's with xxh64) on out. */
static void print_manifest(struct run *r, const uint32_t *nodes, size_t n, enum tfs_digest_algo a)
{
	for (size_t k = 0; k < n; k++) {
		char hex[80];
		size_t nl;
		const char *name = tensor_name(r->t, nodes[k], &nl);
		if (!tfs_digest_known(r->t, nodes[k], a, hex))
			continue;
		if (r->json) {
			fputs(k ? ",\n  {\"name\": " : "\n  {\"name\": ", r->out);
			put_name(r->out, name, nl, 1);
			fprintf(r->out, ", \"%s\": \"%s\"}", tfs_digest_name(a), hex);
			continue;
		}
		size_t hl = strlen(hex);
		char *line = malloc(tfs_sum_line_len(hl, name, nl));
		if (line) {
			fwrite(line, 1, tfs_sum_line(line, hex, hl, name, nl), r->out);
			free(line);
		}
	}
}

int tfs_verify(const struct tfs_model *m, const char *source, const char *manifest_path, int xxh64, int json,
	       FILE *out)
{
	struct tfs_manifest man = {0};
	struct tfs_diag d = {{0}};
	struct tfs_tree t;
	struct tfs_tree_opts to = {.layout = TFS_LAYOUT_FLAT};
	tfs_err e = manifest_path ? read_manifest(manifest_path, &man, &d) : TFS_OK;
	if (e) {
		fprintf(stderr, "tensorfs: %s: %s\n", manifest_path, d.msg);
		tfs_manifest_free(&man);
		return e == TFS_ERR_NOMEM ? TFS_EXIT_INTERNAL : TFS_EXIT_USAGE;
	}
	if ((e = tfs_tree_build(m, &to, &t, &d))) {
		fprintf(stderr, "tensorfs: %s: %s\n", source, d.msg);
		tfs_manifest_free(&man);
		return TFS_EXIT_INTERNAL;
	}
	size_t n;
	struct progress p = {.on = isatty(2)};
	uint32_t *nodes = tensor_nodes(&t, &n, &p.total);
	int want[TFS_DIGEST_COUNT] = {0};
	if (!manifest_path)
		want[xxh64 ? TFS_DIGEST_XXH64 : TFS_DIGEST_SHA256] = 1;
	for (size_t k = 0; k < man.n; k++)
		want[man.e[k].a] = 1;
	long cpus = sysconf(_SC_NPROCESSORS_ONLN);
	e = nodes ? TFS_OK : tfs_fail(&d, TFS_ERR_NOMEM, "out of memory");
	for (int a = 0; !e && a < TFS_DIGEST_COUNT; a++) {
		if (!want[a])
			continue;
		p.done = 0;
		e = tfs_digest_nodes(&t, nodes, n, (enum tfs_digest_algo)a, cpus > 0 ? (unsigned)cpus : 1,
				     progress_cb, &p, &d);
	}
	if (p.on)
		fputs("\r\033[K", stderr);
	struct run r = {.t = &t, .source = source, .json = json, .out = out};
	int rc = TFS_EXIT_OK;
	if (e) {
		fprintf(stderr, "tensorfs: %s: %s\n", source, d.msg);
		rc = e == TFS_ERR_NOMEM ? TFS_EXIT_INTERNAL : TFS_EXIT_SOURCE;
	} else {
		if (json) {
			fputs("{\"source\": ", out);
			put_name(out, source, strlen(source), 1);
			fputs(manifest_path ? ", \"mismatches\": [" : ", \"tensors\": [", out);
		}
		if (manifest_path)
			compare(&r, &man, nodes, n);
		else
			print_manifest(&r, nodes, n, xxh64 ? TFS_DIGEST_XXH64 : TFS_DIGEST_SHA256);
		if (json && !manifest_path)
			fputs("\n], \"mismatches\": [", out);
		if (check_files(&r, m, &d)) {
			fprintf(stderr, "tensorfs: %s: %s\n", source, d.msg);
			rc = TFS_EXIT_SOURCE;
		}
		if (json)
			fprintf(out, "%s], \"checked\": %zu, \"tensors_hashed\": %zu, \"ok\": %s}\n",
				r.mismatches ? "\n" : "", r.checked, n, r.mismatches ? "false" : "true");
		if (!rc && r.mismatches)
			rc = TFS_EXIT_MISMATCH;
		if (manifest_path || r.checked)
			fprintf(stderr, "tensorfs: %s: %zu checked, %zu mismatched%s\n", source, r.checked,
				r.mismatches,
				man.bad ? " (some manifest lines were not checksum lines)" : "");
	}
	free(nodes);
	tfs_tree_free(&t);
	tfs_manifest_free(&man);
	return rc;
}
