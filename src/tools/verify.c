/* tensorfs --verify SOURCE [MANIFEST]: every tensor's hash, on every core,
 * compared with a manifest when one is given, and every file the server
 * vouches for (the Hub's LFS oid) checked whole. */
#include "tools/verify.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <openssl/evp.h>

#include "core/exit.h"
#include "compute/manifest.h"
#include "core/json.h"
#include "core/names.h"
#include "core/userfile.h"
#include "model/lookup.h"
#include "views/tree_digest.h"
#include "views/tree.h"

/* A manifest is at most this large (500,000 tensors' lines take 50 MB). */
#define MANIFEST_MAX (1u << 30)

/* Reads the manifest a block at a time, each line into m as it comes
 * (compute/manifest.h): its text is never held whole. */
static tfs_err read_manifest(const char *path, struct tfs_manifest *m, struct tfs_diag *d)
{
	int fd;
	struct stat st;
	struct tfs_diag od;
	tfs_err oe = tfs_file_open(NULL, path, MANIFEST_MAX, NULL, &fd, &st, &od);
	if (oe)
		return tfs_fail(d, oe == TFS_ERR_NOMEM ? oe : TFS_ERR_INVAL, "cannot open the manifest: %s",
				od.msg);
	FILE *f = fdopen(fd, "r");
	if (!f) {
		close(fd);
		return tfs_fail(d, TFS_ERR_NOMEM, "out of memory");
	}
	size_t bsz = 1u << 16, len = 0, got;
	char *buf = malloc(bsz), *line = malloc(TFS_MANIFEST_LINE_MAX + 1);
	uint64_t total = 0;
	int skipping = 0; /* in a line past TFS_MANIFEST_LINE_MAX */
	tfs_err e = buf && line ? TFS_OK : tfs_fail(d, TFS_ERR_NOMEM, "out of memory");
	while (!e && (got = fread(buf, 1, bsz, f)) > 0) {
		if ((total += got) > MANIFEST_MAX) {
			e = tfs_fail(d, TFS_ERR_INVAL, "the manifest is over 1 GiB");
			break;
		}
		for (size_t i = 0; !e && i < got;) {
			char *nl = memchr(buf + i, '\n', got - i);
			size_t k = nl ? (size_t)(nl - (buf + i)) : got - i;
			if (!skipping && len + k > TFS_MANIFEST_LINE_MAX)
				skipping = 1;
			if (!skipping) {
				memcpy(line + len, buf + i, k);
				len += k;
			}
			i += k;
			if (!nl)
				break;
			i++;
			if (skipping) {
				m->lines++;
				m->bad++;
			} else if (tfs_manifest_line(m, line, len)) {
				e = tfs_fail(d, TFS_ERR_NOMEM, "out of memory");
			}
			len = 0;
			skipping = 0;
		}
	}
	if (!e && ferror(f))
		e = tfs_fail(d, TFS_ERR_INVAL, "cannot read the manifest");
	if (!e && skipping) {
		m->lines++;
		m->bad++;
	} else if (!e && len && tfs_manifest_line(m, line, len)) {
		e = tfs_fail(d, TFS_ERR_NOMEM, "out of memory");
	}
	fclose(f);
	free(buf);
	free(line);
	return e ? e : tfs_manifest_done(m, d);
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

/* The tensor files by tensor name, through the model's lookup (a
 * manifest of 100,000 names none of which is in the checkpoint was a
 * search of every tensor for each): the flat tree's tensor files come in
 * the model's order, so a tensor's number there is its file's. */
struct index {
	const struct tfs_tree *t;
	const uint32_t *nodes; /* the tensor files, in the model's order */
	struct tfs_model_names *names;
};

static uint32_t node_named(const struct index *x, const char *s, size_t n)
{
	struct tfs_model_pos at;
	return tfs_model_find(x->names, s, n, &at) ? x->nodes[at.n] : 0;
}

/* The node a manifest's name means: the file name of a flat mount of the
 * checkpoint (what --verify and a mount root's __sha256sums__.txt write);
 * the same with the name mapping undone (a mount with -o pictures or
 * stats shows a tensor "x.png" as x%2Epng, and the empty name as %empty);
 * else a tensor's name as it is (llama-gguf-hash's, a hand-made list). */
static uint32_t resolve(void *ctx, const char *name, size_t nl)
{
	const struct index *x = ctx;
	uint32_t i = tfs_tree_lookup(x->t, 1, name, nl);
	if (i && x->t->nodes[i].kind == TFS_NODE_TENSOR)
		return i;
	char raw[TFS_NAME_MAX + 1];
	long k = memchr(name, '%', nl) ? tfs_name_unmap(name, nl, raw, sizeof raw) : -1;
	if (k >= 0 && (i = node_named(x, raw, (size_t)k)))
		return i;
	return node_named(x, name, nl);
}

/* -o layout=tree,sums writes a __sha256sums__.txt in each directory that
 * names that directory's files alone, so that sha256sum -c checks them
 * there. Such a manifest is read against the directory of the checkpoint's
 * tree layout that the manifest's own path ends in (.../model/layers/0/ is
 * model/layers/0, the longest such end), when that finds more of its names
 * than reading them as a flat mount's. */
struct in_dir {
	const struct index *x;    /* the flat tree's, whose nodes are hashed */
	const struct tfs_tree *t; /* the tree layout */
	uint32_t dir;
};

static uint32_t resolve_in_dir(void *ctx, const char *name, size_t nl)
{
	const struct in_dir *r = ctx;
	uint32_t i = tfs_tree_lookup(r->t, r->dir, name, nl);
	if (!i || r->t->nodes[i].kind != TFS_NODE_TENSOR)
		return 0;
	size_t l;
	const char *tn = tensor_name(r->t, i, &l);
	return node_named(r->x, tn, l);
}

/* The directory (not the root) of t that the longest end of path's own
 * directory names, or 0. */
static uint32_t dir_of(const struct tfs_tree *t, const char *path)
{
	const char *end = strrchr(path, '/');
	for (const char *start = path; end && start < end;) {
		uint32_t dir = TFS_TREE_ROOT;
		for (const char *p = start; dir && p < end;) {
			const char *q = memchr(p, '/', (size_t)(end - p));
			if (!q)
				q = end;
			if (q > p) {
				uint32_t c = tfs_tree_lookup(t, dir, p, (size_t)(q - p));
				dir = c && t->nodes[c].kind == TFS_NODE_DIR ? c : 0;
			}
			p = q + 1;
		}
		if (dir && dir != TFS_TREE_ROOT)
			return dir;
		const char *next = memchr(start + 1, '/', (size_t)(end - start - 1));
		start = next ? next + 1 : end;
	}
	return 0;
}

static size_t missing_names(const struct tfs_manifest *man)
{
	size_t k = 0;
	for (size_t i = 0; i < man->n; i++)
		k += !man->e[i].node;
	return k;
}

/* *man read again as a tree-layout directory's manifest, when its path
 * names such a directory and that finds more of its names. */
static tfs_err try_tree_dir(const struct tfs_model *m, const struct tfs_opts *opts, const char *path,
			    const struct index *x, struct tfs_manifest *man, struct tfs_diag *d)
{
	struct tfs_tree t;
	struct tfs_tree_opts to = {.layout = TFS_LAYOUT_TREE, .opts = opts};
	struct tfs_diag td;
	if (tfs_tree_build(m, &to, &t, &td))
		return TFS_OK; /* (out of memory: the manifest stays as it was read) */
	/* The manifest's directory resolved, its own name kept (no "." or ".."
	 * in the walk; a manifest that is a link is read where it is named). */
	const char *slash = strrchr(path, '/');
	char *dir = slash ? strndup(path, (size_t)(slash - path) + 1) : NULL;
	char *real = dir ? realpath(dir, NULL) : NULL, *at = NULL;
	if (real && asprintf(&at, "%s/", real) < 0)
		at = NULL;
	struct in_dir r = {.x = x, .t = &t, .dir = dir_of(&t, at ? at : path)};
	free(at);
	free(real);
	free(dir);
	tfs_err e = TFS_OK;
	if (r.dir) {
		struct tfs_manifest again = {.resolve = resolve_in_dir, .ctx = &r};
		e = read_manifest(path, &again, d);
		if (!e && missing_names(&again) < missing_names(man)) {
			tfs_manifest_free(man);
			*man = again;
			man->resolve = NULL;
			man->ctx = NULL;
		} else {
			tfs_manifest_free(&again);
		}
	}
	tfs_tree_free(&t);
	return e;
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
			char q[TFS_QPATH_MAX];
			tfs_fail(d, TFS_ERR_IO, "%s: cannot be read whole",
				 tfs_quote_path(q, sizeof q, m->shards[s].name));
			return -1;
		}
		r->checked++;
		if (k)
			mismatch(r, m->shards[s].name, strlen(m->shards[s].name),
				 "file sha256 (the Hub's LFS oid)", src->sha256, got);
	}
	return 0;
}

