/* -o sums: __sha256sums__.txt in every directory holding tensor files, one line
 * "HASH  NAME" per file as sha256sum writes it, so that `sha256sum -c` run
 * in the directory checks them. Its size is known from the names alone
 * (listing never hashes); the first read hashes the directory's files, on
 * every core. */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "compute/manifest.h"
#include "views/tree_digest.h"
#include "views/tree.h"
#include "views/view.h"

#define SUMS_NAME "__sha256sums__.txt"

struct sum {
	uint64_t size; /* UINT64_MAX until worked out */
	char *text;    /* once read */
};

static void *state_new(const struct tfs_model *m, const struct tfs_tree_opts *o)
{
	(void)m;
	(void)o;
	return tfs_dir_files_new(sizeof(struct tfs_dir_files), sizeof(struct sum));
}

static void free_text(void *slot)
{
	free(((struct sum *)slot)->text);
}

static void state_free(void *p)
{
	tfs_dir_files_free(p, free_text);
}

/* A manifest in every directory that holds tensor files. */
static tfs_err per_dir(struct tfs_tree_add *a, void *state, uint32_t dir)
{
	struct sum *s = NULL;
	if (!tfs_tree_add_holds_tensors(a, dir))
		return TFS_OK;
	tfs_err e = tfs_dir_files_add(state, a, dir, SUMS_NAME, (void **)&s);
	if (s)
		s->size = UINT64_MAX;
	return e;
}

static uint64_t size(const struct tfs_tree *t, const struct tfs_node *n)
{
	struct tfs_dir_files *st = t->vstate[n->kind];
	struct sum *s = tfs_dir_file(st, n->ref);
	pthread_mutex_lock(&st->lock);
	if (s->size == UINT64_MAX) {
		const struct tfs_node *dir = &t->nodes[n->parent];
		uint64_t z = 0;
		for (uint32_t k = 0; k < dir->count; k++) {
			const struct tfs_node *c = &t->nodes[t->children[dir->first + k]];
			if (c->kind == TFS_NODE_TENSOR)
				z += tfs_sum_line_len(64, c->fname, c->fname_len);
		}
		s->size = z;
	}
	uint64_t z = s->size;
	pthread_mutex_unlock(&st->lock);
	return z;
}

/* The text, made once (under `making`: a second reader waits for the
 * first's hashing rather than doing it again). */
static tfs_err make(const struct tfs_tree *t, const struct tfs_node *n, struct sum *s)
{
	const struct tfs_node *dir = &t->nodes[n->parent];
	uint32_t *inos = malloc(((size_t)dir->count + 1) * sizeof *inos);
	char *text = malloc(size(t, n) + 1);
	size_t m = 0;
	tfs_err e = inos && text ? TFS_OK : TFS_ERR_NOMEM;
	for (uint32_t k = 0; !e && k < dir->count; k++) {
		uint32_t ci = t->children[dir->first + k];
		if (t->nodes[ci].kind == TFS_NODE_TENSOR)
			inos[m++] = ci;
	}
	long cpus = sysconf(_SC_NPROCESSORS_ONLN);
	struct tfs_diag d;
	if (!e)
		e = tfs_digest_nodes(t, inos, m, TFS_DIGEST_SHA256, cpus > 0 ? (unsigned)cpus : 1, NULL, NULL,
				     &d);
	char *o = text;
	for (size_t k = 0; !e && k < m; k++) {
		char hex[80];
		if (!tfs_digest_known(t, inos[k], TFS_DIGEST_SHA256, hex))
			e = TFS_ERR_NOMEM; /* kept, unless memory ran out */
		else
			o += tfs_sum_line(o, hex, 64, t->nodes[inos[k]].fname, t->nodes[inos[k]].fname_len);
	}
	free(inos);
	if (e) {
		free(text);
		return e;
	}
	s->text = text;
	return TFS_OK;
}

/* One manifest made at a time: each hashes on every core already. */
static pthread_mutex_t making = PTHREAD_MUTEX_INITIALIZER;

static tfs_err pieces(const struct tfs_tree *t, const struct tfs_node *n, uint64_t off, size_t len,
		      struct tfs_pieces *out)
{
	struct sum *s = tfs_dir_file(t->vstate[n->kind], n->ref);
	pthread_mutex_lock(&making);
	tfs_err e = s->text ? TFS_OK : make(t, n, s);
	const char *text = s->text;
	pthread_mutex_unlock(&making);
	return e ? e : tfs_pieces_mem(out, text + off, len);
}

static const struct tfs_opt_spec opts[] = {
	{"sums", 0,
	 "__sha256sums__.txt in each directory with tensors\n"
	 "(sha256sum -c reads it; reading it hashes them)",
	 NULL, 0},
	{NULL, 0, NULL, NULL, 0},
};

static int wanted(const struct tfs_tree_opts *o)
{
	return tfs_opts_get(o->opts, "sums") != NULL;
}

const struct tfs_view_ops tfs_view_sums = {
	.name = "sums",
	.flags = TFS_VIEWF_LEAD,
	.opts = opts,
	.wanted = wanted,
	.state_new = state_new,
	.state_free = state_free,
	.per_dir = per_dir,
	.size = size,
	.pieces = pieces,
};
