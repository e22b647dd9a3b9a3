#include "core/userfile.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/syscall.h>
#include <linux/openat2.h>

/* As the kernel's limit on links followed in one lookup. */
#define LINKS_MAX 40

/* One line: "WHAT=PATH: " (or "WHAT PATH: ", or nothing), then the rest. */
static tfs_err failf(struct tfs_diag *d, tfs_err e, const char *what, const char *path, const char *fmt, ...)
	__attribute__((format(printf, 5, 6)));
static tfs_err failf(struct tfs_diag *d, tfs_err e, const char *what, const char *path, const char *fmt, ...)
{
	char rest[TFS_DIAG_MAX];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(rest, sizeof rest, fmt, ap);
	va_end(ap);
	if (!what)
		return tfs_fail(d, e, "%s", rest);
	size_t wl = strlen(what);
	char q[TFS_QPATH_MAX];
	return tfs_fail(d, e, "%s%s%s: %s", what, wl && what[wl - 1] == ' ' ? "" : "=",
			tfs_quote_path(q, sizeof q, path), rest);
}

tfs_err tfs_path_absolute(const char *what, const char *path, char **out, struct tfs_diag *d)
{
	*out = NULL;
	if (!*path)
		return failf(d, TFS_ERR_INVAL, what, path, "an empty path");
	if (path[0] == '/') {
		*out = strdup(path);
		return *out ? TFS_OK : tfs_fail(d, TFS_ERR_NOMEM, "out of memory");
	}
	const char *rel = path;
	while (rel[0] == '.' && rel[1] == '/') {
		rel += 2;
		while (*rel == '/')
			rel++;
	}
	char *cwd = getcwd(NULL, 0);
	if (!cwd)
		return failf(d, TFS_ERR_INVAL, what, path,
			     "a relative path, and the working directory cannot be named: %s",
			     strerror(errno));
	size_t cl = strlen(cwd), rl = strlen(rel);
	char *abs = malloc(cl + rl + 2);
	if (abs)
		snprintf(abs, cl + rl + 2, "%s%s%s", strcmp(cwd, "/") == 0 ? "" : cwd, *rel ? "/" : "",
			 *rel ? rel : "");
	if (abs && !*abs)
		strcpy(abs, "/");
	free(cwd);
	*out = abs;
	return abs ? TFS_OK : tfs_fail(d, TFS_ERR_NOMEM, "out of memory");
}

/* ---- walking a path one part at a time ---- */

struct walk {
	int dir;              /* the directory reached (O_PATH) */
	char canon[PATH_MAX]; /* its path without links, "" for / */
	int canon_ok;         /* canon is known */
	char *todo;           /* what is left to walk */
	unsigned links;
};

static void walk_end(struct walk *w)
{
	if (w->dir >= 0)
		close(w->dir);
	w->dir = -1;
	free(w->todo);
	w->todo = NULL;
}

static tfs_err errno_fail(struct tfs_diag *d, const char *what, const char *path, int err)
{
	switch (err) {
	case ENOENT:
		return failf(d, TFS_ERR_NOENT, what, path, "does not exist");
	case ENOTDIR:
		return failf(d, TFS_ERR_OPEN, what, path, "a part of the path is not a directory");
	case ELOOP:
		return failf(d, TFS_ERR_OPEN, what, path, "too many symbolic links");
	default:
		return failf(d, TFS_ERR_OPEN, what, path, "cannot open it: %s", strerror(err));
	}
}

static const char *kind_of(mode_t m)
{
	return S_ISDIR(m)    ? "a directory"
	       : S_ISFIFO(m) ? "a FIFO (named pipe)"
	       : S_ISSOCK(m) ? "a socket"
	       : S_ISLNK(m)  ? "a symbolic link"
			     : "a device";
}

static int reset_to_root(struct walk *w)
{
	int r = open("/", O_PATH | O_DIRECTORY | O_CLOEXEC);
	if (r < 0)
		return -1;
	if (w->dir >= 0)
		close(w->dir);
	w->dir = r;
	w->canon[0] = 0;
	w->canon_ok = 1;
	return 0;
}

