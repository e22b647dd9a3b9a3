/* -o originals: the source's own files in __files__/ at the root, each
 * byte for byte (views/originals.h): what the store holds beside the
 * model, then the view that shows it. */
#include "views/originals.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "core/names.h"
#include "views/tree.h"
#include "views/view.h"

struct orig {
	char *name;  /* in the directory */
	char *sname; /* in the store */
	uint64_t size;
	struct tfs_source *src; /* opened on first read, or a shard's */
	int own;                /* src is ours to close */
	tfs_err failed;         /* the open failed: every read fails so */
};

struct tfs_originals {
	const struct tfs_model *m;
	struct orig *f;
	uint32_t n;
	pthread_mutex_t lock; /* opens */
};

static tfs_err add(struct tfs_originals *o, const char *dir, size_t dl, const char *name, uint64_t size)
{
	size_t nl = strlen(name);
	/* One level, names the directory can show as they are. */
	if (!nl || nl > TFS_NAME_MAX || strchr(name, '/') || !tfs_name_is_plain(name, nl))
		return TFS_OK;
	for (uint32_t i = 0; i < o->n; i++)
		if (strcmp(o->f[i].name, name) == 0)
			return TFS_OK;
	struct orig *nf = realloc(o->f, (o->n + 1) * sizeof *nf);
	if (!nf)
		return TFS_ERR_NOMEM;
	o->f = nf;
	struct orig *f = &o->f[o->n];
	memset(f, 0, sizeof *f);
	f->name = strdup(name);
	f->sname = malloc(dl + nl + 1);
	if (!f->name || !f->sname) {
		free(f->name);
		free(f->sname);
		return TFS_ERR_NOMEM;
	}
	memcpy(f->sname, dir, dl);
	memcpy(f->sname + dl, name, nl + 1);
	f->size = size;
	o->n++;
	return TFS_OK;
}

/* Opens file f of the store as its own source (under o->lock, or before
 * the mount answers). A read's failure is kept and logged; at mount, where
 * the file is only sized, a failure leaves it to the first read. */
static tfs_err open_file(struct tfs_originals *o, struct orig *f, int for_read)
{
	struct tfs_diag d;
	struct tfs_store *st = o->m->store;
	/* What is shown here every reader of the mount may read: never a
	 * link out of the source's tree (checked again at each open: the
	 * link may change after the mount). */
	tfs_err e = (st->ops->open_inside ? st->ops->open_inside : st->ops->open)(st, f->sname, &f->src, &d);
	if (e) {
		f->src = NULL;
		if (for_read) {
			f->failed = e;
			char q[TFS_QPATH_MAX];
			tfs_log("%s: cannot open it: %s", tfs_quote_path(q, sizeof q, f->sname), d.msg);
		}
	} else {
		f->own = 1;
	}
	return e;
}

static int by_name(const void *a, const void *b)
{
	return strcmp(((const struct orig *)a)->name, ((const struct orig *)b)->name);
}

