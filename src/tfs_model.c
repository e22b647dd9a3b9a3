#include "tfs_model.h"

#include <dirent.h>
#include <errno.h>
#include <json.h>
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "tfs_hash.h"
#include "tfs_index.h"
#include "tfs_mem.h"
#include "tfs_json.h"

#define INDEX_SUFFIX ".safetensors.index.json"
#define ST_SUFFIX ".safetensors"
#define INDEX_MAX ((size_t)1 << 31)

static int ends_with(const char *s, const char *suf)
{
	size_t n = strlen(s), k = strlen(suf);
	return n >= k && strcmp(s + n - k, suf) == 0;
}

static tfs_err mfail(struct tfs_model_diag *md, const char *where, tfs_err e,
		     const char *fmt, ...) __attribute__((format(printf, 4, 5)));

static tfs_err mfail(struct tfs_model_diag *md, const char *where, tfs_err e,
		     const char *fmt, ...)
{
	va_list ap;
	snprintf(md->where, sizeof md->where, "%s", where);
	va_start(ap, fmt);
	tfs_vfail(&md->d, e, fmt, ap);
	va_end(ap);
	return e;
}

static char *join(const char *dir, const char *name)
{
	size_t a = strlen(dir), b = strlen(name);
	char *p = malloc(a + b + 2);
	if (!p)
		return NULL;
	memcpy(p, dir, a);
	p[a] = '/';
	memcpy(p + a + 1, name, b + 1);
	return p;
}

/* The absolute path with the directory part resolved and the file name kept
 * as given: a Hugging Face cache shard shows as snapshots/REV/NAME, not as
 * its blob. */
static char *location_of(const char *path)
{
	const char *slash = strrchr(path, '/');
	char *dir = slash ? strndup(path, (size_t)(slash - path)) : strdup(".");
	const char *base = slash ? slash + 1 : path;
	if (!dir)
		return NULL;
	char *rdir = realpath(*dir ? dir : "/", NULL);
	free(dir);
	if (!rdir)
		return NULL;
	char *out = strcmp(rdir, "/") == 0 ? join("", base) : join(rdir, base);
	free(rdir);
	return out;
}