/* The link `ln` (O_PATH, lstat in *ls) found in w->dir as `name`, with
 * `rest` of the path after it: followed, unless another user planted it in
 * a sticky directory that others may write. Then w->todo is the link's
 * target and the rest. */
static tfs_err follow(struct walk *w, int ln, const struct stat *ls, const char *name, const char *rest,
		      const char *what, const char *path, struct tfs_diag *d)
{
	struct stat ds;
	if (fstat(w->dir, &ds) != 0)
		return errno_fail(d, what, path, errno);
	uid_t me = geteuid();
	if ((ds.st_mode & (S_ISVTX | S_IWOTH)) == (S_ISVTX | S_IWOTH) && ls->st_uid != me &&
	    ls->st_uid != ds.st_uid)
		return failf(
			d, TFS_ERR_INVAL, what, path,
			"refused: %s%s%s is a symbolic link of uid %u in a sticky directory that others may write: another user's link is not followed",
			w->canon_ok ? w->canon : "", w->canon_ok ? "/" : "", name, (unsigned)ls->st_uid);
	if (++w->links > LINKS_MAX)
		return errno_fail(d, what, path, ELOOP);
	char target[PATH_MAX];
	ssize_t k = readlinkat(ln, "", target, sizeof target);
	if (k < 0)
		return errno_fail(d, what, path, errno);
	if (k == 0 || (size_t)k >= sizeof target)
		return errno_fail(d, what, path, k ? ENAMETOOLONG : ENOENT);
	size_t rl = strlen(rest);
	char *todo = malloc((size_t)k + rl + 1);
	if (!todo)
		return tfs_fail(d, TFS_ERR_NOMEM, "out of memory");
	memcpy(todo, target, (size_t)k);
	memcpy(todo + k, rest, rl + 1);
	free(w->todo);
	w->todo = todo;
	if (target[0] == '/' && reset_to_root(w) != 0)
		return errno_fail(d, what, path, errno);
	return TFS_OK;
}

static void canon_down(struct walk *w, const char *name)
{
	size_t cl = strlen(w->canon), nl = strlen(name);
	if (cl + nl + 2 > sizeof w->canon)
		w->canon_ok = 0;
	else
		snprintf(w->canon + cl, sizeof w->canon - cl, "/%s", name);
}

static void canon_up(struct walk *w)
{
	char *s = strrchr(w->canon, '/');
	if (s)
		*s = 0;
}

/* Walks path to its last part: then w->dir is the directory that holds it
 * and `name` its name. With follow_last a link there is followed too (the
 * walk goes on) and *last is the last part's lstat. */
