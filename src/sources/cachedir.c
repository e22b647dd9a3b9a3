#include "sources/cachedir.h"

#include <dirent.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/table.h"

/* A file found by a scan, for the eviction order. */
struct old {
	int64_t mtime;
	uint64_t size;
	char *path;
};

/* What a scan finds: the bytes under it, and with collect, every file
 * but the memos. */
struct scan {
	int collect;
	uint64_t total;
	struct old *v;
	size_t n, cap;
};

static void scan_file(struct scan *sc, const char *p, const struct stat *st)
{
	uint64_t size = (uint64_t)st->st_blocks * 512;
	size_t pl = strlen(p);
	sc->total += size;
	if (!sc->collect || (pl >= 5 && strcmp(p + pl - 5, "/memo") == 0))
		return;
	if (sc->n == sc->cap && tfs_grow((void **)&sc->v, &sc->cap, sc->n + 1, sizeof *sc->v))
		return;
	sc->v[sc->n].mtime = st->st_mtim.tv_sec * 1000000000ll + st->st_mtim.tv_nsec;
	sc->v[sc->n].size = size;
	if ((sc->v[sc->n].path = strdup(p)))
		sc->n++;
}

static void scan_dir(struct scan *sc, const char *dir, int depth)
{
	DIR *dd = opendir(dir);
	struct dirent *de;
	if (!dd)
		return;
	while ((de = readdir(dd))) {
		struct stat st;
		char p[4096];
		if (strcmp(de->d_name, ".") == 0 || strcmp(de->d_name, "..") == 0 ||
		    fstatat(dirfd(dd), de->d_name, &st, AT_SYMLINK_NOFOLLOW) != 0 ||
		    (size_t)snprintf(p, sizeof p, "%s/%s", dir, de->d_name) >= sizeof p)
			continue;
		if (S_ISREG(st.st_mode))
			scan_file(sc, p, &st);
		else if (S_ISDIR(st.st_mode) && depth > 0)
			scan_dir(sc, p, depth - 1);
	}
	closedir(dd);
}

static int old_cmp(const void *a, const void *b)
{
	const struct old *p = a, *q = b;
	return (p->mtime > q->mtime) - (p->mtime < q->mtime);
}

uint64_t tfs_cachedir_used(const char *dir, int depth)
{
	struct scan sc = {.collect = 0};
	scan_dir(&sc, dir, depth);
	return sc.total;
}

uint64_t tfs_cachedir_trim(const char *dir, int depth, uint64_t keep)
{
	struct scan sc = {.collect = 1};
	scan_dir(&sc, dir, depth);
	uint64_t measured = sc.total;
	qsort(sc.v, sc.n, sizeof *sc.v, old_cmp);
	for (size_t i = 0; i < sc.n; i++) {
		/* (A file another mount removed meanwhile is gone too.) */
		struct stat st;
		if (measured > keep && (unlink(sc.v[i].path) == 0 || lstat(sc.v[i].path, &st) != 0))
			measured -= sc.v[i].size;
		free(sc.v[i].path);
	}
	free(sc.v);
	return measured;
}
