/* The registry of source drivers: the one place that names them. The
 * local file driver claims every SOURCE that is not a URL, so it comes
 * last. */
#include "core/source.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/url.h"
#include "sources/rlayer.h"

extern const struct tfs_source_driver tfs_source_hf;
extern const struct tfs_source_driver tfs_source_s3;
extern const struct tfs_source_driver tfs_source_http;
extern const struct tfs_source_driver tfs_source_file;

const struct tfs_source_driver *const tfs_source_drivers[] = {
	&tfs_source_hf, &tfs_source_s3, &tfs_source_http, &tfs_source_file, NULL,
};

/* ---- what the sources of a mount share (core/source.h) ---- */

tfs_err tfs_sources_new(const struct tfs_opts *o, struct tfs_sources **out)
{
	struct tfs_sources *ss = calloc(1, sizeof *ss);
	if (!ss)
		return TFS_ERR_NOMEM;
	ss->opts = o;
	pthread_mutex_init(&ss->lock, NULL);
	*out = ss;
	return TFS_OK;
}

void tfs_sources_free(struct tfs_sources *ss)
{
	if (!ss)
		return;
	tfs_rlayer_free(ss->remote);
	pthread_mutex_destroy(&ss->lock);
	free(ss);
}

/* The remote layer, if one was made (under the lock it is made under). */
static struct tfs_rlayer *remote_of(struct tfs_sources *ss)
{
	if (!ss)
		return NULL;
	pthread_mutex_lock(&ss->lock);
	struct tfs_rlayer *l = ss->remote;
	pthread_mutex_unlock(&ss->lock);
	return l;
}

int tfs_sources_stopped(const struct tfs_sources *ss)
{
	return ss && __atomic_load_n(&ss->stopped, __ATOMIC_RELAXED);
}

const int *tfs_sources_stop_flag(const struct tfs_sources *ss)
{
	return ss ? &ss->stopped : NULL;
}

void tfs_sources_start(struct tfs_sources *ss)
{
	if (ss)
		__atomic_store_n(&ss->stopped, 0, __ATOMIC_RELAXED);
	struct tfs_rlayer *l = remote_of(ss);
	if (l)
		tfs_rlayer_start(l);
}

void tfs_sources_stop(struct tfs_sources *ss)
{
	if (ss)
		__atomic_store_n(&ss->stopped, 1, __ATOMIC_RELAXED);
	struct tfs_rlayer *l = remote_of(ss);
	if (l)
		tfs_rlayer_stop(l);
}

int tfs_sources_warm(struct tfs_sources *ss, uint64_t *done, uint64_t *total)
{
	struct tfs_rlayer *l = remote_of(ss);
	*done = *total = 0;
	return l ? tfs_rlayer_warm(l, done, total) : 0;
}

void tfs_sources_counters(struct tfs_sources *ss, struct tfs_counters *c)
{
	memset(c, 0, sizeof *c);
	struct tfs_rlayer *l = remote_of(ss);
	if (l)
		tfs_rlayer_counters(l, c);
}

void tfs_sources_notice(struct tfs_sources *ss, void (*say)(void *ctx, const char *line), void *ctx)
{
	struct tfs_rlayer *l = remote_of(ss);
	char line[512];
	if (l && tfs_rlayer_notice(l, line, sizeof line))
		say(ctx, line);
}

void tfs_sources_objects(struct tfs_sources *ss, const struct tfs_object *objs, size_t n)
{
	struct tfs_rlayer *l = remote_of(ss);
	if (l)
		tfs_rlayer_objects(l, objs, n);
}

static const struct tfs_source_driver *claimer(const char *spec)
{
	for (const struct tfs_source_driver *const *d = tfs_source_drivers; *d; d++)
		if ((*d)->claims(spec))
			return *d;
	return NULL;
}

void tfs_source_redact(const char *spec, char *out, size_t n)
{
	const struct tfs_source_driver *d = claimer(spec);
	size_t sl = tfs_spec_scheme(spec);
	if (d && d->redact) {
		d->redact(spec, out, n);
	} else if (!d && sl && n) {
		/* A URL no driver takes is still said without its user:password@. */
		tfs_url_redact(spec, out, n);
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

/* ---- drivers ---- */

static int owns(const struct tfs_source_driver *drv, const struct tfs_opt_spec *s)
{
	const struct tfs_opt_spec *t[2] = {drv->opts, drv->remote ? tfs_remote_opts : NULL};
	for (int h = 0; h < 2; h++)
		for (const struct tfs_opt_spec *x = t[h]; x && x->name; x++)
			if (x == s)
				return 1;
	return 0;
}

/* An option of other sources than the one given (-o cache_dir= for a
 * local file) would be accepted and do nothing: a user of sshfs expects
 * to hear that it does nothing, and which sources it is for, once. */
static void say_foreign(const struct tfs_source_driver *drv, const char *spec, const struct tfs_opts *o)
{
	for (size_t i = 0; o && i < o->n; i++) {
		const struct tfs_opt_spec *s = tfs_source_opt(o->key[i], strlen(o->key[i]));
		int again = 0; /* -o cache_size=1M -o cache_size=2M: said once */
		for (size_t j = 0; j < i; j++)
			again |= strcmp(o->key[j], o->key[i]) == 0;
		if (!s || again || owns(drv, s))
			continue;
		char whose[256], shown[TFS_SPEC_SHOWN_MAX], q[TFS_QPATH_MAX];
		size_t k = 0;
		whose[0] = 0;
		for (size_t j = 0; tfs_source_drivers[j] && k < sizeof whose; j++)
			if (tfs_source_drivers[j]->schemes && owns(tfs_source_drivers[j], s))
				k += (size_t)snprintf(whose + k, sizeof whose - k, "%s%s", k ? ", " : "",
						      tfs_source_drivers[j]->schemes);
		tfs_source_redact(spec, shown, sizeof shown);
		tfs_log("%s: warning: -o %s is an option of %s sources, not of this one: it does nothing here",
			tfs_quote_path(q, sizeof q, shown), s->name, whose);
	}
}

tfs_err tfs_source_resolve(const char *spec, const struct tfs_opts *o, struct tfs_sources *ss,
			   struct tfs_store **st, char **target, struct tfs_diag *d)
{
	for (size_t i = 0; tfs_source_drivers[i]; i++)
		if (tfs_source_drivers[i]->claims(spec)) {
			say_foreign(tfs_source_drivers[i], spec, o);
			return tfs_source_drivers[i]->resolve(spec, o, ss, st, target, d);
		}
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

/* Every driver's own options, then the remote drivers' shared ones once,
 * where the first remote driver is. */
const struct tfs_opt_spec *tfs_source_opt_at(size_t k)
{
	int shared = 0;
	for (size_t i = 0; tfs_source_drivers[i]; i++) {
		const struct tfs_opt_spec *t[2] = {tfs_source_drivers[i]->opts,
						   tfs_source_drivers[i]->remote && !shared ? tfs_remote_opts
											    : NULL};
		shared |= tfs_source_drivers[i]->remote;
		for (int h = 0; h < 2; h++)
			for (const struct tfs_opt_spec *s = t[h]; s && s->name; s++)
				if (k-- == 0)
					return s;
	}
	return NULL;
}

const struct tfs_opt_spec *tfs_source_opt(const char *name, size_t len)
{
	return tfs_opt_find(tfs_source_opt_at, name, len);
}