static tfs_err walk(struct walk *w, const char *what, const char *path, int follow_last,
		    char name[NAME_MAX + 1], struct stat *last, struct tfs_diag *d)
{
	memset(w, 0, sizeof *w);
	w->dir = -1;
	if (path[0] == '/') {
		if (reset_to_root(w) != 0)
			return errno_fail(d, what, path, errno);
	} else {
		if ((w->dir = open(".", O_PATH | O_DIRECTORY | O_CLOEXEC)) < 0)
			return errno_fail(d, what, path, errno);
		w->canon_ok = getcwd(w->canon, sizeof w->canon) != NULL;
		if (w->canon_ok && strcmp(w->canon, "/") == 0)
			w->canon[0] = 0;
	}
	if (!(w->todo = strdup(path)))
		return tfs_fail(d, TFS_ERR_NOMEM, "out of memory");
	const char *p = w->todo;
	for (;;) {
		while (*p == '/')
			p++;
		if (!*p)
			return failf(d, TFS_ERR_NOTREG, what, path,
				     "refused: a directory, not a regular file");
		size_t n = strcspn(p, "/");
		if (n > NAME_MAX)
			return errno_fail(d, what, path, ENAMETOOLONG);
		memcpy(name, p, n);
		name[n] = 0;
		const char *rest = p + n;
		int final = rest[strspn(rest, "/")] == 0 && *rest != '/';
		if (strcmp(name, ".") == 0 || strcmp(name, "..") == 0) {
			if (name[1] == '.') {
				int up = openat(w->dir, "..", O_PATH | O_DIRECTORY | O_CLOEXEC);
				if (up < 0)
					return errno_fail(d, what, path, errno);
				close(w->dir);
				w->dir = up;
				canon_up(w);
			}
			p = rest;
			continue;
		}
		if (final && !follow_last)
			return TFS_OK;
		int nd = openat(w->dir, name, O_PATH | O_NOFOLLOW | O_CLOEXEC);
		struct stat st;
		if (nd < 0 || fstat(nd, &st) != 0) {
			int err = errno;
			if (nd >= 0)
				close(nd);
			return errno_fail(d, what, path, err);
		}
		if (S_ISLNK(st.st_mode)) {
			tfs_err e = follow(w, nd, &st, name, rest, what, path, d);
			close(nd);
			if (e)
				return e;
			p = w->todo;
			continue;
		}
		if (final) {
			close(nd);
			*last = st;
			return TFS_OK;
		}
		if (!S_ISDIR(st.st_mode)) {
			close(nd);
			return errno_fail(d, what, path, ENOTDIR);
		}
		close(w->dir);
		w->dir = nd;
		canon_down(w, name);
		p = rest;
	}
}

/* "refused: N bytes; at most 16 MiB" (n 0: over it, by how much unknown) */
static tfs_err too_large(struct tfs_diag *d, const char *what, const char *path, uint64_t n, uint64_t max)
{
	char cap[32];
	if (max >= (1u << 30) && max % (1u << 30) == 0)
		snprintf(cap, sizeof cap, "%llu GiB", (unsigned long long)(max >> 30));
	else if (max >= (1u << 20) && max % (1u << 20) == 0)
		snprintf(cap, sizeof cap, "%llu MiB", (unsigned long long)(max >> 20));
	else
		snprintf(cap, sizeof cap, "%llu bytes", (unsigned long long)max);
	if (!n) /* it grew while being read */
		return failf(d, TFS_ERR_INVAL, what, path, "refused: over %s", cap);
	return failf(d, TFS_ERR_INVAL, what, path, "refused: %llu bytes; at most %s", (unsigned long long)n,
		     cap);
}

/* O_NONBLOCK off again once the file is known to be a regular one; keep:
 * the status flags it was opened with that stay (O_APPEND). */
static int clear_nonblock(int fd, int keep)
{
	return fcntl(fd, F_SETFL, keep);
}

static int inside(const char *canon, const char *within)
{
	size_t wl = strlen(within);
	while (wl > 1 && within[wl - 1] == '/')
		wl--;
	return strcmp(within, "/") == 0 ||
	       (strncmp(canon, within, wl) == 0 && (canon[wl] == '/' || canon[wl] == 0));
}

/* An absolute path without ".", ".." or empty parts: with no link in it,
 * it is its own resolved path. */
static int plain_path(const char *path)
{
	if (path[0] != '/' || !path[1] || path[strlen(path) - 1] == '/')
		return 0;
	for (const char *p = path; (p = strchr(p, '/')); p++)
		if (p[1] == '/' ||
		    (p[1] == '.' && (p[2] == '/' || !p[2] || (p[2] == '.' && (p[3] == '/' || !p[3])))))
			return 0;
	return 1;
}

static int open_no_links(const char *path, int flags)
{
#ifdef SYS_openat2
	struct open_how how = {.flags = (uint64_t)flags,
			       .resolve = RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS};
	return (int)syscall(SYS_openat2, AT_FDCWD, path, &how, sizeof how);
#else
	(void)path;
	(void)flags;
	errno = ENOSYS;
	return -1;
#endif
}

/* Most paths hold no link at all: the kernel then opens them in two
 * calls (openat2 with RESOLVE_NO_SYMLINKS), where the walk takes a few per
 * part of the path (a directory of 2,000 shards mounted 30% slower).
 * TFS_ERR_UNHANDLED: there is a link (or no openat2), walk instead. */