static int name_cmp(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

/* ---- reading the shard headers, in parallel ---- */

struct warn_buf {
	char *text;
	size_t len, cap;
};

static void warn_collect(void *ctx, const char *msg)
{
	struct warn_buf *w = ctx;
	size_t n = strlen(msg) + 1;
	if (w->len + n > w->cap) {
		size_t nc = w->cap ? w->cap * 2 : 1024;
		while (nc < w->len + n)
			nc *= 2;
		char *q = realloc(w->text, nc);
		if (!q)
			return;
		w->text = q;
		w->cap = nc;
	}
	memcpy(w->text + w->len, msg, n);
	w->len += n;
}

struct job {
	struct tfs_model *m;
	const struct tfs_model_opts *o;
	uint32_t next;
	tfs_err *errs;
	struct tfs_diag *diags;
	struct warn_buf *warns;
};

static void read_one(struct job *j, uint32_t i)
{
	struct tfs_shard *s = &j->m->shards[i];
	struct tfs_parse_opts po = {
		.flags = j->o ? j->o->parse_flags : 0,
		.warn = warn_collect,
		.warn_ctx = &j->warns[i],
	};
	j->errs[i] = tfs_source_open_file(s->path, &s->src, &j->diags[i]);
	if (!j->errs[i])
		j->errs[i] = tfs_format_read(s->src, j->o ? j->o->format : NULL, &po, &s->h, &j->diags[i]);
}

static void *reader(void *arg)
{
	struct job *j = arg;
	for (;;) {
		uint32_t i = __atomic_fetch_add(&j->next, 1, __ATOMIC_RELAXED);
		if (i >= j->m->nshards)
			return NULL;
		read_one(j, i);
	}
}

static tfs_err read_headers(struct tfs_model *m, const struct tfs_model_opts *o,
			    const char *where, struct tfs_model_diag *md)
{
	struct job j = {.m = m, .o = o};
	tfs_err e = TFS_OK;
	uint32_t n = m->nshards;
	j.errs = calloc(n, sizeof *j.errs);
	j.diags = calloc(n, sizeof *j.diags);
	j.warns = calloc(n, sizeof *j.warns);
	if (!j.errs || !j.diags || !j.warns) {
		e = mfail(md, where, TFS_ERR_NOMEM, "out of memory");
		goto out;
	}
	unsigned nt = o && o->threads ? o->threads : (unsigned)sysconf(_SC_NPROCESSORS_ONLN);
	if (nt < 1)
		nt = 1;
	if (nt > 8)
		nt = 8;
	if (nt > n)
		nt = n;
	pthread_t th[8];
	unsigned started = 0;
	for (unsigned t = 1; t < nt; t++)
		if (pthread_create(&th[started], NULL, reader, &j) == 0)
			started++;
	reader(&j);
	for (unsigned t = 0; t < started; t++)
		pthread_join(th[t], NULL);

	/* Report in shard order, so the outcome does not depend on threads. */
	for (uint32_t i = 0; i < n; i++) {
		struct tfs_shard *s = &m->shards[i];
		if (j.warns[i].len && o && o->warn) {
			for (size_t k = 0; k < j.warns[i].len; k += strlen(j.warns[i].text + k) + 1)
				o->warn(o->warn_ctx, m->kind == TFS_MODEL_FILE ? s->path : where,
					j.warns[i].text + k);
		}
		if (j.errs[i] && !e) {
			if (m->kind == TFS_MODEL_FILE)
				e = mfail(md, s->path, j.errs[i], "%s", j.diags[i].msg);
			else
				e = mfail(md, where, j.errs[i], "shard '%s': %s", s->name, j.diags[i].msg);
		}
		m->ntensors += s->h.n;
	}
out:
	if (j.warns)
		for (uint32_t i = 0; i < n; i++)
			free(j.warns[i].text);
	free(j.errs);
	free(j.diags);
	free(j.warns);
	return e;
}

/* ---- consistency across shards ---- */

struct where_t {
	uint32_t shard, t;
};

struct names {
	struct where_t *slots; /* shard == UINT32_MAX: empty */
	size_t n;
};

static const char *tname(const struct tfs_model *m, struct where_t w, size_t *len)
{
	const struct tfs_table *h = &m->shards[w.shard].h;
	*len = h->t[w.t].name_len;
	return tfs_tensor_name(h, &h->t[w.t]);
}

static struct where_t *names_find(const struct tfs_model *m, const struct names *nt,
				  const char *name, size_t len)
{
	size_t j = tfs_hash(name, len, tfs_hash_seed) & (nt->n - 1);
	while (nt->slots[j].shard != UINT32_MAX) {
		size_t l;
		const char *s = tname(m, nt->slots[j], &l);
		if (l == len && memcmp(s, name, len) == 0)
			return &nt->slots[j];
		j = (j + 1) & (nt->n - 1);
	}
	return &nt->slots[j];
}

static tfs_err check_unique(struct tfs_model *m, struct names *nt, const char *where,
			    struct tfs_model_diag *md)
{
	nt->n = 16;
	while (nt->n < m->ntensors * 2)
		nt->n *= 2;
	nt->slots = tfs_malloc_big(nt->n * sizeof *nt->slots);
	if (!nt->slots)
		return mfail(md, where, TFS_ERR_NOMEM, "out of memory");
	memset(nt->slots, 0xff, nt->n * sizeof *nt->slots);
	for (uint32_t s = 0; s < m->nshards; s++) {
		const struct tfs_table *h = &m->shards[s].h;
		for (uint32_t i = 0; i < h->n; i++) {
			struct where_t w = {s, i};
			size_t len;
			const char *name = tname(m, w, &len);
			struct where_t *slot = names_find(m, nt, name, len);
			if (slot->shard != UINT32_MAX) {
				char q[200];
				tfs_quote(q, sizeof q, name, len);
				return mfail(md, where, TFS_ERR_FORMAT,
					     "tensor %s is in two shards, '%s' and '%s'", q,
					     m->shards[slot->shard].name, m->shards[s].name);
			}
			*slot = w;
		}
	}
	return TFS_OK;
}

/* What the index says, gathered by the scanner's callbacks. */
struct ientry {
	uint64_t off;     /* name in arena */
	uint32_t len;
	uint32_t shard;   /* shard id (index into snames) */
};

struct iother {
	char *key;
	char *text;
	size_t len;
};

struct idx {
	char *arena;
	size_t alen, acap;
	struct ientry *e;
	size_t n, cap;
	char **snames;
	uint32_t nsn, csn;
	uint32_t *sslots; /* shard id + 1 keyed by name */
	size_t nss;
	struct iother *o;
	size_t no, co, wm_pos;
	const char *meta_text;
	size_t meta_len;
};

static uint32_t *sname_slot(struct idx *x, const char *s, size_t len)
{
	size_t j = tfs_hash(s, len, tfs_hash_seed) & (x->nss - 1);
	while (x->sslots[j]) {
		const char *o = x->snames[x->sslots[j] - 1];
		if (strlen(o) == len && memcmp(o, s, len) == 0)
			break;
		j = (j + 1) & (x->nss - 1);
	}
	return &x->sslots[j];
}

static tfs_err idx_entry(void *ctx, const char *name, size_t nlen, const char *shard,
			 size_t slen, struct tfs_diag *d)
{
	struct idx *x = ctx;
	if (slen == 0 || memchr(shard, '/', slen) || memchr(shard, 0, slen) ||
	    (slen == 1 && shard[0] == '.') || (slen == 2 && shard[0] == '.' && shard[1] == '.')) {
		char q[200], sq[200];
		tfs_quote(q, sizeof q, name, nlen);
		tfs_quote(sq, sizeof sq, shard, slen);
		return tfs_fail(d, TFS_ERR_FORMAT,
				"weight_map puts tensor %s in shard %s: a shard must be a plain file name in the index's directory",
				q, sq);
	}
	if ((x->nsn + 1) * 2 > x->nss) {
		size_t ns = x->nss ? x->nss * 2 : 64;
		free(x->sslots);
		x->sslots = calloc(ns, sizeof *x->sslots);
		if (!x->sslots)
			return TFS_ERR_NOMEM;
		x->nss = ns;
		for (uint32_t i = 0; i < x->nsn; i++)
			*sname_slot(x, x->snames[i], strlen(x->snames[i])) = i + 1;
	}
	uint32_t *slot = sname_slot(x, shard, slen);
	if (!*slot) {
		if (x->nsn == x->csn) {
			x->csn = x->csn ? x->csn * 2 : 16;
			char **q = realloc(x->snames, x->csn * sizeof *q);
			if (!q)
				return TFS_ERR_NOMEM;
			x->snames = q;
		}
		if (!(x->snames[x->nsn] = strndup(shard, slen)))
			return TFS_ERR_NOMEM;
		*slot = ++x->nsn;
	}
	if (x->n == x->cap) {
		x->cap = x->cap ? x->cap * 2 : 1024;
		struct ientry *q = realloc(x->e, x->cap * sizeof *q);
		if (!q)
			return TFS_ERR_NOMEM;
		x->e = q;
	}
	if (tfs_json_put(&x->arena, &x->alen, &x->acap, name, nlen))
		return TFS_ERR_NOMEM;
	x->e[x->n].off = x->alen - nlen;
	x->e[x->n].len = (uint32_t)nlen;
	x->e[x->n].shard = *slot - 1;
	x->n++;
	x->wm_pos = x->no;
	return TFS_OK;
}

static tfs_err idx_other(void *ctx, const char *key, size_t klen, const char *text,
			 size_t tlen, struct tfs_diag *d)
{
	struct idx *x = ctx;
	(void)d;
	if (x->no == x->co) {
		x->co = x->co ? x->co * 2 : 4;
		struct iother *q = realloc(x->o, x->co * sizeof *q);
		if (!q)
			return TFS_ERR_NOMEM;
		x->o = q;
	}
	struct iother *o = &x->o[x->no];
	o->key = strndup(key, klen);
	o->text = strndup(text, tlen);
	o->len = tlen;
	if (!o->key || !o->text) {
		free(o->key);
		free(o->text);
		return TFS_ERR_NOMEM;
	}
	x->no++;
	if (klen == 8 && memcmp(key, "metadata", 8) == 0) {
		x->meta_text = o->text;
		x->meta_len = tlen;
	}
	return TFS_OK;
}

static void idx_free(struct idx *x)
{
	for (uint32_t i = 0; i < x->nsn; i++)
		free(x->snames[i]);
	for (size_t i = 0; i < x->no; i++) {
		free(x->o[i].key);
		free(x->o[i].text);
	}
	free(x->snames);
	free(x->sslots);
	free(x->arena);
	free(x->e);
	free(x->o);
}

/* Every weight_map entry must be in the shard it names, and every tensor of
 * every shard must be listed for its shard. A name listed twice keeps its
 * last shard, as JSON readers do. first/last: per tensor (numbered across
 * shards), the first and last entry that lists it. */
static tfs_err check_index(struct tfs_model *m, const struct idx *x, const struct names *nt,
			   uint32_t *first, uint32_t *last, uint64_t *eg, const char *where,
			   struct tfs_model_diag *md)
{
	uint64_t *base = malloc(((size_t)m->nshards + 1) * sizeof *base);
	if (!base)
		return mfail(md, where, TFS_ERR_NOMEM, "out of memory");
	base[0] = 0;
	for (uint32_t s = 0; s < m->nshards; s++)
		base[s + 1] = base[s] + m->shards[s].h.n;
	tfs_err e = TFS_OK;
	char q[200];
	for (size_t k = 0; k < x->n; k++) {
		const char *name = x->arena + x->e[k].off;
		struct where_t *w = names_find(m, nt, name, x->e[k].len);
		if (w->shard == UINT32_MAX) {
			tfs_quote(q, sizeof q, name, x->e[k].len);
			e = mfail(md, where, TFS_ERR_FORMAT,
				  "weight_map puts tensor %s in shard '%s', which does not hold it (no shard does)",
				  q, m->shards[x->e[k].shard].name);
			goto out;
		}
		uint64_t g = base[w->shard] + w->t;
		if (first[g] == UINT32_MAX)
			first[g] = (uint32_t)k;
		last[g] = (uint32_t)k;
		eg[k] = g;
	}
	for (uint32_t s = 0; s < m->nshards; s++) {
		const struct tfs_table *h = &m->shards[s].h;
		for (uint32_t i = 0; i < h->n; i++) {
			uint64_t g = base[s] + i;
			tfs_quote(q, sizeof q, tfs_tensor_name(h, &h->t[i]), h->t[i].name_len);
			if (last[g] == UINT32_MAX) {
				e = mfail(md, where, TFS_ERR_FORMAT,
					  "shard '%s' holds tensor %s, which weight_map does not list for it",
					  m->shards[s].name, q);
				goto out;
			}
			if (x->e[last[g]].shard != s) {
				e = mfail(md, where, TFS_ERR_FORMAT,
					  "weight_map puts tensor %s in shard '%s', which does not hold it (shard '%s' does)",
					  q, m->shards[x->e[last[g]].shard].name, m->shards[s].name);
				goto out;
			}
		}
	}
out:
	free(base);
	return e;
}

/* __index__.json: the index pretty-printed, two spaces a level. Members
 * other than weight_map (small) go through json-c; weight_map, which can
 * hold a million names, is written directly, each name once (first place,
 * last shard). */
static tfs_err index_json(struct tfs_model *m, const struct idx *x, const uint32_t *first,
			  const uint32_t *last, const uint64_t *eg)
{
	/* About the size of the index itself: start there. */
	size_t cap = x->alen + (size_t)x->n * 48 + 4096, n = 0;
	char *b = tfs_malloc_big(cap);
	if (!b)
		return TFS_ERR_NOMEM;
	tfs_err e = tfs_json_put(&b, &n, &cap, "{", 1);
	int members = 0;
	for (size_t i = 0; !e && i <= x->no; i++) {
		if (i == x->wm_pos) {
			e = tfs_json_puts(&b, &n, &cap, members++ ? ",\n  \"weight_map\": {" : "\n  \"weight_map\": {");
			int any = 0;
			for (size_t k = 0; !e && k < x->n; k++) {
				const char *name = x->arena + x->e[k].off;
				uint64_t g = eg[k];
				if (first[g] != k)
					continue;
				e = tfs_json_puts(&b, &n, &cap, any++ ? ",\n    " : "\n    ");
				if (!e)
					e = tfs_json_str(&b, &n, &cap, name, x->e[k].len);
				if (!e)
					e = tfs_json_put(&b, &n, &cap, ": ", 2);
				const char *sh = m->shards[x->e[last[g]].shard].name;
				if (!e)
					e = tfs_json_str(&b, &n, &cap, sh, strlen(sh));
			}
			if (!e)
				e = tfs_json_puts(&b, &n, &cap, any ? "\n  }" : "}");
		}
		if (i == x->no || e)
			continue;
		json_object *v = json_tokener_parse(x->o[i].text);
		const char *pretty = v ? json_object_to_json_string_ext(
						 v, JSON_C_TO_STRING_PRETTY | JSON_C_TO_STRING_SPACED |
							    JSON_C_TO_STRING_NOSLASHESCAPE)
				       : x->o[i].text;
		e = tfs_json_puts(&b, &n, &cap, members++ ? ",\n  " : "\n  ");
		if (!e)
			e = tfs_json_str(&b, &n, &cap, x->o[i].key, strlen(x->o[i].key));
		if (!e)
			e = tfs_json_put(&b, &n, &cap, ": ", 2);
		if (!e)
			e = tfs_json_nested(&b, &n, &cap, pretty, strlen(pretty));
		json_object_put(v);
	}
	if (!e)
		e = tfs_json_puts(&b, &n, &cap, members ? "\n}\n" : "}\n");
	if (e) {
		free(b);
		return e;
	}
	m->index_json = b;
	m->index_len = n;
	return TFS_OK;
}

/* ---- building the shard list ---- */

static tfs_err add_shards(struct tfs_model *m, const char *dir, char **names, uint32_t n,
			  const char *where, struct tfs_model_diag *md)
{
	m->shards = calloc(n ? n : 1, sizeof *m->shards);
	if (!m->shards)
		return mfail(md, where, TFS_ERR_NOMEM, "out of memory");
	m->nshards = n;
	for (uint32_t i = 0; i < n; i++) {
		struct tfs_shard *s = &m->shards[i];
		s->name = strdup(names[i]);
		s->path = dir ? join(dir, names[i]) : strdup(names[i]);
		if (!s->name || !s->path)
			return mfail(md, where, TFS_ERR_NOMEM, "out of memory");
		s->location = location_of(s->path);
		if (!s->location)
			return mfail(md, where, TFS_ERR_OPEN, "shard '%s': cannot open: %s",
				     names[i], strerror(errno));
	}
	return TFS_OK;
}

static char *dir_of(const char *path)
{
	const char *slash = strrchr(path, '/');
	if (!slash)
		return strdup(".");
	if (slash == path)
		return strdup("/");
	return strndup(path, (size_t)(slash - path));
}

/* Which shards are not there; returns how many. */
static uint32_t mark_missing(struct tfs_model *m)
{
	uint32_t n = 0;
	for (uint32_t i = 0; i < m->nshards; i++) {
		struct stat st;
		m->shards[i].missing = stat(m->shards[i].path, &st) != 0 && errno == ENOENT;
		n += (uint32_t)m->shards[i].missing;
	}
	return n;
}

/* The model as the index alone tells it: each name once (its last entry
 * wins, as when the index is read as JSON), counted for its shard. */
static tfs_err index_only(struct tfs_model *m, const struct idx *x, const char *where,
			  struct tfs_model_diag *md)
{
	size_t ns = 16;
	while (ns < x->n * 2)
		ns *= 2;
	uint64_t *slots = calloc(ns, sizeof *slots); /* entry + 1 */
	if (!slots)
		return mfail(md, where, TFS_ERR_NOMEM, "out of memory");
	for (size_t k = 0; k < x->n; k++) {
		const char *name = x->arena + x->e[k].off;
		size_t j = tfs_hash(name, x->e[k].len, tfs_hash_seed) & (ns - 1);
		while (slots[j]) {
			const struct ientry *o = &x->e[slots[j] - 1];
			if (o->len == x->e[k].len && memcmp(x->arena + o->off, name, o->len) == 0)
				break;
			j = (j + 1) & (ns - 1);
		}
		if (!slots[j])
			m->ntensors++;
		slots[j] = k + 1;
	}
	for (size_t j = 0; j < ns; j++)
		if (slots[j])
			m->shards[x->e[slots[j] - 1].shard].index_tensors++;
	free(slots);
	m->index_only = 1;
	if (x->meta_text && !(m->index_meta = strndup(x->meta_text, x->meta_len)))
		return mfail(md, where, TFS_ERR_NOMEM, "out of memory");
	return TFS_OK;
}

static tfs_err open_index(struct tfs_model *m, const char *path, const struct tfs_model_opts *o,
			  struct tfs_model_diag *md)
{
	tfs_err e = TFS_OK;
	char *text = NULL, *dir = NULL, **sorted = NULL;
	uint32_t *remap = NULL, *first = NULL, *last = NULL;
	uint64_t *eg = NULL;
	struct names nt = {0};
	struct idx x;
	struct stat st;
	FILE *f = fopen(path, "rb");

	memset(&x, 0, sizeof x);
	m->kind = TFS_MODEL_INDEX;
	m->index_path = strdup(path);
	if (!m->index_path) {
		if (f)
			fclose(f);
		return mfail(md, path, TFS_ERR_NOMEM, "out of memory");
	}
	if (!f)
		return mfail(md, path, TFS_ERR_OPEN, "cannot open: %s", strerror(errno));
	if (fstat(fileno(f), &st) != 0 || (size_t)st.st_size > INDEX_MAX) {
		fclose(f);
		return mfail(md, path, TFS_ERR_FORMAT, "index file too large");
	}
	text = malloc((size_t)st.st_size + 1);
	if (!text) {
		fclose(f);
		return mfail(md, path, TFS_ERR_NOMEM, "out of memory");
	}
	size_t got = fread(text, 1, (size_t)st.st_size, f);
	fclose(f);
	if (got != (size_t)st.st_size) {
		e = mfail(md, path, TFS_ERR_IO, "read error");
		goto out;
	}
	text[got] = 0;
	/* The entries' names and records cannot outgrow the index text. */
	x.acap = got + 1;
	x.cap = got / 8 + 16;
	x.arena = tfs_malloc_big(x.acap);
	x.e = tfs_malloc_big(x.cap * sizeof *x.e);
	if (!x.arena || !x.e) {
		e = mfail(md, path, TFS_ERR_NOMEM, "out of memory");
		goto out;
	}
	struct tfs_index_cb cb = {.entry = idx_entry, .other = idx_other, .ctx = &x};
	x.wm_pos = SIZE_MAX;
	e = tfs_index_scan(text, got, &cb, &md->d);
	if (e) {
		snprintf(md->where, sizeof md->where, "%s", path);
		goto out;
	}
	if (x.wm_pos == SIZE_MAX)
		x.wm_pos = x.no; /* an empty weight_map: keep it last */

	/* Shards in name order; entries renumbered to match. */
	sorted = malloc((x.nsn ? x.nsn : 1) * sizeof *sorted);
	remap = malloc((x.nsn ? x.nsn : 1) * sizeof *remap);
	if (!sorted || !remap) {
		e = mfail(md, path, TFS_ERR_NOMEM, "out of memory");
		goto out;
	}
	memcpy(sorted, x.snames, x.nsn * sizeof *sorted);
	qsort(sorted, x.nsn, sizeof *sorted, name_cmp);
	for (uint32_t i = 0; i < x.nsn; i++)
		remap[*sname_slot(&x, sorted[i], strlen(sorted[i])) - 1] = i;
	for (size_t k = 0; k < x.n; k++)
		x.e[k].shard = remap[x.e[k].shard];

	dir = dir_of(path);
	if (!dir) {
		e = mfail(md, path, TFS_ERR_NOMEM, "out of memory");
		goto out;
	}
	if ((e = add_shards(m, dir, sorted, x.nsn, path, md)))
		goto out;
	if (o && o->index_only_ok && mark_missing(m)) {
		e = index_only(m, &x, path, md);
		goto out;
	}
	if ((e = read_headers(m, o, path, md)) || (e = check_unique(m, &nt, path, md)))
		goto out;
	first = tfs_malloc_big((m->ntensors ? m->ntensors : 1) * sizeof *first);
	last = tfs_malloc_big((m->ntensors ? m->ntensors : 1) * sizeof *last);
	eg = tfs_malloc_big((x.n ? x.n : 1) * sizeof *eg);
	if (!first || !last || !eg) {
		e = mfail(md, path, TFS_ERR_NOMEM, "out of memory");
		goto out;
	}
	memset(first, 0xff, m->ntensors * sizeof *first);
	memset(last, 0xff, m->ntensors * sizeof *last);
	if ((e = check_index(m, &x, &nt, first, last, eg, path, md)))
		goto out;

	if (x.meta_text && o && o->warn) {
		json_object *meta = json_tokener_parse(x.meta_text), *ts;
		if (meta && json_object_is_type(meta, json_type_object) &&
		    json_object_object_get_ex(meta, "total_size", &ts) &&
		    (json_object_is_type(ts, json_type_int) || json_object_is_type(ts, json_type_double))) {
			uint64_t sum = 0;
			for (uint32_t s = 0; s < m->nshards; s++)
				for (uint32_t i = 0; i < m->shards[s].h.n; i++)
					sum += tfs_tensor_size(&m->shards[s].h.t[i]);
			uint64_t want = json_object_is_type(ts, json_type_int)
						? (uint64_t)json_object_get_uint64(ts)
						: (uint64_t)json_object_get_double(ts);
			if (want != sum) {
				char msg[256];
				snprintf(msg, sizeof msg,
					 "metadata.total_size is %llu but the shards' tensors hold %llu bytes",
					 (unsigned long long)want, (unsigned long long)sum);
				o->warn(o->warn_ctx, path, msg);
			}
		}
		json_object_put(meta);
	}
	if (index_json(m, &x, first, last, eg))
		e = mfail(md, path, TFS_ERR_NOMEM, "out of memory");
out:
	free(eg);
	free(first);
	free(last);
	free(nt.slots);
	free(sorted);
	free(remap);
	free(dir);
	free(text);
	idx_free(&x);
	return e;
}

static tfs_err open_dir(struct tfs_model *m, const char *path, const struct tfs_model_opts *o,
			struct tfs_model_diag *md)
{
	DIR *d = opendir(path);
	char **idx = NULL, **st = NULL;
	size_t nidx = 0, nst = 0, cidx = 0, cst = 0;
	tfs_err e = TFS_OK;
	struct names nt = {0};
	if (!d)
		return mfail(md, path, TFS_ERR_OPEN, "cannot open directory: %s", strerror(errno));
	struct dirent *de;
	while ((de = readdir(d))) {
		char ***list;
		size_t *n, *c;
		if (de->d_name[0] == '.')
			continue;
		if (ends_with(de->d_name, INDEX_SUFFIX)) {
			list = &idx, n = &nidx, c = &cidx;
		} else if (ends_with(de->d_name, ST_SUFFIX)) {
			list = &st, n = &nst, c = &cst;
		} else {
			continue;
		}
		if (*n == *c) {
			*c = *c ? *c * 2 : 64;
			char **q = realloc(*list, *c * sizeof **list);
			if (!q) {
				e = mfail(md, path, TFS_ERR_NOMEM, "out of memory");
				goto out;
			}
			*list = q;
		}
		if (!((*list)[(*n)++] = strdup(de->d_name))) {
			e = mfail(md, path, TFS_ERR_NOMEM, "out of memory");
			goto out;
		}
	}
	if (nidx > 1) {
		char list[768];
		size_t o2 = 0;
		qsort(idx, nidx, sizeof *idx, name_cmp);
		for (size_t i = 0; i < nidx && o2 < sizeof list - 64; i++)
			o2 += (size_t)snprintf(list + o2, sizeof list - o2, "%s%s", i ? ", " : "", idx[i]);
		e = mfail(md, path, TFS_ERR_FORMAT,
			  "the directory holds %zu index files (%s); pass the one to mount", nidx, list);
		goto out;
	}
	if (nidx == 1) {
		char *ip = join(path, idx[0]);
		if (!ip) {
			e = mfail(md, path, TFS_ERR_NOMEM, "out of memory");
			goto out;
		}
		e = open_index(m, ip, o, md);
		free(ip);
		goto out;
	}
	if (nst == 0) {
		e = mfail(md, path, TFS_ERR_FORMAT, "the directory holds no .safetensors file and no index");
		goto out;
	}
	qsort(st, nst, sizeof *st, name_cmp);
	m->kind = TFS_MODEL_DIR;
	if ((e = add_shards(m, path, st, (uint32_t)nst, path, md)) ||
	    (e = read_headers(m, o, path, md)) || (e = check_unique(m, &nt, path, md)))
		goto out;
out:
	closedir(d);
	for (size_t i = 0; i < nidx; i++)
		free(idx[i]);
	for (size_t i = 0; i < nst; i++)
		free(st[i]);
	free(idx);
	free(st);
	free(nt.slots);
	return e;
}

tfs_err tfs_model_open(const char *source, const struct tfs_model_opts *o,
		       struct tfs_model *m, struct tfs_model_diag *md)
{
	struct stat st;
	tfs_err e;
	memset(m, 0, sizeof *m);
	memset(md, 0, sizeof *md);
	if (stat(source, &st) != 0)
		return mfail(md, source, TFS_ERR_OPEN, "cannot open: %s", strerror(errno));
	m->id.size = (uint64_t)st.st_size;
	m->id.dev = st.st_dev;
	m->id.ino = st.st_ino;
	m->id.mtime_sec = st.st_mtim.tv_sec;
	m->id.mtime_nsec = st.st_mtim.tv_nsec;
	m->id.ctime_sec = st.st_ctim.tv_sec;
	m->id.ctime_nsec = st.st_ctim.tv_nsec;
	if (S_ISDIR(st.st_mode)) {
		e = open_dir(m, source, o, md);
	} else if (S_ISREG(st.st_mode) && ends_with(source, ".json")) {
		e = open_index(m, source, o, md);
	} else {
		char *name = (char *)source;
		m->kind = TFS_MODEL_FILE;
		e = add_shards(m, NULL, &name, 1, source, md);
		if (!e)
			e = read_headers(m, o, source, md);
	}
	if (e)
		tfs_model_free(m);
	return e;
}

void tfs_model_free(struct tfs_model *m)
{
	if (!m)
		return;
	for (uint32_t i = 0; m->shards && i < m->nshards; i++) {
		struct tfs_shard *s = &m->shards[i];
		tfs_table_free(&s->h);
		tfs_source_close(s->src);
		free(s->name);
		free(s->path);
		free(s->location);
	}
	free(m->shards);
	free(m->index_path);
	free(m->index_json);
	free(m->index_meta);
	memset(m, 0, sizeof *m);
}

tfs_err tfs_model_single(struct tfs_model *m, struct tfs_source *src,
			 struct tfs_table *h)
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
			e = tfs_json_put(&b, &n, &cap, i + 1 < m->nshards ? ",\n" : "\n", i + 1 < m->nshards ? 2 : 1);
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
