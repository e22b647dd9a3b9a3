/* The shards of a model: added to it, their tables read (in parallel) by
 * their formats' drivers, and their tensor names checked to be unique.
 * What model/model.c and model/index.c both build on (model/model_i.h). */
#include "model/model_i.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/hash.h"
#include "core/json.h"
#include "core/mem.h"
#include "core/thread.h"

int tfs_ends_with(const char *s, const char *suf)
{
	size_t n = strlen(s), k = strlen(suf);
	return n >= k && strcmp(s + n - k, suf) == 0;
}

tfs_err tfs_mfail(struct tfs_model_diag *md, const char *where, tfs_err e, const char *fmt, ...)
{
	va_list ap;
	/* (a path or URL: on one line whatever it holds) */
	tfs_quote_path(md->where, sizeof md->where, where);
	va_start(ap, fmt);
	tfs_vfail(&md->d, e, fmt, ap);
	va_end(ap);
	return e;
}

/* A shard's file name as messages show it. */
struct qname {
	char s[300];
};
static struct qname quoted_name(const char *name)
{
	struct qname q;
	tfs_quote(q.s, sizeof q.s, name, strlen(name));
	return q;
}

/* ---- reading the shard tables, in parallel ---- */

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

/* A small file that is a Git LFS pointer (core/format.h). */
static int is_lfs_pointer(struct tfs_source *src)
{
	char head[sizeof TFS_LFS_MAGIC - 1];
	struct tfs_diag d;
	return src && src->id.size < 1024 && src->id.size >= sizeof head &&
	       tfs_source_read(src, head, sizeof head, 0, &d) == TFS_OK &&
	       tfs_is_lfs_pointer(head, sizeof head);
}

