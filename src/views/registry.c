/* The registry of views: the one place that names them. A view's index is
 * its files' node kind (views/tree.h). The order is the order in which
 * their files are added to a tree, so their inode numbers, and the order
 * of a directory's listing; --help lists their options in it too. */
#include "views/view.h"

#include <stdio.h>
#include <string.h>

#include "views/tree.h"

extern const struct tfs_view_ops tfs_view_tensor;
extern const struct tfs_view_ops tfs_view_blob;
extern const struct tfs_view_ops tfs_view_tsv;
extern const struct tfs_view_ops tfs_view_export;
extern const struct tfs_view_ops tfs_view_sums;
extern const struct tfs_view_ops tfs_view_stats;
extern const struct tfs_view_ops tfs_view_pictures;
extern const struct tfs_view_ops tfs_view_originals;
extern const struct tfs_view_ops tfs_view_gguf;
extern const struct tfs_view_ops tfs_view_reshard;
extern const struct tfs_view_ops tfs_view_zarr;

const struct tfs_view_ops *const tfs_views[] = {
	NULL,                /* 0: no node */
	NULL,                /* TFS_NODE_DIR */
	&tfs_view_tensor,    /* TFS_NODE_TENSOR: the tensors' files */
	&tfs_view_blob,      /* __metadata__.json, __index__.json */
	&tfs_view_tsv,       /* __tensors__.tsv in every directory */
	&tfs_view_export,    /* -o export: D.safetensors, model.safetensors */
	&tfs_view_sums,      /* -o sums: __sha256sums__.txt */
	&tfs_view_stats,     /* -o stats: NAME.stats.json */
	&tfs_view_pictures,  /* -o pictures: NAME.png */
	&tfs_view_originals, /* -o originals: __files__/ */
	&tfs_view_gguf,      /* -o export of a GGUF model: model.gguf */
	&tfs_view_reshard,   /* -o max_shard_size: __shards__/ */
	&tfs_view_zarr,      /* -o zarr: __zarr__/ */
};

const unsigned tfs_nviews = sizeof tfs_views / sizeof tfs_views[0];

_Static_assert(sizeof tfs_views / sizeof tfs_views[0] <= TFS_VIEWS_MAX, "TFS_VIEWS_MAX is too small");

unsigned tfs_view_kind(const char *name)
{
	for (unsigned k = 0; k < tfs_nviews; k++)
		if (tfs_views[k] && strcmp(tfs_views[k]->name, name) == 0)
			return k;
	return 0;
}

const struct tfs_opt_spec *tfs_view_opt_at(size_t k)
{
	for (unsigned i = 0; i < tfs_nviews; i++)
		for (const struct tfs_opt_spec *s = tfs_views[i] ? tfs_views[i]->opts : NULL; s && s->name;
		     s++)
			if (s->help && k-- == 0) /* (no help: another view's, followed) */
				return s;
	return NULL;
}

const struct tfs_opt_spec *tfs_view_opt(const char *name, size_t len)
{
	return tfs_opt_find(tfs_view_opt_at, name, len);
}

tfs_err tfs_views_check(const struct tfs_opts *o, struct tfs_diag *d)
{
	for (unsigned k = 0; k < tfs_nviews; k++) {
		tfs_err e = tfs_views[k] && tfs_views[k]->check ? tfs_views[k]->check(o, d) : TFS_OK;
		if (e)
			return e;
	}
	return TFS_OK;
}

int tfs_views_keep_pages(const struct tfs_opts *o)
{
	for (unsigned k = 0; k < tfs_nviews; k++)
		if (tfs_views[k] && tfs_views[k]->keep_pages && tfs_views[k]->keep_pages(o))
			return 1;
	return 0;
}

void tfs_views_notice(const struct tfs_tree *t, void (*say)(void *ctx, const char *line), void *ctx)
{
	char buf[400];
	for (unsigned k = 0; k < tfs_nviews && k < TFS_VIEWS_MAX; k++)
		if (t->vstate[k] && tfs_views[k]->notice &&
		    tfs_views[k]->notice(t, t->vstate[k], buf, sizeof buf))
			say(ctx, buf);
}
