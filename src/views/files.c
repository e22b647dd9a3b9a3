/* -o originals: the source's own files in __files__/ at the root, each
 * byte for byte as views/originals.c reads them. */
#include <stdlib.h>

#include "views/originals.h"
#include "views/tree.h"
#include "views/view.h"

struct files {
	const struct tfs_model *m;
	struct tfs_originals *o;
};

static struct tfs_originals *originals_of(const struct tfs_tree *t, const struct tfs_node *n)
{
	return ((struct files *)t->vstate[n->kind])->o;
}

static uint64_t original_size(const struct tfs_tree *t, const struct tfs_node *n)
{
	return tfs_originals_size(originals_of(t, n), n->ref);
}

/* A range of the source itself: the reply is made from where its bytes
 * are (a local file spliced, a remote file's cached blocks), never copied
 * here first. */
static tfs_err original_pieces(const struct tfs_tree *t, const struct tfs_node *n, uint64_t off, size_t len,
			       struct tfs_pieces *out)
{
	struct tfs_source *src;
	tfs_err e = tfs_originals_source(originals_of(t, n), n->ref, &src);
	return e ? e : tfs_pieces_src(out, src, off, len, tfs_originals_size(originals_of(t, n), n->ref));
}

static const struct tfs_opt_spec opts[] = {
	{"originals", 0,
	 "the source's own files (shards, index, config.json...)\n"
	 "byte for byte in __files__/",
	 NULL, 0},
	{NULL, 0, NULL, NULL, 0},
};

static int wanted(const struct tfs_tree_opts *o)
{
	return tfs_opts_get(o->opts, "originals") != NULL;
}

static void *state_new(const struct tfs_model *m, const struct tfs_tree_opts *o)
{
	(void)o;
	struct files *f = calloc(1, sizeof *f);
	if (f)
		f->m = m;
	return f;
}

static void state_free(void *state)
{
	struct files *f = state;
	tfs_originals_free(f->o);
	free(f);
}

/* The source's own files, in a directory of the root whose name no
 * tensor's file can have (the mapping's rule 3). */
static tfs_err at_root(struct tfs_tree_add *a, void *state, struct tfs_diag *d)
{
	struct files *f = state;
	tfs_err e = tfs_originals_new(f->m, &f->o, d);
	if (e)
		return e;
	uint32_t di;
	if (tfs_tree_add_node(a, TFS_TREE_ROOT, TFS_ORIGINALS_DIR, 1, 0, &di))
		return tfs_fail(d, TFS_ERR_NOMEM, "out of memory building the file table");
	for (uint32_t k = 0; k < tfs_originals_count(f->o); k++) {
		size_t nl;
		/* (plain names only: tfs_originals keeps no other) */
		if (tfs_tree_add_node(a, di, tfs_originals_name(f->o, k, &nl), 0, k, NULL))
			return tfs_fail(d, TFS_ERR_NOMEM, "out of memory building the file table");
	}
	return TFS_OK;
}

const struct tfs_view_ops tfs_view_original = {
	.name = "original",
	.opts = opts,
	.wanted = wanted,
	.state_new = state_new,
	.state_free = state_free,
	.at_root = at_root,
	.size = original_size,
	.pieces = original_pieces,
};