static void read_one(struct job *j, uint32_t i)
{
	struct tfs_shard *s = &j->m->shards[i];
	struct tfs_parse_opts po = {
		.flags = j->o ? j->o->parse_flags : 0,
		.warn = warn_collect,
		.warn_ctx = &j->warns[i],
	};
	j->errs[i] = j->m->store->ops->open(j->m->store, s->sname, &s->src, &j->diags[i]);
	if (!j->errs[i])
		j->errs[i] = tfs_format_read(s->src, j->o ? j->o->format : NULL, &po, &s->h, &j->diags[i]);
	s->missing = j->errs[i] == TFS_ERR_NOENT;
	s->lfs_pointer = j->errs[i] == TFS_ERR_FORMAT && is_lfs_pointer(s->src);
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

tfs_err tfs_model_read_tables(struct tfs_model *m, uint32_t first, const struct tfs_model_opts *o,
			      const char *where, struct tfs_model_diag *md)
{
	struct job j = {.m = m, .o = o, .next = first};
	tfs_err e = TFS_OK;
	uint32_t n = m->nshards;
	j.errs = calloc(n ? n : 1, sizeof *j.errs);
	j.diags = calloc(n ? n : 1, sizeof *j.diags);
	j.warns = calloc(n ? n : 1, sizeof *j.warns);
	if (!j.errs || !j.diags || !j.warns) {
		e = tfs_mfail(md, where, TFS_ERR_NOMEM, "out of memory");
		goto out;
	}
	/* Remote shards wait on the network, not on a core: more readers. */
	unsigned nt = o && o->threads ? o->threads : (unsigned)sysconf(_SC_NPROCESSORS_ONLN) * 4;
	if (nt < 1)
		nt = 1;
	if (nt > TFS_MODEL_READERS)
		nt = TFS_MODEL_READERS;
	if (nt > n)
		nt = n;
	pthread_t th[TFS_MODEL_READERS];
	unsigned started = 0;
	for (unsigned t = 1; t < nt; t++)
		if (tfs_thread_start(&th[started], NULL, reader, &j) == 0)
			started++;
	reader(&j);
	for (unsigned t = 0; t < started; t++)
		pthread_join(th[t], NULL);

	/* Report in shard order, so the outcome does not depend on threads. */
	for (uint32_t i = first; i < n; i++) {
		struct tfs_shard *s = &m->shards[i];
		if (j.warns[i].len && o && o->warn) {
			for (size_t k = 0; k < j.warns[i].len; k += strlen(j.warns[i].text + k) + 1)
				o->warn(o->warn_ctx, m->kind == TFS_MODEL_FILE ? s->path : where,
					j.warns[i].text + k);
		}
		if (j.errs[i] && !e) {
			if (m->kind == TFS_MODEL_FILE)
				e = tfs_mfail(md, s->path, j.errs[i], "%s", j.diags[i].msg);
			else
				e = tfs_mfail(
					md, where, j.errs[i], "shard %s: %s%s", quoted_name(s->name).s,
					j.diags[i].msg,
					/* only the index came (or LFS pointers): say
					       * what can still be seen */
					(s->missing || s->lfs_pointer) && m->kind == TFS_MODEL_INDEX
						? " (tensorfs --inspect shows what the index alone tells)"
						: "");
		}
		if (s->src && !s->location && !(s->location = strdup(s->src->location)) && !e)
			e = tfs_mfail(md, where, TFS_ERR_NOMEM, "out of memory");
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

static const char *tname(const struct tfs_model *m, struct where_t w, size_t *len)
{
	const struct tfs_table *h = &m->shards[w.shard].h;
	*len = h->t[w.t].name_len;
	return tfs_tensor_name(h, &h->t[w.t]);
}

struct where_t *tfs_model_names_find(const struct tfs_model *m, const struct names *nt, const char *name,
				     size_t len)
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

tfs_err tfs_model_check_unique(struct tfs_model *m, struct names *nt, const char *where,
			       struct tfs_model_diag *md)
{
	nt->n = 16;
	while (nt->n < m->ntensors * 2)
		nt->n *= 2;
	nt->slots = tfs_malloc_big(nt->n * sizeof *nt->slots);
	if (!nt->slots)
		return tfs_mfail(md, where, TFS_ERR_NOMEM, "out of memory");
	memset(nt->slots, 0xff, nt->n * sizeof *nt->slots);
	for (uint32_t s = 0; s < m->nshards; s++) {
		const struct tfs_table *h = &m->shards[s].h;
		for (uint32_t i = 0; i < h->n; i++) {
			struct where_t w = {s, i};
			size_t len;
			const char *name = tname(m, w, &len);
			struct where_t *slot = tfs_model_names_find(m, nt, name, len);
			if (slot->shard != UINT32_MAX) {
				char q[200];
				tfs_quote(q, sizeof q, name, len);
				/* Without an index, two files of one name are more
				 * likely two models than a broken split. */
				return tfs_mfail(md, where, TFS_ERR_FORMAT,
						 "tensor %s is in two shards, '%s' and '%s'%s", q,
						 m->shards[slot->shard].name, m->shards[s].name,
						 m->kind == TFS_MODEL_DIR
							 ? ": the directory seems to hold more than one "
							   "model; mount one file"
							 : "");
			}
			*slot = w;
		}
	}
	return TFS_OK;
}

/* ---- building the shard list ---- */

tfs_err tfs_model_add_shards(struct tfs_model *m, const char *dir, char **names, uint32_t n,
			     const char *where, struct tfs_model_diag *md)
{
	const char *prefix = m->store->prefix;
	uint32_t have = m->nshards;
	struct tfs_shard *sh = realloc(m->shards, ((size_t)have + n + 1) * sizeof *m->shards);
	if (!sh)
		return tfs_mfail(md, where, TFS_ERR_NOMEM, "out of memory");
	memset(sh + have, 0, ((size_t)n + 1) * sizeof *sh);
	m->shards = sh;
	m->nshards = have + n;
	for (uint32_t i = 0; i < n; i++) {
		struct tfs_shard *s = &m->shards[have + i];
		size_t dl = strlen(dir), nl = strlen(names[i]), pl = strlen(prefix);
		s->name = strdup(names[i]);
		s->sname = malloc(dl + nl + 1);
		s->path = malloc(pl + dl + nl + 1);
		if (!s->name || !s->sname || !s->path)
			return tfs_mfail(md, where, TFS_ERR_NOMEM, "out of memory");
		memcpy(s->sname, dir, dl);
		memcpy(s->sname + dl, names[i], nl + 1);
		memcpy(s->path, prefix, pl);
		memcpy(s->path + pl, s->sname, dl + nl + 1);
	}
	return TFS_OK;
}

/* ---- a directory that may hold more than one model ---- */

/* A shard's string metadata value (its pairs, else the format's facts). */
static int shard_value(const struct tfs_table *h, const char *key, const char **v, size_t *vl)
{
	size_t kl = strlen(key);
	for (uint32_t i = 0; i < h->nmeta; i++)
		if (h->meta[i].key_len == kl && memcmp(h->arena + h->meta[i].key_off, key, kl) == 0) {
			*v = h->arena + h->meta[i].val_off;
			*vl = h->meta[i].val_len;
			return 1;
		}
	for (size_t k = 0; h->facts && k < h->facts_len;) {
		const char *fk = h->facts + k, *fv = fk + strlen(fk) + 1;
		if (strcmp(fk, key) == 0) {
			*v = fv;
			*vl = strlen(fv);
			return 1;
		}
		k = (size_t)(fv + strlen(fv) + 1 - h->facts);
	}
	return 0;
}

static int u64_cmp(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
	return (x > y) - (x < y);
}

/* The layer patterns of a shard: the hashes of its names that hold a
 * number, with every run of digits masked ("model.layers.#.mlp.weight"),
 * sorted and unique. *n = 0 when it has none. */
static uint64_t *layer_patterns(const struct tfs_table *h, size_t *n)
{
	uint64_t *p = malloc(((size_t)h->n + 1) * sizeof *p);
	char buf[512];
	*n = 0;
	if (!p)
		return NULL;
	for (uint32_t i = 0; i < h->n; i++) {
		const char *s = tfs_tensor_name(h, &h->t[i]);
		size_t len = h->t[i].name_len, o = 0;
		int digits = 0;
		for (size_t k = 0; k < len && o < sizeof buf; k++) {
			int d = s[k] >= '0' && s[k] <= '9';
			if (d && k && s[k - 1] >= '0' && s[k - 1] <= '9')
				continue;
			buf[o++] = d ? '#' : s[k];
			digits |= d;
		}
		if (digits)
			p[(*n)++] = tfs_hash(buf, o, tfs_hash_seed);
	}
	qsort(p, *n, sizeof *p, u64_cmp);
	size_t u = 0;
	for (size_t k = 0; k < *n; k++)
		if (!u || p[u - 1] != p[k])
			p[u++] = p[k];
	*n = u;
	return p;
}

static int share_any(const uint64_t *a, size_t na, const uint64_t *b, size_t nb)
{
	for (size_t i = 0, j = 0; i < na && j < nb;) {
		if (a[i] == b[j])
			return 1;
		if (a[i] < b[j])
			i++;
		else
			j++;
	}
	return 0;
}

void tfs_model_warn_mixed(const struct tfs_model *m, const char *where, const struct tfs_model_opts *o)
{
	if (!o || !o->warn || m->kind != TFS_MODEL_DIR || m->nshards < 2)
		return;
	char why[1024] = "";
	uint32_t named = 0; /* the first file the reason names */
	/* Metadata that names what a file is, different between two files. */
	static const char *const keys[] = {"format", "general.architecture", "architecture"};
	for (size_t k = 0; !*why && k < sizeof keys / sizeof *keys; k++) {
		const char *v0 = NULL, *v;
		size_t l0 = 0, l;
		uint32_t first = 0;
		for (uint32_t s = 0; !*why && s < m->nshards; s++) {
			if (!shard_value(&m->shards[s].h, keys[k], &v, &l))
				continue;
			if (!v0) {
				v0 = v, l0 = l, first = s;
			} else if (l != l0 || memcmp(v, v0, l) != 0) {
				char q0[100], q1[100];
				tfs_quote(q0, sizeof q0, v0, l0);
				tfs_quote(q1, sizeof q1, v, l);
				snprintf(why, sizeof why, "%s says %s %s, %s says %s",
					 quoted_name(m->shards[first].name).s, keys[k], q0,
					 quoted_name(m->shards[s].name).s, q1);
				named = first;
			}
		}
	}
	/* Shards of one model hold layers of one kind: two files with
	 * numbered tensors and no pattern in common are two models. */
	uint64_t *ref = NULL;
	size_t nref = 0;
	uint32_t refs = 0;
	for (uint32_t s = 0; !*why && s < m->nshards; s++) {
		size_t n;
		uint64_t *p = layer_patterns(&m->shards[s].h, &n);
		if (!p)
			break;
		if (!n) {
			free(p);
		} else if (!ref) {
			ref = p, nref = n, refs = s;
		} else {
			if (!share_any(ref, nref, p, n)) {
				snprintf(why, sizeof why, "%s and %s have no layer names in common",
					 quoted_name(m->shards[refs].name).s,
					 quoted_name(m->shards[s].name).s);
				named = refs;
			}
			free(p);
		}
	}
	free(ref);
	if (!*why)
		return;
	/* Its files are all of one format (a directory mounts one format's
	 * files): what parts them is a file named on its own, a directory or
	 * an index. */
	char *one = NULL, qo[TFS_QPATH_MAX], msg[2200];
	size_t wl = strlen(where);
	const struct tfs_format *f = m->shards[named].h.driver;
	if (asprintf(&one, "%s%s%s", where, wl && where[wl - 1] == '/' ? "" : "/", m->shards[named].name) < 0)
		one = NULL;
	snprintf(msg, sizeof msg,
		 "its %u files do not look like one model (%s), yet a directory without an index is "
		 "mounted as one: mount each file on its own (%s), or give each model's files a directory or "
		 "an index (model%s.index.json) of their own",
		 (unsigned)m->nshards, why, tfs_quote_path(qo, sizeof qo, one ? one : m->shards[named].name),
		 f && f->ext ? f->ext : "");
	free(one);
	o->warn(o->warn_ctx, where, msg);
}