static tfs_err open_direct(const char *what, const char *path, const char *within, struct stat *probe, int *f,
			   struct tfs_diag *d)
{
	if (!plain_path(path))
		return TFS_ERR_UNHANDLED;
	int p = open_no_links(path, O_PATH | O_CLOEXEC);
	if (p < 0)
		return errno == ENOENT || errno == ENOTDIR || errno == EACCES
			       ? errno_fail(d, what, path, errno)
			       : TFS_ERR_UNHANDLED;
	int r = fstat(p, probe);
	int err = errno;
	close(p);
	if (r != 0)
		return errno_fail(d, what, path, err);
	if (!S_ISREG(probe->st_mode))
		return failf(d, TFS_ERR_NOTREG, what, path, "refused: %s, not a regular file",
			     kind_of(probe->st_mode));
	if (within && !inside(path, within))
		return failf(d, TFS_ERR_INVAL, what, path, "refused: it lies out of %s", within);
	if ((*f = open_no_links(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC | O_NOCTTY)) < 0)
		return errno == ELOOP
			       ? failf(d, TFS_ERR_OPEN, what, path, "changed while being opened; try again")
			       : errno_fail(d, what, path, errno);
	return TFS_OK;
}

/* The same through the walk: every link looked at on the way. */
static tfs_err open_walked(const char *what, const char *path, const char *within, struct stat *probe, int *f,
			   struct tfs_diag *d)
{
	struct walk w;
	char name[NAME_MAX + 1];
	tfs_err e = walk(&w, what, path, 1, name, probe, d);
	if (!e && !S_ISREG(probe->st_mode))
		e = failf(d, TFS_ERR_NOTREG, what, path, "refused: %s, not a regular file",
			  kind_of(probe->st_mode));
	if (!e && within && !(w.canon_ok && inside(w.canon, within)))
		e = failf(d, TFS_ERR_INVAL, what, path, "refused: a symbolic link out of %s", within);
	if (!e && (*f = openat(w.dir, name, O_RDONLY | O_NONBLOCK | O_NOFOLLOW | O_CLOEXEC | O_NOCTTY)) < 0)
		e = errno == ELOOP
			    ? failf(d, TFS_ERR_OPEN, what, path, "changed while being opened; try again")
			    : errno_fail(d, what, path, errno);
	walk_end(&w);
	return e;
}

tfs_err tfs_file_open(const char *what, const char *path, uint64_t max, const char *within, int *fd,
		      struct stat *st, struct tfs_diag *d)
{
	struct stat probe;
	int f = -1;
	*fd = -1;
	memset(&probe, 0, sizeof probe);
	tfs_err e = open_direct(what, path, within, &probe, &f, d);
	if (e == TFS_ERR_UNHANDLED)
		e = open_walked(what, path, within, &probe, &f, d);
	*st = probe;
	if (e)
		return e;
	if (fstat(f, st) != 0 || clear_nonblock(f, 0) != 0) {
		int err = errno;
		close(f);
		return errno_fail(d, what, path, err);
	}
	/* The file looked at is the one opened (not swapped in between). */
	if (!S_ISREG(st->st_mode) || st->st_dev != probe.st_dev || st->st_ino != probe.st_ino) {
		close(f);
		return failf(d, TFS_ERR_OPEN, what, path, "changed while being opened; try again");
	}
	if (max && (uint64_t)st->st_size > max) {
		close(f);
		return too_large(d, what, path, (uint64_t)st->st_size, max);
	}
	*fd = f;
	return TFS_OK;
}

