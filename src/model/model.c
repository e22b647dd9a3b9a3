/* The tensor tables of a checkpoint: one file, the shards an index names,
 * or a directory's files, each read (in parallel) by its format's driver
 * from the store the source driver gave, and checked against each other.
 * Indexes are read in model/index.c. */
#include "model/model_i.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/hash.h"
#include "core/json.h"
#include "core/mem.h"

static int name_cmp(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

/* ---- models split over several files (GGUF's split.no / split.count) ---- */

/* The shards (in any order) must be parts 0..count-1 of one split, each
 * once; they are put in part order. */
static tfs_err check_parts(struct tfs_model *m, const char *where, struct tfs_model_diag *md)
{
	uint32_t count = 0;
	for (uint32_t i = 0; i < m->nshards; i++)
		if (m->shards[i].h.part_count > count)
			count = m->shards[i].h.part_count;
	if (count == 0)
		return TFS_OK;
	for (uint32_t i = 0; i < m->nshards; i++) {
		const struct tfs_table *h = &m->shards[i].h;
		if (h->part_count != count)
			return tfs_mfail(md, where, TFS_ERR_FORMAT,
					 "'%s' is %s, but another file is part of a %u-part split",
					 m->shards[i].name,
					 h->part_count ? "from another split" : "not split", count);
	}
	if (m->nshards != count)
		return tfs_mfail(md, where, TFS_ERR_FORMAT, "the model is split into %u parts but %u %s here",
				 count, m->nshards, m->nshards == 1 ? "is" : "are");
	/* Part numbers are below count (the driver checked): sort by them. */
	for (uint32_t i = 0; i < m->nshards; i++) {
		while (m->shards[i].h.part_no != i) {
			uint32_t k = m->shards[i].h.part_no;
			if (m->shards[k].h.part_no == k)
				return tfs_mfail(md, where, TFS_ERR_FORMAT,
						 "'%s' and '%s' are both part %u of the split",
						 m->shards[i].name, m->shards[k].name, k + 1);
			struct tfs_shard t = m->shards[i];
			m->shards[i] = m->shards[k];
			m->shards[k] = t;
		}
	}
	return TFS_OK;
}

/* A file that is the first part of a split: the model is all its parts,
 * found by the format's naming. */
static tfs_err open_parts(struct tfs_model *m, const struct tfs_model_opts *o, const char *where,
			  struct tfs_model_diag *md)
{
	const struct tfs_table *h = &m->shards[0].h;
	uint32_t count = h->part_count;
	if (count < 2)
		return TFS_OK;
	if (h->part_no != 0)
		return tfs_mfail(
			md, where, TFS_ERR_FORMAT,
			"this is part %u of a %u-part split model; mount the first part or the directory",
			h->part_no + 1, count);
	const struct tfs_format *f = h->driver;
	char **names = calloc(count - 1, sizeof *names);
	char *slash = strrchr(m->shards[0].sname, '/');
	size_t dl = slash ? (size_t)(slash - m->shards[0].sname) + 1 : 0;
	char dir[4096];
	tfs_err e = TFS_OK;
	if (!names)
		return tfs_mfail(md, where, TFS_ERR_NOMEM, "out of memory");
	snprintf(dir, sizeof dir, "%.*s", (int)dl, m->shards[0].sname);
	for (uint32_t k = 1; k < count && !e; k++) {
		char nm[4096];
		if (!f || !f->part_name || f->part_name(m->shards[0].sname + dl, k, count, nm, sizeof nm))
			e = tfs_mfail(
				md, where, TFS_ERR_FORMAT,
				"the file is part 1 of a %u-part split, but its name does not say where the others are (NAME-00001-of-%05u%s)",
				count, count, f && f->ext ? f->ext : "");
		else if (!(names[k - 1] = strdup(nm)))
			e = tfs_mfail(md, where, TFS_ERR_NOMEM, "out of memory");
	}
	if (!e) {
		/* The first part is read already: add and read the others. */
		struct names nt = {0};
		m->kind = TFS_MODEL_DIR;
		if (!(e = tfs_model_add_shards(m, dir, names, count - 1, where, md)) &&
		    !(e = tfs_model_read_tables(m, 1, o, where, md)) && !(e = check_parts(m, where, md)))
			e = tfs_model_check_unique(m, &nt, where, md);
		free(nt.slots);
	}
	for (uint32_t k = 0; k + 1 < count; k++)
		free(names[k]);
	free(names);
	return e;
}

/* The directory rules: the first format (in the registry's order) with
 * files in the directory decides; its one index, or else all its files.
 * A Hub repository that ships both safetensors and .bin files mounts the
 * safetensors ones. */
/* Files of other formats beside the ones mounted: one warning naming
 * them (a directory is one model, of one format). */
static void warn_others(const char *dir, const struct tfs_dirlist *dl, size_t chosen, const char *where,
			const struct tfs_model_opts *o)
{
	char list[400];
	size_t n = 0, len = 0;
	(void)dir;
	if (!o || !o->warn)
		return;
	list[0] = 0;
	for (size_t i = 0; i < dl->n; i++) {
		for (size_t f = 0; tfs_formats[f]; f++) {
			const char *ext = tfs_formats[f]->ext;
			if (f == chosen || !ext || !tfs_ends_with(dl->name[i], ext))
				continue;
			if (n++ < 3 && len < sizeof list - 1)
				len += (size_t)snprintf(list + len, sizeof list - len, "%s%s",
							len ? ", " : "", dl->name[i]);
			break;
		}
	}
	if (!n)
		return;
	char msg[600];
	snprintf(msg, sizeof msg,
		 "also holds %zu file%s of another format, not mounted (%s%s): a directory is one model; "
		 "mount %s on its own",
		 n, n == 1 ? "" : "s", list, n > 3 ? ", ..." : "", n == 1 ? "it" : "each");
	o->warn(o->warn_ctx, where, msg);
}

/* Does a listing hold a file a directory mount would take (a checkpoint
 * file or an index of the format -o input= names, or of any)? Its bytes,
 * or 0. */
static uint64_t checkpoint_bytes(const struct tfs_dirlist *dl, const struct tfs_model_opts *o)
{
	uint64_t bytes = 0;
	int any = 0;
	for (size_t i = 0; i < dl->n; i++)
		for (size_t f = 0; tfs_formats[f]; f++) {
			const char *ext = o && o->format ? o->format->ext : tfs_formats[f]->ext;
			char isuf[64];
			if (!ext)
				continue;
			snprintf(isuf, sizeof isuf, "%s.index.json", ext);
			if (tfs_ends_with(dl->name[i], ext) || tfs_ends_with(dl->name[i], isuf)) {
				bytes += dl->size[i];
				any = 1;
				break;
			}
		}
	return any ? bytes + 1 : 0;
}

/* The subfolders that are listed for the hint: a bound on the listings a
 * failed mount makes (one request each on some stores). */
#define HINT_DIRS 256
/* The names the hint shows at most, and their bytes. */
#define HINT_SHOWN 6
#define HINT_LIST 280

/* A directory with no checkpoint of its own: which of its subfolders hold
 * one (a diffusers pipeline: unet/, vae/, text_encoder/, beside
 * scheduler/ and tokenizer/), sorted, the rest counted, and the one with
 * the most bytes to mount. Appended to `out` ("" when it has none). */
static void subfolder_hint(struct tfs_model *m, const char *dir, const struct tfs_dirlist *dl,
			   const char *where, const struct tfs_model_opts *o, char *out, size_t osz)
{
	*out = 0;
	if (!dl->ndirs)
		return;
	char **dirs = malloc(dl->ndirs * sizeof *dirs);
	if (!dirs)
		return;
	memcpy(dirs, dl->dirs, dl->ndirs * sizeof *dirs);
	qsort(dirs, dl->ndirs, sizeof *dirs, name_cmp);
	size_t looked = dl->ndirs < HINT_DIRS ? dl->ndirs : HINT_DIRS, held = 0, shown = 0, best = 0;
	uint64_t most = 0;
	char list[HINT_LIST + 1] = "";
	size_t len = 0;
	for (size_t i = 0; i < looked; i++) {
		struct tfs_dirlist sub = {0};
		struct tfs_diag d;
		char *path = malloc(strlen(dir) + strlen(dirs[i]) + 2);
		uint64_t b = 0;
		if (path) {
			sprintf(path, "%s%s/", dir, dirs[i]);
			if (!m->store->ops->list(m->store, path, &sub, &d))
				b = checkpoint_bytes(&sub, o);
		}
		free(path);
		tfs_dirlist_free(&sub);
		if (!b)
			continue;
		held++;
		if (b > most)
			most = b, best = i;
		char q[TFS_QPATH_MAX];
		tfs_quote_path(q, sizeof q, dirs[i]);
		size_t ql = strlen(q) + 1 + (shown ? 2 : 0);
		if (shown == held - 1 && shown < HINT_SHOWN && len + ql <= HINT_LIST) {
			len += (size_t)snprintf(list + len, sizeof list - len, "%s%s/", shown ? ", " : "", q);
			shown++;
		}
	}
	char more[64] = "", tail[64] = "";
	if (held > shown)
		snprintf(more, sizeof more, " and %zu more", held - shown);
	if (looked < dl->ndirs)
		snprintf(tail, sizeof tail, " (the first %zu looked at)", looked);
	if (!held) {
		snprintf(out, osz, ", nor do%s its %zu subfolder%s%s", dl->ndirs == 1 ? "es" : "", dl->ndirs,
			 dl->ndirs == 1 ? "" : "s", tail);
	} else {
		/* (bounded, with the list, to the one diagnostic line) */
		char qw[240], qb[240], *full = NULL;
		/* Where to mount, as the user wrote the directory; a long one
		 * leaves room for the list. */
		size_t wl = strlen(where);
		if (wl < 200 &&
		    asprintf(&full, "%s%s%s", where, wl && where[wl - 1] == '/' ? "" : "/", dirs[best]) < 0)
			full = NULL;
		tfs_quote_path(qw, sizeof qw, full ? full : dirs[best]);
		free(full);
		tfs_quote_path(qb, sizeof qb, dirs[best]);
		snprintf(out, osz, "; %zu of its %zu subfolder%s hold%s one (%s%s)%s: mount %s (%s%s%s)",
			 held, dl->ndirs, dl->ndirs == 1 ? "" : "s", held == 1 ? "s" : "", list, more, tail,
			 held == 1 ? "it" : "one of them", qw, strcmp(qw, qb) == 0 ? "/" : "",
			 held > 1 ? ", the largest" : "");
	}
	free(dirs);
}

static tfs_err open_dir(struct tfs_model *m, const char *dir, const char *where,
			const struct tfs_model_opts *o, struct tfs_model_diag *md)
{
	struct tfs_dirlist dl = {0};
	struct tfs_diag d;
	char **idx = NULL, **files = NULL;
	size_t nidx = 0, nfiles = 0;
	tfs_err e = m->store->ops->list(m->store, dir, &dl, &d);
	struct names nt = {0};
	if (e)
		return tfs_mfail(md, where, e, "%s", d.msg);
	idx = calloc(dl.n + 1, sizeof *idx);
	files = calloc(dl.n + 1, sizeof *files);
	if (!idx || !files) {
		e = tfs_mfail(md, where, TFS_ERR_NOMEM, "out of memory");
		goto out;
	}
	size_t chosen = 0;
	for (size_t f = 0; tfs_formats[f] && !nidx && !nfiles; f++) {
		const char *ext = o && o->format ? o->format->ext : tfs_formats[f]->ext;
		chosen = f;
		char isuf[64];
		if (!ext)
			continue;
		snprintf(isuf, sizeof isuf, "%s.index.json", ext);
		for (size_t i = 0; i < dl.n; i++) {
			if (tfs_ends_with(dl.name[i], isuf))
				idx[nidx++] = dl.name[i];
			else if (tfs_ends_with(dl.name[i], ext))
				files[nfiles++] = dl.name[i];
		}
		if (o && o->format)
			break;
	}
	if ((nidx || nfiles) && !(o && o->format))
		warn_others(dir, &dl, chosen, where, o);
	if (nidx > 1) {
		char list[768];
		size_t o2 = 0;
		qsort(idx, nidx, sizeof *idx, name_cmp);
		for (size_t i = 0; i < nidx && o2 < sizeof list - 64; i++)
			o2 += (size_t)snprintf(list + o2, sizeof list - o2, "%s%s", i ? ", " : "", idx[i]);
		e = tfs_mfail(md, where, TFS_ERR_FORMAT,
			      "the directory holds %zu index files (%s); pass the one to mount", nidx, list);
		goto out;
	}
	if (nidx == 1) {
		size_t n = strlen(dir) + strlen(idx[0]) + 1;
		char *name = malloc(n), *disp = malloc(strlen(m->store->prefix) + n);
		if (name && disp) {
			snprintf(name, n, "%s%s", dir, idx[0]);
			sprintf(disp, "%s%s", m->store->prefix, name);
			e = tfs_model_open_index(m, name, disp, o, md);
		} else {
			e = tfs_mfail(md, where, TFS_ERR_NOMEM, "out of memory");
		}
		free(name);
		free(disp);
		goto out;
	}
	if (nfiles == 0) {
		char exts[256];
		size_t k = 0;
		for (size_t f = 0; tfs_formats[f]; f++)
			if (tfs_formats[f]->ext)
				k += (size_t)snprintf(exts + k, sizeof exts - k, "%s%s", k ? ", " : "",
						      tfs_formats[f]->ext);
		char hint[TFS_DIAG_MAX];
		subfolder_hint(m, dir, &dl, where, o, hint, sizeof hint);
		e = tfs_mfail(md, where, TFS_ERR_FORMAT,
			      "the directory holds no checkpoint file (%s) and no index%s", exts, hint);
		goto out;
	}
	qsort(files, nfiles, sizeof *files, name_cmp);
	m->kind = TFS_MODEL_DIR;
	if ((e = tfs_model_add_shards(m, dir, files, (uint32_t)nfiles, where, md)) ||
	    (e = tfs_model_read_tables(m, 0, o, where, md)) || (e = check_parts(m, where, md)) ||
	    (e = tfs_model_check_unique(m, &nt, where, md)))
		goto out;
	tfs_model_warn_mixed(m, where, o);
out:
	free(idx);
	free(files);
	tfs_dirlist_free(&dl);
	free(nt.slots);
	return e;
}

/* The identity of the mount's directories and generated files: the
 * store's, which is what SOURCE named (a remote store learns it when that
 * file opens); where the store knows none (a remote directory: a Hub
 * repository, an S3 prefix), the newest of the shards' times, as a
 * directory's time is its latest change. */
static void model_identity(struct tfs_model *m)
{
	static const struct tfs_identity none;
	m->id = m->store->id;
	if (memcmp(&m->id, &none, sizeof none) != 0)
		return;
	for (uint32_t i = 0; i < m->nshards; i++) {
		const struct tfs_source *s = m->shards[i].src;
		if (s && (s->id.mtime_sec > m->id.mtime_sec ||
			  (s->id.mtime_sec == m->id.mtime_sec && s->id.mtime_nsec > m->id.mtime_nsec))) {
			m->id.mtime_sec = s->id.mtime_sec;
			m->id.mtime_nsec = s->id.mtime_nsec;
			m->id.ctime_sec = s->id.ctime_sec;
			m->id.ctime_nsec = s->id.ctime_nsec;
		}
	}
}

/* The model's tensors, for the sources that predict which one a reader
 * reads next (the remote layer's read-ahead across files), in the tables'
 * order; nothing is predicted when there is no memory for the list. */
static void tell_objects(const struct tfs_model *m)
{
	size_t n = 0, k = 0;
	for (uint32_t i = 0; i < m->nshards; i++)
		n += m->shards[i].src ? m->shards[i].h.n : 0;
	struct tfs_object *objs = malloc((n ? n : 1) * sizeof *objs);
	if (!objs)
		return;
	for (uint32_t i = 0; i < m->nshards; i++) {
		const struct tfs_shard *s = &m->shards[i];
		for (uint32_t j = 0; s->src && j < s->h.n; j++)
			objs[k++] = (struct tfs_object){s->src, s->h.t[j].begin, s->h.t[j].end,
							tfs_tensor_name(&s->h, &s->h.t[j])};
	}
	tfs_sources_objects(m->sources, objs, k);
	free(objs);
}

tfs_err tfs_model_open(const char *spec, const struct tfs_model_opts *o, struct tfs_model *m,
		       struct tfs_model_diag *md)
{
	struct tfs_diag d;
	char *target = NULL, source[TFS_SPEC_SHOWN_MAX];
	tfs_err e;
	memset(m, 0, sizeof *m);
	memset(md, 0, sizeof *md);
	/* Messages name the source as given, less any password in it. */
	tfs_source_redact(spec, source, sizeof source);
	if (tfs_sources_new(o ? o->opts : NULL, &m->sources))
		return tfs_mfail(md, source, TFS_ERR_NOMEM, "out of memory");
	e = tfs_source_resolve(spec, o ? o->opts : NULL, m->sources, &m->store, &target, &d);
	if (e) {
		tfs_mfail(md, source, e, "%s", d.msg);
		tfs_model_free(m);
		return e;
	}
	if (!target) {
		/* The source named a directory (of a store): "" is its root. */
		e = open_dir(m, "", source, o, md);
	} else if (tfs_ends_with(target, ".json")) {
		e = tfs_model_open_index(m, target, source, o, md);
	} else {
		m->kind = TFS_MODEL_FILE;
		e = tfs_model_add_shards(m, "", &target, 1, source, md);
		if (!e) {
			/* Messages name the file as the user wrote it. */
			free(m->shards[0].path);
			if (!(m->shards[0].path = strdup(source)))
				e = tfs_mfail(md, source, TFS_ERR_NOMEM, "out of memory");
		}
		if (!e)
			e = tfs_model_read_tables(m, 0, o, source, md);
		if (!e)
			e = open_parts(m, o, source, md);
	}
	free(target);
	if (!e)
		model_identity(m);
	/* Loaders read the shards in this order: a source that reads ahead
	 * goes on from one into the next. */
	for (uint32_t i = 0; !e && i + 1 < m->nshards; i++)
		if (m->shards[i].src && m->shards[i + 1].src)
			tfs_source_then(m->shards[i].src, m->shards[i + 1].src);
	/* Long computations over a shard's bytes stop with the mount. */
	for (uint32_t i = 0; !e && i < m->nshards; i++)
		if (m->shards[i].src)
			m->shards[i].src->stop = tfs_sources_stop_flag(m->sources);
	if (!e)
		tell_objects(m);
	if (e)
		tfs_model_free(m);
	return e;
}

void tfs_model_free(struct tfs_model *m)
{
	if (!m)
		return;
	/* (Its names go below.) */
	tfs_sources_objects(m->sources, NULL, 0);
	for (uint32_t i = 0; m->shards && i < m->nshards; i++) {
		struct tfs_shard *s = &m->shards[i];
		tfs_table_free(&s->h);
		tfs_source_close(s->src);
		free(s->name);
		free(s->sname);
		free(s->path);
		free(s->location);
	}
	free(m->shards);
	free(m->index_path);
	free(m->index_json);
	free(m->index_meta);
	tfs_store_close(m->store);
	tfs_sources_free(m->sources);
	memset(m, 0, sizeof *m);
}

tfs_err tfs_model_single(struct tfs_model *m, struct tfs_source *src, struct tfs_table *h)
{
	memset(m, 0, sizeof *m);
	m->kind = TFS_MODEL_FILE;
	m->shards = calloc(1, sizeof *m->shards);
	if (!m->shards)
		return TFS_ERR_NOMEM;
	m->nshards = 1;
	m->shards[0].name = strdup(src->location);
	m->shards[0].path = strdup(src->location);
	m->shards[0].location = strdup(src->location);
	m->shards[0].src = src;
	m->shards[0].h = *h;
	memset(h, 0, sizeof *h);
	m->id = src->id;
	m->ntensors = m->shards[0].h.n;
	if (!m->shards[0].name || !m->shards[0].path || !m->shards[0].location) {
		tfs_model_free(m);
		return TFS_ERR_NOMEM;
	}
	return TFS_OK;
}

/* ---- __metadata__.json ---- */

static int pair_cmp(const void *a, const void *b, void *arena)
{
	const struct tfs_meta_pair *x = a, *y = b;
	const char *ar = arena;
	size_t n = x->key_len < y->key_len ? x->key_len : y->key_len;
	int c = memcmp(ar + x->key_off, ar + y->key_off, n);
	return c ? c : (x->key_len > y->key_len) - (x->key_len < y->key_len);
}

/* Do two shards carry the same __metadata__, in whatever key order? */
static int meta_equal(const struct tfs_table *a, const struct tfs_table *b)
{
	if (a->nmeta != b->nmeta)
		return 0;
	if (a->nmeta == 0)
		return 1;
	struct tfs_meta_pair *x = malloc(a->nmeta * sizeof *x), *y = malloc(b->nmeta * sizeof *y);
	int eq = x && y;
	if (eq) {
		memcpy(x, a->meta, a->nmeta * sizeof *x);
		memcpy(y, b->meta, b->nmeta * sizeof *y);
		qsort_r(x, a->nmeta, sizeof *x, pair_cmp, a->arena);
		qsort_r(y, b->nmeta, sizeof *y, pair_cmp, b->arena);
		for (uint32_t i = 0; eq && i < a->nmeta; i++)
			eq = x[i].key_len == y[i].key_len && x[i].val_len == y[i].val_len &&
			     memcmp(a->arena + x[i].key_off, b->arena + y[i].key_off, x[i].key_len) == 0 &&
			     memcmp(a->arena + x[i].val_off, b->arena + y[i].val_off, x[i].val_len) == 0;
	}
	free(x);
	free(y);
	return eq;
}

tfs_err tfs_model_meta_json(const struct tfs_model *m, char **out, size_t *len)
{
	int agree = 1;
	for (uint32_t i = 1; agree && i < m->nshards; i++)
		agree = meta_equal(&m->shards[0].h, &m->shards[i].h);
	if (agree)
		return tfs_table_meta_json(&m->shards[0].h, out, len);
	/* Each shard's object, indented one level more, under its name. */
	char *b = NULL;
	size_t n = 0, cap = 0;
	tfs_err e = tfs_json_put(&b, &n, &cap, "{\n", 2);
	for (uint32_t i = 0; !e && i < m->nshards; i++) {
		char *one;
		size_t ol;
		e = tfs_json_put(&b, &n, &cap, "  ", 2);
		if (!e)
			e = tfs_json_str(&b, &n, &cap, m->shards[i].name, strlen(m->shards[i].name));
		if (!e)
			e = tfs_json_put(&b, &n, &cap, ": ", 2);
		if (!e)
			e = tfs_table_meta_json(&m->shards[i].h, &one, &ol);
		if (e)
			break;
		/* The shard's own object, without its final newline. */
		e = tfs_json_nested(&b, &n, &cap, one, ol ? ol - 1 : 0);
		free(one);
		if (!e)
			e = tfs_json_put(&b, &n, &cap, i + 1 < m->nshards ? ",\n" : "\n",
					 i + 1 < m->nshards ? 2 : 1);
	}
	if (!e)
		e = tfs_json_put(&b, &n, &cap, "}\n", 2);
	if (e) {
		free(b);
		return e;
	}
	*out = b;
	*len = n;
	return TFS_OK;
}
