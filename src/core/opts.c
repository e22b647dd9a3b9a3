/* Mount options (core/opts.h). */
#include "core/opts.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

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

const struct tfs_opt_spec *tfs_opt_find(const struct tfs_opt_spec *(*at)(size_t k), const char *name,
					size_t len)
{
	const struct tfs_opt_spec *s;
	for (size_t k = 0; (s = at(k)); k++)
		if (strlen(s->name) == len && memcmp(s->name, name, len) == 0)
			return s;
	return NULL;
}
