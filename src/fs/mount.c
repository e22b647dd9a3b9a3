/* The mount pipeline (fs/mount.h). */
#include "fs/mount.h"

#include <stdio.h>
#include <string.h>

#include "core/names.h"
#include "model/edits.h"

tfs_err tfs_mount_open(const struct tfs_mount_opts *o, struct tfs_mount *out, char *line, size_t cap)
{
	struct tfs_model_diag md;
	struct tfs_diag d = {{0}};
	char q[TFS_QPATH_MAX];
	struct tfs_edits *ed = NULL;
	memset(out, 0, sizeof *out);
	/* The edits file first: a mistake in it is said before the source is
	 * asked anything (a server may take a minute to answer). */
	tfs_err e = o->edits ? tfs_edits_load(o->edits, &ed, &d) : TFS_OK;
	if (e) {
		snprintf(line, cap, "%s", d.msg);
		return e;
	}
	if ((e = tfs_model_open(o->source, o->model, &out->model, &md))) {
		snprintf(line, cap, "%s: %s", md.where, md.d.msg);
		tfs_edits_free(ed);
		return e;
	}
	/* ... on every shard's table. */
	for (uint32_t k = 0; !e && ed && k < out->model.nshards; k++)
		e = tfs_edits_apply(ed, &out->model.shards[k].h, &d);
	tfs_edits_free(ed);
	if (e) {
		snprintf(line, cap, "%s", d.msg);
		tfs_model_free(&out->model);
		return e;
	}
	struct tfs_tree_opts to = {.layout = o->layout, .opts = o->opts};
	if (o->tree && (e = tfs_tree_build(&out->model, &to, &out->tree, &d))) {
		snprintf(line, cap, "%s: %s", tfs_quote_path(q, sizeof q, o->shown), d.msg);
		tfs_model_free(&out->model);
		return e;
	}
	return TFS_OK;
}

void tfs_mount_close(struct tfs_mount *m)
{
	tfs_tree_free(&m->tree);
	tfs_model_free(&m->model);
}
