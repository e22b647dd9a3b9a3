/* The FUSE glue (fuse/fuse.h): requests to the file-system core, its
 * answers to replies. */
#include "fuse/fuse.h"
#include "fuse/behind.h"

#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/uio.h>

#include "core/names.h"

int tfs_errno(tfs_err e)
{
	switch (e) {
	case TFS_OK:
		return 0;
	case TFS_ERR_NOMEM:
		return ENOMEM;
	case TFS_ERR_INVAL:
		return EINVAL;
	case TFS_ERR_IO:
	case TFS_ERR_SHORT:
	case TFS_ERR_OPEN:
	case TFS_ERR_NOENT:
	case TFS_ERR_NOTREG:
	case TFS_ERR_FORMAT:
	case TFS_ERR_UNHANDLED:
		return EIO;
	case TFS_ERR_NOFILE:
		return ENOENT;
	case TFS_ERR_NOTDIR:
		return ENOTDIR;
	case TFS_ERR_ISDIR:
		return EISDIR;
	case TFS_ERR_NAMETOOLONG:
		return ENAMETOOLONG;
	case TFS_ERR_ROFS:
		return EROFS;
	case TFS_ERR_NODATA:
		return ENODATA;
	case TFS_ERR_RANGE:
		return ERANGE;
	case TFS_ERR_TOOBIG:
		return E2BIG;
	case TFS_ERR_NOTSUP:
		return EOPNOTSUPP;
	}
	return EIO;
}

/* The first request after INIT also runs the after-INIT hook (see
 * struct tfs_fs): every operation goes through here. */
static struct tfs_fs *fs_of(fuse_req_t req)
{
	struct tfs_fs *fs = fuse_req_userdata(req);
	if (fs->after_init && !__atomic_load_n(&fs->after_init_done, __ATOMIC_ACQUIRE) &&
	    !__atomic_exchange_n(&fs->after_init_done, 1, __ATOMIC_ACQ_REL))
		fs->after_init(fs->after_init_ctx);
	return fs;
}

static void fill_entry(const struct tfs_fs *fs, uint64_t ino, const struct stat *st,
		       struct fuse_entry_param *e)
{
	memset(e, 0, sizeof *e);
	e->ino = ino;
	e->generation = 1;
	e->attr_timeout = fs->timeout;
	e->entry_timeout = fs->timeout;
	e->attr = *st;
}

static void op_init(void *userdata, struct fuse_conn_info *conn)
{
	struct tfs_fs *fs = userdata;
	if (conn->capable & FUSE_CAP_READDIRPLUS)
		conn->want |= FUSE_CAP_READDIRPLUS;
	/* Splice must be asked for, or fuse_reply_data quietly copies
	 * through a buffer (slower than pread). With it the tensor's bytes
	 * go from the source's page cache to the FUSE request in one copy
	 * instead of two: make bench measured first reads 0.28 -> 0.33 and
	 * 8 parallel readers 0.18 -> 0.25 of dd on the source. */
	fs->core.splice = !fs->nosplice && (conn->capable & FUSE_CAP_SPLICE_WRITE);
	if (fs->core.splice)
		conn->want |= FUSE_CAP_SPLICE_WRITE;
	else
		conn->want &= ~(unsigned)FUSE_CAP_SPLICE_WRITE;
	if (conn->max_write > TFS_MAX_REQUEST)
		conn->max_write = TFS_MAX_REQUEST;
	/* The tree never changes: let the kernel keep directory pages. */
	conn->want &= ~(unsigned)FUSE_CAP_AUTO_INVAL_DATA;
}

static void op_lookup(fuse_req_t req, fuse_ino_t parent, const char *name)
{
	struct tfs_fs *fs = fs_of(req);
	struct fuse_entry_param e;
	struct stat st;
	uint64_t ino;
	tfs_err err = tfs_fs_lookup(&fs->core, parent, name, &ino, &st);
	if (err == TFS_ERR_NOFILE) {
		/* Cache the miss too: nothing can ever appear. */
		memset(&e, 0, sizeof e);
		e.entry_timeout = fs->timeout;
		fuse_reply_entry(req, &e);
	} else if (err) {
		fuse_reply_err(req, tfs_errno(err));
	} else {
		fill_entry(fs, ino, &st, &e);
		fuse_reply_entry(req, &e);
	}
}

static void op_getattr(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	struct tfs_fs *fs = fs_of(req);
	struct stat st;
	(void)fi;
	tfs_err e = tfs_fs_attr(&fs->core, ino, &st);
	if (e)
		fuse_reply_err(req, tfs_errno(e));
	else
		fuse_reply_attr(req, &st, fs->timeout);
}

