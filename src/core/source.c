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

int tfs_counters_line(const struct tfs_counters *c, char *out, size_t n)
{
	int k = snprintf(
		out, n,
		"requests=%llu bytes_fetched=%llu retries=%llu cache_hits=%llu cache_misses=%llu disk_hits=%llu",
		(unsigned long long)c->requests, (unsigned long long)c->bytes_fetched,
		(unsigned long long)c->retries, (unsigned long long)c->cache_hits,
		(unsigned long long)c->cache_misses, (unsigned long long)c->disk_hits);
	if (k < 0 || (size_t)k >= n || !(c->xet_files + c->lfs_files))
		return k;
	const char *route = !c->lfs_files ? "xet" : !c->xet_files ? "lfs" : "xet+lfs";
	return k + snprintf(out + k, n - (size_t)k,
			    " route=%s xet_files=%llu lfs_files=%llu cas_requests=%llu xorb_bytes=%llu "
			    "chunk_bytes_cached=%llu chunk_bytes_fetched=%llu",
			    route, (unsigned long long)c->xet_files, (unsigned long long)c->lfs_files,
			    (unsigned long long)c->cas_requests, (unsigned long long)c->xorb_bytes,
			    (unsigned long long)c->chunk_cached, (unsigned long long)c->chunk_fetched);
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
