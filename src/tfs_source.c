#include "tfs_source.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

void tfs_source_close(struct tfs_source *s)
{
	if (s)
		s->ops->close(s);
}

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

/* ---- local file ---- */

static tfs_err file_pread(struct tfs_source *s, void *buf, size_t len,
			  uint64_t off)
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
	return TFS_OK;
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
	free(s);
}

static const struct tfs_source_ops file_ops = {
	.pread = file_pread,
	.identity = file_identity,
	.close = file_close,
};

tfs_err tfs_source_open_file(const char *path, struct tfs_source **out,
			     struct tfs_diag *d)
{
	struct stat st;
	struct tfs_source *s;
	/* O_NOFOLLOW is not used: Hugging Face caches reach blobs through
	 * symlinks, and the resolved path is what user.source shows. */
	int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY);
	if (fd < 0)
		return tfs_fail(d, TFS_ERR_OPEN, "cannot open: %s", strerror(errno));
	if (fstat(fd, &st) != 0) {
		int e = errno;
		close(fd);
		return tfs_fail(d, TFS_ERR_OPEN, "cannot stat: %s", strerror(e));
	}
	if (S_ISDIR(st.st_mode)) {
		close(fd);
		return tfs_fail(d, TFS_ERR_NOTREG,
				"is a directory, not a .safetensors file");
	}
	if (!S_ISREG(st.st_mode)) {
		close(fd);
		return tfs_fail(d, TFS_ERR_NOTREG,
				"is not a regular file (a device, pipe or socket cannot be mounted)");
	}
	s = calloc(1, sizeof *s);
	if (!s) {
		close(fd);
		return tfs_fail(d, TFS_ERR_NOMEM, "out of memory");
	}
	s->ops = &file_ops;
	s->fd = fd;
	s->location = realpath(path, NULL);
	if (!s->location) {
		file_close(s);
		return tfs_fail(d, TFS_ERR_OPEN, "cannot resolve path: %s",
				strerror(errno));
	}
	fill_identity(&st, &s->id);
	*out = s;
	return TFS_OK;
}

/* ---- memory ---- */

struct mem_source {
	struct tfs_source base;
	const unsigned char *data;
	size_t len;
};

static tfs_err mem_pread(struct tfs_source *s, void *buf, size_t len,
			 uint64_t off)
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

tfs_err tfs_source_open_mem(const void *data, size_t len, const char *name,
			    struct tfs_source **out)
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