static void op_opendir(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	tfs_err e = tfs_fs_opendir(&fs_of(req)->core, ino);
	if (e) {
		fuse_reply_err(req, tfs_errno(e));
		return;
	}
	fi->cache_readdir = 1;
	fi->keep_cache = 1;
	fuse_reply_open(req, fi);
}

/* Offsets: the core's entry numbers plus one (0 asks from the start). */
static void do_readdir(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off, int plus)
{
	struct tfs_fs *fs = fs_of(req);
	tfs_err err = tfs_fs_opendir(&fs->core, ino);
	if (err) {
		fuse_reply_err(req, tfs_errno(err));
		return;
	}
	if (size > 1 << 20)
		size = 1 << 20;
	char *buf = malloc(size);
	if (!buf) {
		fuse_reply_err(req, ENOMEM);
		return;
	}
	size_t used = 0;
	const char *name;
	char namebuf[TFS_NAME_MAX + 1];
	uint64_t cino;
	mode_t type;
	for (uint64_t o = off < 0 ? 0 : (uint64_t)off;
	     tfs_fs_dirent(&fs->core, ino, o, namebuf, &name, &cino, &type); o++) {
		struct stat st;
		size_t need;
		if (plus) {
			struct fuse_entry_param e;
			tfs_fs_attr(&fs->core, cino, &st);
			fill_entry(fs, cino, &st, &e);
			need = fuse_add_direntry_plus(req, buf + used, size - used, name, &e, (off_t)(o + 1));
		} else {
			memset(&st, 0, sizeof st);
			st.st_ino = (ino_t)cino;
			st.st_mode = type;
			need = fuse_add_direntry(req, buf + used, size - used, name, &st, (off_t)(o + 1));
		}
		if (need > size - used)
			break;
		used += need;
	}
	fuse_reply_buf(req, buf, used);
	free(buf);
}

static void op_readdir(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off, struct fuse_file_info *fi)
{
	(void)fi;
	do_readdir(req, ino, size, off, 0);
}

static void op_readdirplus(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off, struct fuse_file_info *fi)
{
	(void)fi;
	do_readdir(req, ino, size, off, 1);
}

static void open_add(struct tfs_fs *fs, struct tfs_handle *h)
{
	pthread_mutex_lock(&fs->open_lock);
	h->prev = NULL;
	h->next = fs->open;
	if (fs->open)
		fs->open->prev = h;
	fs->open = h;
	pthread_mutex_unlock(&fs->open_lock);
}

static void open_close(struct tfs_fs *fs, struct tfs_handle *h)
{
	pthread_mutex_lock(&fs->open_lock);
	if (h->prev)
		h->prev->next = h->next;
	else
		fs->open = h->next;
	if (h->next)
		h->next->prev = h->prev;
	pthread_mutex_unlock(&fs->open_lock);
	tfs_behind_close(fs->behind, h->stream);
	tfs_fs_release(&fs->core, h);
}

void tfs_fuse_close_all(struct tfs_fs *fs)
{
	while (fs->open) {
		struct tfs_handle *h = fs->open;
		fs->open = h->next;
		/* Their streams went with the drop-behind thread's state. */
		tfs_fs_release(&fs->core, h);
	}
}

static void op_open(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	struct tfs_fs *fs = fs_of(req);
	struct tfs_handle *h = NULL;
	tfs_err e = tfs_fs_open(&fs->core, ino, fi->flags, &h);
	if (!e && h->drop_behind && fs->behind && !(h->stream = tfs_behind_open(fs->behind))) {
		tfs_fs_release(&fs->core, h);
		e = TFS_ERR_NOMEM;
	}
	if (e) {
		fuse_reply_err(req, tfs_errno(e));
		return;
	}
	fi->fh = (uintptr_t)h;
	fi->keep_cache = h->keep_cache;
	fi->direct_io = h->direct_io;
	open_add(fs, h);
	/* An open the kernel gave up on (interrupted) gets no release. */
	if (fuse_reply_open(req, fi) == -ENOENT)
		open_close(fs, h);
}

static void op_release(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	struct tfs_fs *fs = fs_of(req);
	struct tfs_handle *h = (struct tfs_handle *)(uintptr_t)fi->fh;
	(void)ino;
	if (h)
		open_close(fs, h);
	fuse_reply_err(req, 0);
}

/* The core's parts as one reply: memory by writev; file ranges spliced
 * when every part is one (memory in a spliced reply would be copied
 * twice, into the pipe and out of it: a mixed reply, at the edge of what
 * a cache holds in memory, is copied once instead). */
