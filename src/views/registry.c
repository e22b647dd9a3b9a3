/* The registry of views, by node kind (views/tree.h): the one place that
 * names them. */
#include "views/view.h"

extern const struct tfs_view_ops tfs_view_tensor;
extern const struct tfs_view_ops tfs_view_blob;
extern const struct tfs_view_ops tfs_view_table;
extern const struct tfs_view_ops tfs_view_export;
extern const struct tfs_view_ops tfs_view_original;
extern const struct tfs_view_ops tfs_view_sums;
extern const struct tfs_view_ops tfs_view_stats;
extern const struct tfs_view_ops tfs_view_gguf;
extern const struct tfs_view_ops tfs_view_reshard;
extern const struct tfs_view_ops tfs_view_picture;
extern const struct tfs_view_ops tfs_view_zarr;

/* Indexed by enum tfs_node_kind (a directory has none). */
const struct tfs_view_ops *const tfs_views[] = {
	NULL,               /* 0: no node */
	NULL,               /* TFS_NODE_DIR */
	&tfs_view_tensor,   /* TFS_NODE_TENSOR */
	&tfs_view_blob,     /* TFS_NODE_BLOB */
	&tfs_view_table,    /* TFS_NODE_TABLE */
	&tfs_view_export,   /* TFS_NODE_EXPORT */
	&tfs_view_original, /* TFS_NODE_ORIGINAL */
	&tfs_view_sums,     /* TFS_NODE_SUMS */
	&tfs_view_stats,    /* TFS_NODE_STATS */
	&tfs_view_gguf,     /* TFS_NODE_GGUF */
	&tfs_view_reshard,  /* TFS_NODE_RESHARD */
	&tfs_view_picture,  /* TFS_NODE_PICTURE */
	&tfs_view_zarr,     /* TFS_NODE_ZARR */
};

const unsigned tfs_nviews = sizeof tfs_views / sizeof tfs_views[0];

const struct tfs_opt_spec *tfs_view_opt_at(size_t k)
{
	for (unsigned i = 0; i < tfs_nviews; i++)
		for (const struct tfs_opt_spec *s = tfs_views[i] ? tfs_views[i]->opts : NULL; s && s->name;
		     s++)
			if (k-- == 0)
				return s;
	return NULL;
}

const struct tfs_opt_spec *tfs_view_opt(const char *name, size_t len)
{
	return tfs_opt_find(tfs_view_opt_at, name, len);
}

void tfs_views_notice(const struct tfs_tree *t, void (*say)(void *ctx, const char *line), void *ctx)
{
	char buf[400];
	for (unsigned k = 0; k < tfs_nviews; k++)
		if (tfs_views[k] && tfs_views[k]->notice && tfs_views[k]->notice(t, buf, sizeof buf))
			say(ctx, buf);
}