static void compare(struct run *r, const struct tfs_manifest *man)
{
	for (size_t k = 0; k < man->n; k++) {
		const struct tfs_manifest_entry *x = &man->e[k];
		char hex[80], want[80];
		tfs_manifest_hex(x, want);
		if (!x->node) {
			size_t ml = 0;
			const char *name = tfs_manifest_name(man, x, &ml);
			r->missing++;
			mismatch(r, name, ml, "in the manifest, not in the checkpoint", want, "");
			continue;
		}
		size_t nl;
		const char *name = tensor_name(r->t, x->node, &nl);
		r->checked++;
		if (!tfs_digest_known(r->t, x->node, (enum tfs_digest_algo)x->a, hex))
			continue; /* (hashed above, unless memory ran out) */
		if (strcmp(hex, want) != 0)
			mismatch(r, name, nl, tfs_digest_name((enum tfs_digest_algo)x->a), want, hex);
	}
}

/* A manifest whose every missing name is a tensor's file name with .npy
 * added, that tensor's file having no NPY header here: one written with -o
 * format=npy (a mount's __sha256sums__.txt, or --verify -o format=npy),
 * checked without it. */
static int npy_names(const struct tfs_manifest *man, const struct index *x)
{
	size_t npy = 0;
	for (size_t k = 0; k < man->n; k++) {
		size_t nl = 0;
		const char *name = man->e[k].node ? NULL : tfs_manifest_name(man, &man->e[k], &nl);
		if (!name)
			continue;
		if (nl <= 4 || memcmp(name + nl - 4, ".npy", 4) != 0)
			return 0;
		uint32_t i = resolve((void *)x, name, nl - 4);
		if (!i || x->t->nodes[i].first)
			return 0;
		npy++;
	}
	return npy > 0;
}

