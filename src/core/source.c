#include "core/source.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/table.h"

void tfs_source_close(struct tfs_source *s)
{
	if (s)
		s->ops->close(s);
}

void tfs_store_close(struct tfs_store *st)
{
	if (st)
		st->ops->close(st);
}

/* Set from tfs_sources_stop until the next start (tools run one after
 * another in one process: a diff's two sides). */
static int stopped;

void tfs_sources_start(void)
{
	__atomic_store_n(&stopped, 0, __ATOMIC_RELAXED);
	for (const struct tfs_source_driver *const *d = tfs_source_drivers; *d; d++)
		if ((*d)->start)
			(*d)->start();
}

int tfs_sources_stopped(void)
{
	return __atomic_load_n(&stopped, __ATOMIC_RELAXED);
}

void tfs_sources_stop(void)
{
	__atomic_store_n(&stopped, 1, __ATOMIC_RELAXED);
	for (const struct tfs_source_driver *const *d = tfs_source_drivers; *d; d++)
		if ((*d)->stop)
			(*d)->stop();
}

int tfs_sources_warm(uint64_t *done, uint64_t *total)
{
	*done = *total = 0;
	for (const struct tfs_source_driver *const *d = tfs_source_drivers; *d; d++)
		if ((*d)->warm && (*d)->warm(done, total))
			return 1;
	return 0;
}

void tfs_sources_counters(struct tfs_counters *c)
{
	memset(c, 0, sizeof *c);
	for (const struct tfs_source_driver *const *d = tfs_source_drivers; *d; d++) {
		int seen = 0;
		for (const struct tfs_source_driver *const *e = tfs_source_drivers; e < d; e++)
			seen |= (*e)->counters == (*d)->counters;
		if ((*d)->counters && !seen)
			(*d)->counters(c);
	}
}

void tfs_sources_notice(void (*say)(void *ctx, const char *line), void *ctx)
{
	for (const struct tfs_source_driver *const *d = tfs_source_drivers; *d; d++) {
		int seen = 0;
		for (const struct tfs_source_driver *const *e = tfs_source_drivers; e < d; e++)
			seen |= (*e)->notice == (*d)->notice;
		char line[512];
		if ((*d)->notice && !seen && (*d)->notice(line, sizeof line))
			say(ctx, line);
	}
}

int tfs_counters_line(const struct tfs_counters *c, char *out, size_t n)
{
	return snprintf(
		out, n,
		"requests=%llu bytes_fetched=%llu retries=%llu cache_hits=%llu cache_misses=%llu disk_hits=%llu",
		(unsigned long long)c->requests, (unsigned long long)c->bytes_fetched,
		(unsigned long long)c->retries, (unsigned long long)c->cache_hits,
		(unsigned long long)c->cache_misses, (unsigned long long)c->disk_hits);
}

static const struct tfs_source_driver *claimer(const char *spec)
{
	for (const struct tfs_source_driver *const *d = tfs_source_drivers; *d; d++)
		if ((*d)->claims(spec))
			return *d;
	return NULL;
}

size_t tfs_spec_scheme(const char *spec)
{
	size_t i = 0;
	if (!((spec[0] | 0x20) >= 'a' && (spec[0] | 0x20) <= 'z'))
		return 0;
	while (((spec[i] | 0x20) >= 'a' && (spec[i] | 0x20) <= 'z') || (spec[i] >= '0' && spec[i] <= '9') ||
	       spec[i] == '+' || spec[i] == '-' || spec[i] == '.')
		i++;
	return strncmp(spec + i, "://", 3) == 0 ? i : 0;
}

void tfs_source_redact(const char *spec, char *out, size_t n)
{
	const struct tfs_source_driver *d = claimer(spec);
	size_t sl = tfs_spec_scheme(spec);
	if (d && d->redact) {
		d->redact(spec, out, n);
	} else if (!d && sl && n) {
		/* A URL no driver takes is still said without its user:password@. */
		const char *host = spec + sl + 3, *at = NULL;
		for (const char *p = host; *p && !strchr("/?#", *p); p++)
			if (*p == '@')
				at = p;
		snprintf(out, n, "%.*s%s", (int)(host - spec), spec, at ? at + 1 : host);
	} else if (n) {
		snprintf(out, n, "%s", spec);
	}
}

void tfs_source_hide(char *spec)
{
	const struct tfs_source_driver *d = claimer(spec);
	if (d && d->hide)
		d->hide(spec);
}

int tfs_source_is_path(const char *spec)
{
	const struct tfs_source_driver *d = claimer(spec);
	return d && d->spec_is_path;
}

const struct tfs_opt_spec *tfs_source_env_at(size_t k)
{
	for (size_t i = 0; tfs_source_drivers[i]; i++)
		for (const struct tfs_opt_spec *s = tfs_source_drivers[i]->env; s && s->name; s++) {
			int seen = 0; /* drivers share HOME, the proxies... */
			for (size_t j = 0; j < i && !seen; j++)
				for (const struct tfs_opt_spec *t = tfs_source_drivers[j]->env; t && t->name;
				     t++)
					seen |= strcmp(t->name, s->name) == 0;
			if (!seen && k-- == 0)
				return s;
		}
	return NULL;
}

