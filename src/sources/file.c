/* Local files: the default source driver, for any SOURCE no other driver
 * claims. A file's bytes are read with pread (and spliced from its
 * descriptor by the FUSE side); a directory is a store. */
#include "core/source.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/userfile.h"

static void fill_identity(const struct stat *st, struct tfs_identity *id)
{
	id->size = (uint64_t)st->st_size;
	id->dev = (uint64_t)st->st_dev;
	id->ino = (uint64_t)st->st_ino;
	id->mtime_sec = st->st_mtim.tv_sec;
	id->mtime_nsec = st->st_mtim.tv_nsec;
	id->ctime_sec = st->st_ctim.tv_sec;
	id->ctime_nsec = st->st_ctim.tv_nsec;
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

/* ---- a file ---- */

static tfs_err file_pread(struct tfs_source *s, void *buf, size_t len, uint64_t off)
{
	char *p = buf;
	while (len > 0) {
		if (off > (uint64_t)INT64_MAX)
			return TFS_ERR_SHORT;
		ssize_t r = pread(s->fd, p, len, (off_t)off);
		if (r < 0) {
			if (errno == EINTR)
				continue;
			return TFS_ERR_IO;
		}
		if (r == 0)
			return TFS_ERR_SHORT;
		p += r;
		len -= (size_t)r;
		off += (uint64_t)r;
	}
	/* After the read: a file rewritten in place before or while it was
	 * read may have given bytes of its new contents (one fstat, about
	 * as cheap as the read of one page from the page cache). */
	return tfs_source_changed(s) ? TFS_ERR_IO : TFS_OK;
}

static tfs_err file_identity(struct tfs_source *s, struct tfs_identity *id)
{
	struct stat st;
	if (fstat(s->fd, &st) != 0)
		return TFS_ERR_IO;
	fill_identity(&st, id);
	return TFS_OK;
}

static void file_close(struct tfs_source *s)
{
	if (s->fd >= 0)
		close(s->fd);
	free(s->location);
	free(s->etag);
	free(s->revision);
	free(s);
}

static const struct tfs_source_ops file_ops = {
	.pread = file_pread,
	.identity = file_identity,
	.close = file_close,
};

tfs_err tfs_source_open_within(const char *path, const char *within, struct tfs_source **out,
			       struct tfs_diag *d)
{
	struct stat st;
	struct tfs_source *s;
	int fd;
	/* Symlinks are followed (Hugging Face caches reach blobs through
	 * them, and the resolved path is what user.source shows), but not
	 * one another user planted in /tmp; a FIFO named as a shard cannot
	 * block the mount. */
	tfs_err e = tfs_file_open(NULL, path, 0, within, &fd, &st, d);
	if (e == TFS_ERR_NOENT)
		return tfs_fail(d, e, "cannot open: %s", strerror(ENOENT));
	if (e == TFS_ERR_NOTREG && S_ISDIR(st.st_mode))
		return tfs_fail(d, e, "is a directory, not a checkpoint file");
	if (e == TFS_ERR_NOTREG)
		return tfs_fail(d, e, "is not a regular file (a device, pipe or socket cannot be mounted)");
	/* A link refused is the source unreadable (exit 3), not a usage
	 * error; open_inside keeps TFS_ERR_INVAL: not shown. */
	if (e == TFS_ERR_INVAL && !within)
		return TFS_ERR_OPEN;
	if (e)
		return e;
	s = calloc(1, sizeof *s);
	if (!s) {
		close(fd);
		return tfs_fail(d, TFS_ERR_NOMEM, "out of memory");
	}
	s->ops = &file_ops;
	s->fd = fd;
	s->location = location_of(path);
	if (!s->location) {
		file_close(s);
		return tfs_fail(d, TFS_ERR_OPEN, "cannot resolve path: %s", strerror(errno));
	}
	fill_identity(&st, &s->id);
	*out = s;
	return TFS_OK;
}

tfs_err tfs_source_open_path(const char *path, struct tfs_source **out, struct tfs_diag *d)
{
	return tfs_source_open_within(path, NULL, out, d);
}

/* ---- a directory ---- */

struct dir_store {
	struct tfs_store base;
	char *root; /* as given; "" for the working directory */
	char *tree; /* what open_inside keeps to (tree_of), or NULL */
};

/* The directory tree whose files a view may show (open_inside): the
 * source's directory, resolved; for a snapshot of the Hugging Face cache
 * (REPO/snapshots/REV/...), whose files are links to REPO/blobs/, the
 * repository's directory REPO. NULL when it cannot be resolved. */
static char *tree_of(const char *dir)
{
	char *t = realpath(*dir ? dir : ".", NULL);
	char *snap = NULL;
	for (char *s = t ? strstr(t, "/snapshots/") : NULL; s; s = strstr(s + 1, "/snapshots/"))
		snap = s;
	if (snap) {
		struct stat st;
		char *blobs = malloc((size_t)(snap - t) + 8);
		if (blobs) {
			snprintf(blobs, (size_t)(snap - t) + 8, "%.*s/blobs", (int)(snap - t), t);
			if (stat(blobs, &st) == 0 && S_ISDIR(st.st_mode))
				*snap = 0;
			free(blobs);
		}
		if (!*t)
			strcpy(t, "/");
	}
	return t;
}

static char *path_in(const struct dir_store *ds, const char *name)
{
	return *ds->root ? join(ds->root, name) : strdup(name);
}

static tfs_err dir_open(struct tfs_store *st, const char *name, struct tfs_source **out, struct tfs_diag *d)
{
	char *path = path_in((struct dir_store *)st, name);
	if (!path)
		return tfs_fail(d, TFS_ERR_NOMEM, "out of memory");
	tfs_err e = tfs_source_open_path(path, out, d);
	free(path);
	return e;
}

static tfs_err dir_open_inside(struct tfs_store *st, const char *name, struct tfs_source **out,
			       struct tfs_diag *d)
{
	struct dir_store *ds = (struct dir_store *)st;
	if (!ds->tree)
		return tfs_fail(d, TFS_ERR_INVAL, "refused: the source's directory cannot be resolved");
	char *path = path_in(ds, name);
	if (!path)
		return tfs_fail(d, TFS_ERR_NOMEM, "out of memory");
	tfs_err e = tfs_source_open_within(path, ds->tree, out, d);
	free(path);
	return e;
}

static tfs_err dir_list(struct tfs_store *st, const char *sub, struct tfs_dirlist *out, struct tfs_diag *d)
{
	struct dir_store *ds = (struct dir_store *)st;
	char *path = *sub ? path_in(ds, sub) : strdup(*ds->root ? ds->root : ".");
	if (!path)
		return tfs_fail(d, TFS_ERR_NOMEM, "out of memory");
	DIR *dir = opendir(path);
	free(path);
	if (!dir)
		return tfs_fail(d, TFS_ERR_OPEN, "cannot open directory: %s", strerror(errno));
	struct dirent *de;
	tfs_err e = TFS_OK;
	while (!e && (de = readdir(dir))) {
		if (de->d_name[0] == '.')
			continue;
		struct stat s;
		if (fstatat(dirfd(dir), de->d_name, &s, 0) != 0)
			continue;
		if (S_ISDIR(s.st_mode) && tfs_dirlist_add_dir(out, de->d_name, strlen(de->d_name)))
			e = tfs_fail(d, TFS_ERR_NOMEM, "out of memory");
		if (!S_ISREG(s.st_mode))
			continue;
		if (!e && tfs_dirlist_add(out, de->d_name, (uint64_t)s.st_size))
			e = tfs_fail(d, TFS_ERR_NOMEM, "out of memory");
	}
	closedir(dir);
	return e;
}

static void dir_close(struct tfs_store *st)
{
	struct dir_store *ds = (struct dir_store *)st;
	free(ds->root);
	free(ds->tree);
	free(ds->base.prefix);
	free(ds->base.location);
	free(ds);
}

static const struct tfs_store_ops dir_ops = {
	.open = dir_open,
	.open_inside = dir_open_inside,
	.list = dir_list,
	.close = dir_close,
};

/* ---- the driver ---- */

/* Every SOURCE but a URL (scheme://): one of a scheme no driver takes is
 * refused as such rather than looked for as a local path. */
static int claims(const char *spec)
{
	return tfs_spec_scheme(spec) == 0;
}

static tfs_err resolve(const char *spec, const struct tfs_opts *o, struct tfs_sources *ss,
		       struct tfs_store **out, char **target, struct tfs_diag *d)
{
	struct stat st;
	(void)o;
	(void)ss;
	*target = NULL;
	if (stat(spec, &st) != 0)
		return tfs_fail(d, errno == ENOENT ? TFS_ERR_NOENT : TFS_ERR_OPEN, "cannot open: %s",
				strerror(errno));
	/* A pipe (tensorfs <(cat x) mnt) has no path to resolve and no bytes
	 * to read twice. */
	if (!S_ISDIR(st.st_mode) && !S_ISREG(st.st_mode))
		return tfs_fail(d, TFS_ERR_NOTREG,
				"is not a regular file (a device, pipe or socket cannot be mounted)");
	struct dir_store *ds = calloc(1, sizeof *ds);
	if (!ds)
		return tfs_fail(d, TFS_ERR_NOMEM, "out of memory");
	ds->base.ops = &dir_ops;
	fill_identity(&st, &ds->base.id);
	size_t n = strlen(spec);
	if (S_ISDIR(st.st_mode)) {
		/* Names join the directory as written, so messages show the
		 * paths the user would type. */
		ds->root = strdup(spec);
		ds->base.prefix = malloc(n + 2);
		if (ds->base.prefix)
			snprintf(ds->base.prefix, n + 2, "%s%s", spec, n && spec[n - 1] == '/' ? "" : "/");
		while (ds->root && strlen(ds->root) > 1 && ds->root[strlen(ds->root) - 1] == '/')
			ds->root[strlen(ds->root) - 1] = 0;
	} else {
		const char *slash = strrchr(spec, '/');
		size_t dl = slash ? (size_t)(slash - spec) : 0;
		ds->root = slash ? (dl ? strndup(spec, dl) : strdup("/")) : strdup("");
		ds->base.prefix = strndup(spec, slash ? dl + 1 : 0);
		*target = strdup(slash ? slash + 1 : spec);
		if (!*target) {
			dir_close(&ds->base);
			return tfs_fail(d, TFS_ERR_NOMEM, "out of memory");
		}
	}
	ds->base.location = realpath(spec, NULL);
	ds->tree = ds->root ? tree_of(ds->root) : NULL;
	if (!ds->root || !ds->base.prefix || !ds->base.location) {
		free(*target);
		*target = NULL;
		dir_close(&ds->base);
		return tfs_fail(d, TFS_ERR_NOMEM, "out of memory");
	}
	*out = &ds->base;
	return TFS_OK;
}

const struct tfs_source_driver tfs_source_file = {
	.name = "file",
	.claims = claims,
	.resolve = resolve,
	.opts = NULL,
	.spec_is_path = 1,
};