/* When the manifest's names are not in the checkpoint, the likely cause is
 * said first, before a line for each missing name: names of a -o
 * format=npy mount, or (most of them missing) a manifest of another model
 * (or of another checkpoint of it). */
static void other_model(const struct tfs_manifest *man, const struct index *x, const char *manifest_path,
			const char *shown)
{
	size_t missing = missing_names(man);
	char qm[TFS_QPATH_MAX];
	tfs_quote_path(qm, sizeof qm, manifest_path);
	if (npy_names(man, x))
		fprintf(stderr,
			"tensorfs: %s: its names are the tensors' names with .npy added: it was written with -o "
			"format=npy; check it with the same -o (tensorfs --verify -o format=npy SOURCE MANIFEST)\n",
			qm);
	else if (man->n >= 2 && missing * 2 > man->n)
		fprintf(stderr,
			"tensorfs: %s: %zu of its %zu names are not in %s: this manifest seems to be of another "
			"model\n",
			qm, missing, man->n, shown);
	fflush(stderr);
}

/* No manifest: one in sha256sum's form (xxh64sum's with xxh64) on out,
 * naming each tensor by its file name in a flat mount (docs/mounting.md, "File
 * names": control characters, '/' and '%' as %XX, the empty name as
 * %empty), as a mount root's __sha256sums__.txt does: one rule, which
 * --verify reads back, sha256sum -c checks in a mount's root, and no
 * terminal takes for an escape sequence. */
static void print_manifest(struct run *r, const uint32_t *nodes, size_t n, enum tfs_digest_algo a)
{
	for (size_t k = 0; k < n; k++) {
		char hex[80];
		size_t nl;
		const char *name = tensor_name(r->t, nodes[k], &nl);
		const struct tfs_node *fn = &r->t->nodes[nodes[k]];
		if (!tfs_digest_known(r->t, nodes[k], a, hex))
			continue;
		if (r->json) {
			fputs(k ? ",\n  {\"name\": " : "\n  {\"name\": ", r->out);
			put_name(r->out, name, nl, 1);
			fprintf(r->out, ", \"%s\": \"%s\"}", tfs_digest_name(a), hex);
			continue;
		}
		size_t hl = strlen(hex);
		char *line = malloc(tfs_sum_line_len(hl, fn->fname, fn->fname_len));
		if (line) {
			fwrite(line, 1, tfs_sum_line(line, hex, hl, fn->fname, fn->fname_len), r->out);
			free(line);
		}
	}
}

/* Every tensor file's digest in each algorithm the manifest names (or,
 * without one, SHA-256 or XXH64), on every core, with the progress line. */
static tfs_err hash_all(const struct tfs_tree *tree, const uint32_t *nodes, size_t n,
			const struct tfs_manifest *man, int xxh64, struct progress *p, struct tfs_diag *d)
{
	int want[TFS_DIGEST_COUNT] = {0};
	if (!man)
		want[xxh64 ? TFS_DIGEST_XXH64 : TFS_DIGEST_SHA256] = 1;
	for (size_t k = 0; man && k < man->n; k++)
		want[man->e[k].a] = 1;
	long cpus = sysconf(_SC_NPROCESSORS_ONLN);
	tfs_err e = TFS_OK;
	for (int a = 0; !e && a < TFS_DIGEST_COUNT; a++) {
		if (!want[a])
			continue;
		p->done = 0;
		e = tfs_digest_nodes(tree, nodes, n, (enum tfs_digest_algo)a, cpus > 0 ? (unsigned)cpus : 1,
				     progress_cb, p, d);
	}
	if (p->on)
		fputs("\r\033[K", stderr);
	return e;
}