tfs_err tfs_originals_new(const struct tfs_model *m, struct tfs_originals **out, struct tfs_diag *d)
{
	struct tfs_originals *o = calloc(1, sizeof *o);
	if (!o)
		return tfs_fail(d, TFS_ERR_NOMEM, "out of memory");
	o->m = m;
	pthread_mutex_init(&o->lock, NULL);
	tfs_err e = TFS_OK;
	const char *s0 = m->nshards ? m->shards[0].sname : "";
	const char *slash = strrchr(s0, '/');
	size_t dl = slash ? (size_t)(slash - s0) + 1 : 0;
	char *dir = strndup(s0, dl);
	if (!dir) {
		tfs_originals_free(o);
		return tfs_fail(d, TFS_ERR_NOMEM, "out of memory");
	}
	/* What the checkpoint is made of: its shards and its index. */
	for (uint32_t i = 0; !e && i < m->nshards; i++)
		e = add(o, dir, dl, m->shards[i].sname + dl,
			m->shards[i].src ? m->shards[i].src->id.size : 0);
	if (!e && m->index_path) {
		const char *b = strrchr(m->index_path, '/');
		b = b ? b + 1 : m->index_path;
		e = add(o, dir, dl, b, 0); /* its size: the file's, below */
	}
	/* And beside them, where the store can list its directory: a
	 * single file named by SOURCE shows only itself (a local file's
	 * directory may be anyone's downloads). */
	if (!e && m->kind != TFS_MODEL_FILE) {
		struct tfs_dirlist dlst = {0};
		struct tfs_diag ld;
		if (m->store->ops->list(m->store, dir, &dlst, &ld) == TFS_OK)
			for (size_t i = 0; !e && i < dlst.n; i++)
				e = add(o, dir, dl, dlst.name[i], dlst.size[i]);
		tfs_dirlist_free(&dlst);
	}
	free(dir);
	if (e) {
		tfs_originals_free(o);
		return tfs_fail(d, e, "out of memory");
	}
	/* Files found by listing the source's directory (or named by its
	 * index) that lead out of its tree are not shown at all. */
	if (m->kind != TFS_MODEL_FILE && m->store->ops->open_inside)
		for (uint32_t i = 0; i < o->n;) {
			struct tfs_source *src;
			struct tfs_diag od;
			tfs_err oe = m->store->ops->open_inside(m->store, o->f[i].sname, &src, &od);
			if (oe == TFS_OK) {
				tfs_source_close(src);
			} else if (oe == TFS_ERR_INVAL) {
				tfs_log("%s%s: not shown in __files__: %s", m->store->prefix, o->f[i].sname,
					od.msg);
				free(o->f[i].name);
				free(o->f[i].sname);
				o->f[i] = o->f[--o->n];
				continue;
			}
			i++;
		}
	qsort(o->f, o->n, sizeof *o->f, by_name);
	/* The shards are open already: theirs are used, not opened again.
	 * Sizes not listed (the index over http) are the opened file's. */
	for (uint32_t i = 0; i < o->n; i++) {
		for (uint32_t s = 0; s < m->nshards; s++)
			if (m->shards[s].src && strcmp(m->shards[s].sname, o->f[i].sname) == 0) {
				o->f[i].src = m->shards[s].src;
				o->f[i].size = o->f[i].src->id.size;
			}
		if (!o->f[i].src && !o->f[i].size && open_file(o, &o->f[i], 0) == TFS_OK)
			o->f[i].size = o->f[i].src->id.size;
	}
	*out = o;
	return TFS_OK;
}

void tfs_originals_free(struct tfs_originals *o)
{
	if (!o)
		return;
	for (uint32_t i = 0; i < o->n; i++) {
		if (o->f[i].own)
			tfs_source_close(o->f[i].src);
		free(o->f[i].name);
		free(o->f[i].sname);
	}
	free(o->f);
	pthread_mutex_destroy(&o->lock);
	free(o);
}

uint32_t tfs_originals_count(const struct tfs_originals *o)
{
	return o ? o->n : 0;
}

const char *tfs_originals_name(const struct tfs_originals *o, uint32_t i, size_t *len)
{
	*len = strlen(o->f[i].name);
	return o->f[i].name;
}

uint64_t tfs_originals_size(const struct tfs_originals *o, uint32_t i)
{
	return o->f[i].size;
}

tfs_err tfs_originals_source(struct tfs_originals *o, uint32_t i, struct tfs_source **src)
{
	struct orig *f = &o->f[i];
	pthread_mutex_lock(&o->lock);
	if (!f->src && !f->failed)
		open_file(o, f, 1);
	*src = f->src;
	tfs_err failed = f->failed;
	pthread_mutex_unlock(&o->lock);
	if (failed)
		return TFS_ERR_IO;
	return (*src)->id.size != f->size ? TFS_ERR_IO : TFS_OK; /* not the file that was listed */
}

/* ---- the view ---- */

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
 * are (a local file spliced, a remote file's cached blocks mapped), never
 * copied here first. */
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

const struct tfs_view_ops tfs_view_originals = {
	.name = "originals",
	.opts = opts,
	.wanted = wanted,
	.state_new = state_new,
	.state_free = state_free,
	.at_root = at_root,
	.size = original_size,
	.pieces = original_pieces,
};