int tfs_source_changed(struct tfs_source *s)
{
	struct tfs_identity now;
	if (s->ops->identity(s, &now) == TFS_OK && now.size == s->id.size &&
	    now.mtime_sec == s->id.mtime_sec && now.mtime_nsec == s->id.mtime_nsec)
		return 0;
	char q[TFS_QPATH_MAX];
	if (!__atomic_exchange_n(&s->changed, 1, __ATOMIC_RELAXED))
		tfs_log("%s: changed since it was mounted (size or mtime); its tensors now fail with EIO: remount to see the new contents",
			tfs_quote_path(q, sizeof q, s->location));
	return 1;
}

tfs_err tfs_source_read(struct tfs_source *s, void *buf, size_t len, uint64_t off, struct tfs_diag *d)
{
	tfs_err e = tfs_source_pread(s, buf, len, off);
	if (e == TFS_ERR_SHORT)
		return tfs_fail(d, TFS_ERR_IO, "the file shrank while being read");
	if (e)
		return tfs_fail(d, e, "read error: %s", tfs_err_str(e));
	return TFS_OK;
}

tfs_err tfs_source_slurp(struct tfs_source *s, size_t max, char **out, size_t *len, struct tfs_diag *d)
{
	if (s->id.size > max)
		return tfs_fail(d, TFS_ERR_FORMAT, "too large (%llu bytes; at most %zu)",
				(unsigned long long)s->id.size, max);
	size_t n = (size_t)s->id.size;
	char *buf = malloc(n + 1);
	if (!buf)
		return tfs_fail(d, TFS_ERR_NOMEM, "out of memory");
	tfs_err e = tfs_source_read(s, buf, n, 0, d);
	if (e) {
		free(buf);
		return e;
	}
	buf[n] = 0;
	*out = buf;
	*len = n;
	return TFS_OK;
}

/* ---- options ---- */

const char *tfs_opts_get(const struct tfs_opts *o, const char *key)
{
	const char *v = NULL;
	for (size_t i = 0; o && i < o->n; i++)
		if (strcmp(o->key[i], key) == 0)
			v = o->val[i]; /* the last one given wins, as with -o */
	return v;
}

int tfs_opt_number(const char *s, int sizes, uint64_t max, uint64_t *v)
{
	if (!s || *s < '0' || *s > '9')
		return -1;
	char *end;
	errno = 0;
	unsigned long long x = strtoull(s, &end, 10);
	if (errno)
		return -1;
	uint64_t mul = 1;
	static const char units[] = "KMGT";
	const char *u = sizes && *end ? strchr(units, *end & ~0x20) : NULL;
	if (u && *u) { /* (not the terminator: a space is 0x20) */
		mul = 1ull << (10 * (u - units + 1));
		end++;
	}
	if (*end || (x && mul > UINT64_MAX / x) || x * mul > max)
		return -1;
	*v = x * mul;
	return 0;
}

tfs_err tfs_opts_add(struct tfs_opts *o, const char *key, size_t klen, const char *val)
{
	char **k = realloc(o->key, (o->n + 1) * sizeof *k);
	if (!k)
		return TFS_ERR_NOMEM;
	o->key = k;
	char **v = realloc(o->val, (o->n + 1) * sizeof *v);
	if (!v)
		return TFS_ERR_NOMEM;
	o->val = v;
	o->key[o->n] = strndup(key, klen);
	o->val[o->n] = strdup(val ? val : "");
	if (!o->key[o->n] || !o->val[o->n]) {
		free(o->key[o->n]);
		free(o->val[o->n]);
		return TFS_ERR_NOMEM;
	}
	o->n++;
	return TFS_OK;
}

void tfs_opts_free(struct tfs_opts *o)
{
	for (size_t i = 0; i < o->n; i++) {
		free(o->key[i]);
		free(o->val[i]);
	}
	free(o->key);
	free(o->val);
	memset(o, 0, sizeof *o);
}

/* ---- directory listings ---- */

tfs_err tfs_dirlist_add(struct tfs_dirlist *l, const char *name, uint64_t size)
{
	size_t cap = l->cap;
	if (tfs_grow((void **)&l->name, &cap, l->n + 1, sizeof *l->name))
		return TFS_ERR_NOMEM;
	cap = l->cap;
	if (tfs_grow((void **)&l->size, &cap, l->n + 1, sizeof *l->size))
		return TFS_ERR_NOMEM;
	l->cap = cap;
	if (!(l->name[l->n] = strdup(name)))
		return TFS_ERR_NOMEM;
	l->size[l->n++] = size;
	return TFS_OK;
}