int tfs_verify(const struct tfs_tree *tree, const struct tfs_opts *opts, const char *source,
	       const char *manifest_path, int xxh64, int json, FILE *out, struct tfs_tool_result *res)
{
	const struct tfs_model *m = tree->m;
	struct tfs_manifest man = {0};
	struct tfs_diag d = {{0}};
	char qs[TFS_QPATH_MAX], qm[TFS_QPATH_MAX];
	const char *shown = tfs_quote_path(qs, sizeof qs, source);
	size_t n;
	struct progress p = {.on = isatty(2)};
	uint32_t *nodes = tensor_nodes(tree, &n, &p.total);
	struct index ix = {.t = tree, .nodes = nodes};
	tfs_err e = nodes && !tfs_model_names_new(m, &ix.names)
			    ? TFS_OK
			    : tfs_fail(&d, TFS_ERR_NOMEM, "out of memory");
	if (!e && manifest_path) {
		man.resolve = resolve;
		man.ctx = &ix;
		e = read_manifest(manifest_path, &man, &d);
		if (!e && missing_names(&man))
			e = try_tree_dir(m, opts, manifest_path, &ix, &man, &d);
		if (e) {
			fprintf(stderr, "tensorfs: %s: %s\n", tfs_quote_path(qm, sizeof qm, manifest_path),
				d.msg);
			tfs_model_names_free(ix.names);
			free(nodes);
			tfs_manifest_free(&man);
			return e == TFS_ERR_NOMEM ? TFS_EXIT_INTERNAL : TFS_EXIT_USAGE;
		}
	}
	if (!e)
		e = hash_all(tree, nodes, n, manifest_path ? &man : NULL, xxh64, &p, &d);
	struct run r = {.t = tree, .source = source, .json = json, .out = out};
	int rc = TFS_EXIT_OK;
	if (e) {
		fprintf(stderr, "tensorfs: %s: %s\n", shown, d.msg);
		rc = e == TFS_ERR_NOMEM ? TFS_EXIT_INTERNAL : TFS_EXIT_SOURCE;
	} else {
		if (json) {
			fputs("{\"source\": ", out);
			put_name(out, source, strlen(source), 1);
			fputs(manifest_path ? ", \"mismatches\": [" : ", \"tensors\": [", out);
		}
		if (manifest_path)
			other_model(&man, &ix, manifest_path, shown);
		if (manifest_path)
			compare(&r, &man);
		else
			print_manifest(&r, nodes, n, xxh64 ? TFS_DIGEST_XXH64 : TFS_DIGEST_SHA256);
		if (json && !manifest_path)
			fputs("\n], \"mismatches\": [", out);
		if (check_files(&r, m, &d)) {
			fprintf(stderr, "tensorfs: %s: %s\n", shown, d.msg);
			rc = TFS_EXIT_SOURCE;
		}
		if (json)
			fprintf(out, "%s], \"checked\": %zu, \"tensors_hashed\": %zu, \"ok\": %s}\n",
				r.mismatches ? "\n" : "", r.checked, n, r.mismatches ? "false" : "true");
		*res = (struct tfs_tool_result){n, r.checked, r.mismatches - r.missing, r.missing};
		if (!rc && r.mismatches)
			rc = TFS_EXIT_MISMATCH;
		if (manifest_path || r.checked)
			fprintf(stderr, "tensorfs: %s: %zu checked, %zu mismatched%s\n", shown, r.checked,
				r.mismatches,
				man.bad ? " (some manifest lines were not checksum lines)" : "");
	}
	tfs_model_names_free(ix.names);
	free(nodes);
	tfs_manifest_free(&man);
	return rc;
}

static int run(const struct tfs_tool_args *a)
{
	struct tfs_tool_result res = {0};
	int rc = tfs_verify(&a->a->tree, a->opts, a->shown, a->manifest, a->xxh64, a->json, a->out, &res);
	if (a->result)
		*a->result = res;
	return rc;
}

const struct tfs_tool tfs_tool_verify = {
	.rank = 3,
	.name = "--verify",
	.usage = VERIFY_USAGE,
	.sources = 1,
	.args_max = 2,
	.manifest = 1,
	.tree = 1,
	.run = run,
};