static void reply_parts(fuse_req_t req, const struct tfs_reply *r)
{
	if (!r->files) {
		struct iovec iov[TFS_REPLY_MAX];
		for (unsigned i = 0; i < r->n; i++) {
			iov[i].iov_base = r->part[i].p;
			iov[i].iov_len = r->part[i].len;
		}
		fuse_reply_iov(req, iov, (int)r->n);
		return;
	}
	/* A bufvec of n buffers: on the stack for a few, else allocated (a
	 * generated file's read over many small tensors in the disk cache). */
	enum { FEW = 8 };
	_Alignas(struct fuse_bufvec) char room[sizeof(struct fuse_bufvec) + FEW * sizeof(struct fuse_buf)];
	size_t need = sizeof(struct fuse_bufvec) + (r->n > FEW ? r->n : FEW) * sizeof(struct fuse_buf);
	struct fuse_bufvec *v = r->n > FEW ? calloc(1, need) : (struct fuse_bufvec *)(void *)room;
	if (!v) {
		fuse_reply_err(req, ENOMEM);
		return;
	}
	if (r->n <= FEW)
		memset(room, 0, sizeof room);
	for (unsigned i = 0; i < r->n; i++) {
		struct fuse_buf *b = &v->buf[i];
		b->size = r->part[i].len;
		if (r->part[i].p) {
			b->mem = r->part[i].p;
		} else {
			b->flags = FUSE_BUF_IS_FD | FUSE_BUF_FD_SEEK | FUSE_BUF_FD_RETRY;
			b->fd = r->part[i].fd;
			b->pos = (off_t)r->part[i].foff;
		}
	}
	v->count = r->n;
	fuse_reply_data(req, v, r->files == r->n ? 0 : FUSE_BUF_NO_SPLICE);
	if ((void *)v != (void *)room)
		free(v);
}

static void op_read(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off, struct fuse_file_info *fi)
{
	struct tfs_fs *fs = fs_of(req);
	const struct tfs_handle *h = (const struct tfs_handle *)(uintptr_t)fi->fh;
	struct tfs_reply r;
	if (!h) {
		fuse_reply_err(req, EBADF);
		return;
	}
	if (off < 0) {
		fuse_reply_buf(req, NULL, 0);
		return;
	}
	if (h->stream && (uint64_t)off < h->size && size)
		tfs_behind_read(fs->behind, h->stream, ino, (uint64_t)off,
				h->size - (uint64_t)off < size ? (size_t)(h->size - (uint64_t)off) : size);
	tfs_err e = tfs_fs_read(&fs->core, h, (uint64_t)off, size, &r);
	if (e)
		fuse_reply_err(req, tfs_errno(e));
	else if (!r.n)
		fuse_reply_buf(req, NULL, 0);
	else
		reply_parts(req, &r);
	tfs_fs_read_done(&r);
}

static void op_statfs(fuse_req_t req, fuse_ino_t ino)
{
	struct statvfs sv;
	(void)ino;
	tfs_fs_statfs(&fs_of(req)->core, &sv);
	fuse_reply_statfs(req, &sv);
}

/* Replies to getxattr and listxattr: size 0 asks the length only. */
static void reply_xattr(fuse_req_t req, size_t size, tfs_err e, const char *buf, size_t len)
{
	if (e)
		fuse_reply_err(req, tfs_errno(e));
	else if (!size)
		fuse_reply_xattr(req, len);
	else
		fuse_reply_buf(req, buf, len);
}

static void op_getxattr(fuse_req_t req, fuse_ino_t ino, const char *name, size_t size)
{
	struct tfs_fs *fs = fs_of(req);
	size_t cap = size < TFS_XATTR_MAX ? size : TFS_XATTR_MAX, len = 0;
	char *buf = cap ? malloc(cap) : NULL;
	if (cap && !buf) {
		fuse_reply_err(req, ENOMEM);
		return;
	}
	tfs_err e = tfs_fs_getxattr(&fs->core, ino, name, buf, cap, &len);
	reply_xattr(req, size, e, buf, len);
	free(buf);
}

static void op_listxattr(fuse_req_t req, fuse_ino_t ino, size_t size)
{
	struct tfs_fs *fs = fs_of(req);
	char buf[512];
	size_t len = 0;
	size_t cap = size < sizeof buf ? size : sizeof buf;
	tfs_err e = tfs_fs_listxattr(&fs->core, ino, buf, cap, &len);
	reply_xattr(req, size, e, buf, len);
}

/* Nothing writes: the mount is read-only (-o ro, always), so the kernel
 * answers every write with EROFS before asking. */
const struct fuse_lowlevel_ops tfs_fuse_ops = {
	.init = op_init,
	.lookup = op_lookup,
	.getattr = op_getattr,
	.opendir = op_opendir,
	.readdir = op_readdir,
	.readdirplus = op_readdirplus,
	.open = op_open,
	.read = op_read,
	.release = op_release,
	.getxattr = op_getxattr,
	.listxattr = op_listxattr,
	.statfs = op_statfs,
};