tfs_err tfs_file_read(const char *what, const char *path, size_t max, char **buf, size_t *len,
		      struct tfs_diag *d)
{
	int fd;
	struct stat st;
	*buf = NULL;
	*len = 0;
	tfs_err e = tfs_file_open(what, path, max, NULL, &fd, &st, d);
	if (e)
		return e;
	/* To the end, whatever the size said (a file under /proc says 0). */
	size_t cap = (size_t)st.st_size + 1, n = 0;
	char *b = malloc(cap + 1);
	if (!b)
		e = tfs_fail(d, TFS_ERR_NOMEM, "out of memory");
	while (!e) {
		if (n == cap) {
			char *nb = realloc(b, 2 * cap + 1);
			if (!nb) {
				e = tfs_fail(d, TFS_ERR_NOMEM, "out of memory");
				break;
			}
			b = nb;
			cap *= 2;
		}
		ssize_t r = read(fd, b + n, cap - n);
		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0)
			e = failf(d, TFS_ERR_OPEN, what, path, "cannot read it: %s", strerror(errno));
		else if (r == 0)
			break;
		else if ((n += (size_t)r) > max && max)
			e = too_large(d, what, path, 0, max);
	}
	close(fd);
	if (e) {
		free(b);
		return e;
	}
	b[n] = 0;
	*buf = b;
	*len = n;
	return TFS_OK;
}

tfs_err tfs_file_append(const char *what, const char *path, int *fd, struct tfs_diag *d)
{
	struct walk w;
	char name[NAME_MAX + 1];
	*fd = -1;
	tfs_err e = walk(&w, what, path, 0, name, NULL, d);
	uid_t me = geteuid();
	struct stat st;
	int f = -1, err = 0;
	if (!e) {
		/* Looked at first: a device or a FIFO is never opened. */
		int nd = openat(w.dir, name, O_PATH | O_NOFOLLOW | O_CLOEXEC);
		if (nd >= 0 && fstat(nd, &st) == 0 && !S_ISREG(st.st_mode))
			e = failf(d, TFS_ERR_INVAL, what, path, "refused: %s, not a regular file%s",
				  kind_of(st.st_mode), S_ISLNK(st.st_mode) ? " (name the file itself)" : "");
		if (nd >= 0)
			close(nd);
	}
	if (!e) {
		f = openat(w.dir, name,
			   O_WRONLY | O_APPEND | O_CREAT | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC | O_NOCTTY,
			   0600);
		err = errno;
	}
	walk_end(&w);
	if (e)
		return e;
	if (f < 0)
		return err == ELOOP || err == ENXIO
			       ? failf(d, TFS_ERR_INVAL, what, path, "refused: %s, not a regular file",
				       err == ELOOP ? "a symbolic link" : "a FIFO (named pipe)")
			       : errno_fail(d, what, path, err);
	if (fstat(f, &st) != 0) {
		err = errno;
		close(f);
		return errno_fail(d, what, path, err);
	}
	if (!S_ISREG(st.st_mode))
		e = failf(d, TFS_ERR_INVAL, what, path, "refused: %s, not a regular file",
			  kind_of(st.st_mode));
	else if (st.st_uid != me)
		e = failf(d, TFS_ERR_INVAL, what, path,
			  "refused: it belongs to uid %u, not to the mounting user (uid %u)",
			  (unsigned)st.st_uid, (unsigned)me);
	else if ((st.st_mode & 07777) != 0600 && fchmod(f, 0600) != 0)
		e = failf(d, TFS_ERR_OPEN, what, path, "cannot make it mode 0600: %s", strerror(errno));
	else if (clear_nonblock(f, O_APPEND) != 0)
		e = errno_fail(d, what, path, errno);
	if (e) {
		close(f);
		return e;
	}
	*fd = f;
	return TFS_OK;
}

void tfs_file_stamp(const char *path, struct tfs_stamp *s)
{
	struct stat st;
	memset(s, 0, sizeof *s);
	if (!path || stat(path, &st) != 0)
		return;
	s->dev = (uint64_t)st.st_dev;
	s->ino = (uint64_t)st.st_ino;
	s->size = (uint64_t)st.st_size;
	s->mtime_ns = (int64_t)st.st_mtim.tv_sec * 1000000000 + st.st_mtim.tv_nsec;
	s->ctime_ns = (int64_t)st.st_ctim.tv_sec * 1000000000 + st.st_ctim.tv_nsec;
}