tfs_err tfs_dirlist_add_dir(struct tfs_dirlist *l, const char *name, size_t len)
{
	for (size_t i = 0; i < l->ndirs; i++)
		if (strlen(l->dirs[i]) == len && memcmp(l->dirs[i], name, len) == 0)
			return TFS_OK;
	if (tfs_grow((void **)&l->dirs, &l->cdirs, l->ndirs + 1, sizeof *l->dirs) ||
	    !(l->dirs[l->ndirs] = strndup(name, len)))
		return TFS_ERR_NOMEM;
	l->ndirs++;
	return TFS_OK;
}

void tfs_dirlist_free(struct tfs_dirlist *l)
{
	for (size_t i = 0; i < l->ndirs; i++)
		free(l->dirs[i]);
	free(l->dirs);
	for (size_t i = 0; i < l->n; i++)
		free(l->name[i]);
	free(l->name);
	free(l->size);
	memset(l, 0, sizeof *l);
}

/* ---- drivers ---- */

tfs_err tfs_source_resolve(const char *spec, const struct tfs_opts *o, struct tfs_store **st, char **target,
			   struct tfs_diag *d)
{
	for (size_t i = 0; tfs_source_drivers[i]; i++)
		if (tfs_source_drivers[i]->claims(spec))
			return tfs_source_drivers[i]->resolve(spec, o, st, target, d);
	size_t sl = tfs_spec_scheme(spec);
	if (!sl)
		return tfs_fail(d, TFS_ERR_INVAL, "no source driver takes this");
	char known[256];
	size_t k = 0;
	known[0] = 0;
	for (size_t i = 0; tfs_source_drivers[i] && k < sizeof known; i++)
		if (tfs_source_drivers[i]->schemes)
			k += (size_t)snprintf(known + k, sizeof known - k, "%s, ",
					      tfs_source_drivers[i]->schemes);
	char q[80];
	tfs_quote(q, sizeof q, spec, sl + 3);
	return tfs_fail(
		d, TFS_ERR_INVAL,
		"unknown URL scheme %s: tensorfs reads %sand local paths (a local file named so: ./%.*s...)",
		q, known, (int)(sl + 3), spec);
}

static int shared_seen(size_t i, const struct tfs_opt_spec *t)
{
	for (size_t j = 0; j < i; j++)
		if (tfs_source_drivers[j]->shared_opts == t)
			return 1;
	return 0;
}

const struct tfs_opt_spec *tfs_source_opt_at(size_t k)
{
	for (size_t i = 0; tfs_source_drivers[i]; i++) {
		const struct tfs_opt_spec *t[2] = {tfs_source_drivers[i]->opts,
						   tfs_source_drivers[i]->shared_opts};
		if (t[1] && shared_seen(i, t[1]))
			t[1] = NULL;
		for (int h = 0; h < 2; h++)
			for (const struct tfs_opt_spec *s = t[h]; s && s->name; s++)
				if (k-- == 0)
					return s;
	}
	return NULL;
}

const struct tfs_opt_spec *tfs_opt_find(const struct tfs_opt_spec *(*at)(size_t k), const char *name,
					size_t len)
{
	const struct tfs_opt_spec *s;
	for (size_t k = 0; (s = at(k)); k++)
		if (strlen(s->name) == len && memcmp(s->name, name, len) == 0)
			return s;
	return NULL;
}

const struct tfs_opt_spec *tfs_source_opt(const char *name, size_t len)
{
	return tfs_opt_find(tfs_source_opt_at, name, len);
}

/* ---- memory ---- */

struct mem_source {
	struct tfs_source base;
	const unsigned char *data;
	size_t len;
};

static tfs_err mem_pread(struct tfs_source *s, void *buf, size_t len, uint64_t off)
{
	struct mem_source *m = (struct mem_source *)s;
	if (off > m->len || len > m->len - off)
		return TFS_ERR_SHORT;
	memcpy(buf, m->data + off, len);
	return TFS_OK;
}

static tfs_err mem_identity(struct tfs_source *s, struct tfs_identity *id)
{
	*id = s->id;
	return TFS_OK;
}

static void mem_close(struct tfs_source *s)
{
	free(s->location);
	free(s);
}

static const struct tfs_source_ops mem_ops = {
	.pread = mem_pread,
	.identity = mem_identity,
	.close = mem_close,
};

tfs_err tfs_source_open_mem(const void *data, size_t len, const char *name, struct tfs_source **out)
{
	struct mem_source *m = calloc(1, sizeof *m);
	if (!m)
		return TFS_ERR_NOMEM;
	m->base.ops = &mem_ops;
	m->base.fd = -1;
	m->base.location = strdup(name ? name : "(memory)");
	if (!m->base.location) {
		free(m);
		return TFS_ERR_NOMEM;
	}
	m->base.id.size = len;
	m->data = data;
	m->len = len;
	*out = &m->base;
	return TFS_OK;
}
