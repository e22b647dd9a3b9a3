#include "fuse/fuse.h"
#include "fuse/fuse_i.h"
#include "core/names.h"
#include "views/view.h"
#include "fuse/behind.h"
#include "fuse/kinit.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <stdio.h>
#include <sys/uio.h>

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
	}
	return EIO;
}

static void fill_stat(const struct tfs_fs *fs, fuse_ino_t ino, const struct tfs_node *n, struct stat *st)
{
	/* A tensor carries its shard's times; the rest, the source's. */
	const struct tfs_identity *id =
		n->kind == TFS_NODE_TENSOR ? &fs->m->shards[n->shard].src->id : &fs->m->id;
	memset(st, 0, sizeof *st);
	st->st_ino = ino;
	st->st_uid = fs->uid;
	st->st_gid = fs->gid;
	st->st_mtim.tv_sec = id->mtime_sec;
	st->st_mtim.tv_nsec = id->mtime_nsec;
	st->st_atim = st->st_mtim;
	st->st_ctim.tv_sec = id->ctime_sec;
	st->st_ctim.tv_nsec = id->ctime_nsec;
	/* cp and other tools size their buffers by this (coreutils: at least
	 * 128 KiB): for a generated file, which is made to be copied, 1 MiB
	 * reads cost a quarter of the system calls and FUSE requests of
	 * 128 KiB ones. */
	const struct tfs_view_ops *v = tfs_view_of_kind(n->kind);
	st->st_blksize = v && (v->flags & TFS_VIEWF_GENERATED) ? 1 << 20 : 4096;
	if (n->kind == TFS_NODE_DIR) {
		st->st_mode = S_IFDIR | 0555;
		st->st_nlink = 2 + n->ref; /* ref: number of subdirectories */
	} else {
		uint64_t size = tfs_node_size(fs->tree, n);
		st->st_mode = S_IFREG | 0444;
		st->st_nlink = 1;
		st->st_size = (off_t)size;
		st->st_blocks = (blkcnt_t)((size + 511) / 512);
	}
}

static void fill_entry(const struct tfs_fs *fs, fuse_ino_t ino, const struct tfs_node *n,
		       struct fuse_entry_param *e)
{
	memset(e, 0, sizeof *e);
	e->ino = ino;
	e->generation = 1;
	e->attr_timeout = fs->timeout;
	e->entry_timeout = fs->timeout;
	fill_stat(fs, ino, n, &e->attr);
}

/* A reply from the pieces a source mapped: memory is written from where
 * it is; file ranges (a disk cache's blocks) are spliced, as a local
 * tensor is, when every piece is one. */
static void reply_pieces(fuse_req_t req, const struct tfs_iov *piece, unsigned np, struct iovec *iov)
{
	int files = 0;
	for (unsigned i = 0; i < np; i++)
		files += piece[i].p == NULL;
	if (!files) {
		for (unsigned i = 0; i < np; i++) {
			iov[i].iov_base = piece[i].p;
			iov[i].iov_len = piece[i].len;
		}
		fuse_reply_iov(req, iov, (int)np);
		return;
	}
	/* A bufvec of np buffers: on the stack for a few, else allocated (a
	 * generated file's read over many small tensors in the disk cache). */
	enum { FEW = 8 };
	_Alignas(struct fuse_bufvec) char room[sizeof(struct fuse_bufvec) + FEW * sizeof(struct fuse_buf)];
	size_t need = sizeof(struct fuse_bufvec) + (np > FEW ? np : FEW) * sizeof(struct fuse_buf);
	struct fuse_bufvec *v = np > FEW ? calloc(1, need) : (struct fuse_bufvec *)(void *)room;
	if (!v) {
		fuse_reply_err(req, ENOMEM);
		return;
	}
	if (np <= FEW)
		memset(room, 0, sizeof room);
	for (unsigned i = 0; i < np; i++) {
		struct fuse_buf *b = &v->buf[i];
		b->size = piece[i].len;
		if (piece[i].p) {
			b->mem = piece[i].p;
		} else {
			b->flags = FUSE_BUF_IS_FD | FUSE_BUF_FD_SEEK | FUSE_BUF_FD_RETRY;
			b->fd = piece[i].fd;
			b->pos = (off_t)piece[i].foff;
		}
	}
	v->count = np;
	/* Memory in a spliced reply would be copied twice (into the pipe,
	 * then out of it); a mixed reply (at the edge of what is in memory)
	 * is copied once instead. */
	fuse_reply_data(req, v, files == (int)np ? 0 : FUSE_BUF_NO_SPLICE);
	if ((void *)v != (void *)room)
		free(v);
}

/* The largest read request. With splice, a reply must fit the pipe's 256
 * page slots (1 MiB pipes) even when the tensor starts mid-page: 1 MiB
 * requests measured ten times slower than 512 KiB ones, which libfuse then
 * copies instead of splicing. */
#define TFS_MAX_REQUEST (512u << 10)
/* Smaller reads are copied, not spliced. */
#define TFS_SPLICE_MIN (64u << 10)

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
	fs->splice = !fs->nosplice && (conn->capable & FUSE_CAP_SPLICE_WRITE);
	if (fs->splice)
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
	struct tfs_fs *fs = tfs_fs_of(req);
	const struct tfs_node *p = tfs_node_of(fs, parent);
	struct fuse_entry_param e;
	if (!p || p->kind != TFS_NODE_DIR) {
		fuse_reply_err(req, ENOTDIR);
		return;
	}
	size_t len = strlen(name);
	/* The kernel passes FUSE names of up to 1024 bytes; none of ours is
	 * over NAME_MAX, and saying so beats a plain ENOENT. */
	if (len > TFS_NAME_MAX) {
		fuse_reply_err(req, ENAMETOOLONG);
		return;
	}
	uint32_t ni = tfs_tree_lookup(fs->tree, (uint32_t)parent, name, len);
	if (!ni) {
		/* Cache the miss too: nothing can ever appear. */
		memset(&e, 0, sizeof e);
		e.entry_timeout = fs->timeout;
		fuse_reply_entry(req, &e);
		return;
	}
	fill_entry(fs, ni, &fs->tree->nodes[ni], &e);
	fuse_reply_entry(req, &e);
}

static void op_getattr(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	struct tfs_fs *fs = tfs_fs_of(req);
	const struct tfs_node *n = tfs_node_of(fs, ino);
	struct stat st;
	(void)fi;
	if (!n) {
		fuse_reply_err(req, ENOENT);
		return;
	}
	fill_stat(fs, ino, n, &st);
	fuse_reply_attr(req, &st, fs->timeout);
}

static void op_opendir(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	const struct tfs_node *n = tfs_node_of(tfs_fs_of(req), ino);
	if (!n) {
		fuse_reply_err(req, ENOENT);
		return;
	}
	if (n->kind != TFS_NODE_DIR) {
		fuse_reply_err(req, ENOTDIR);
		return;
	}
	fi->cache_readdir = 1;
	fi->keep_cache = 1;
	fuse_reply_open(req, fi);
}

/* Offsets: 1 is ".", 2 is "..", 3 + i is child i. They index the static
 * child array, so they stay valid for the life of the mount. */
static void do_readdir(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off, int plus)
{
	struct tfs_fs *fs = tfs_fs_of(req);
	const struct tfs_node *dir = tfs_node_of(fs, ino);
	if (!dir || dir->kind != TFS_NODE_DIR) {
		fuse_reply_err(req, dir ? ENOTDIR : ENOENT);
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
	uint64_t total = (uint64_t)dir->count + 2;
	for (uint64_t o = off < 0 ? 0 : (uint64_t)off; o < total; o++) {
		const char *name;
		fuse_ino_t cino;
		const struct tfs_node *cn;
		if (o == 0) {
			name = ".";
			cino = ino;
		} else if (o == 1) {
			name = "..";
			cino = dir->parent;
		} else {
			cino = fs->tree->children[dir->first + (o - 2)];
			name = fs->tree->nodes[cino].fname;
		}
		cn = &fs->tree->nodes[cino];
		size_t need;
		if (plus) {
			struct fuse_entry_param e;
			fill_entry(fs, cino, cn, &e);
			need = fuse_add_direntry_plus(req, buf + used, size - used, name, &e, (off_t)(o + 1));
		} else {
			struct stat st;
			memset(&st, 0, sizeof st);
			st.st_ino = cino;
			st.st_mode = cn->kind == TFS_NODE_DIR ? S_IFDIR : S_IFREG;
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

/* Validation holds only for the bytes that were validated: a shard
 * rewritten in place (same file, new size or mtime) is no longer the
 * checkpoint that was mounted. A shard replaced by rename is not seen here:
 * the held descriptor still reads the old file, which is what was mounted. */
static int shard_changed(struct tfs_fs *fs, uint32_t shard)
{
	return tfs_source_changed(fs->m->shards[shard].src);
}

static void op_open(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	struct tfs_fs *fs = tfs_fs_of(req);
	const struct tfs_node *n = tfs_node_of(fs, ino);
	if (!n) {
		fuse_reply_err(req, ENOENT);
		return;
	}
	if (n->kind == TFS_NODE_DIR) {
		fuse_reply_err(req, EISDIR);
		return;
	}
	if ((fi->flags & O_ACCMODE) != O_RDONLY || (fi->flags & O_TRUNC)) {
		fuse_reply_err(req, EROFS);
		return;
	}
	if (n->kind == TFS_NODE_TENSOR && shard_changed(fs, n->shard)) {
		fuse_reply_err(req, EIO);
		return;
	}
	bool dio = fs->direct_io;
	const struct tfs_view_ops *v = tfs_view_of_kind(n->kind);
	/* With direct I/O no page cache keeps what a reader read: a second
	 * read comes back, and the source's own cache is all there is. */
	if (dio && n->kind == TFS_NODE_TENSOR)
		tfs_source_keep(fs->m->shards[n->shard].src);
	else if (dio && v && !(v->flags & TFS_VIEWF_GENERATED))
		/* A view's file served from the tensors' bytes (a Zarr chunk):
		 * as for a tensor's, though which shard is the view's to know. */
		for (uint32_t s = 0; s < fs->m->nshards; s++)
			tfs_source_keep(fs->m->shards[s].src);
	if (v && (v->flags & TFS_VIEWF_GENERATED)) {
		/* A generated file reads from every shard it holds: any of
		 * them changed and it is no longer the file it was. Its pages
		 * are never kept (direct I/O, or dropped behind its reader). */
		for (uint32_t s = 0; s < fs->m->nshards; s++) {
			if (shard_changed(fs, s)) {
				fuse_reply_err(req, EIO);
				return;
			}
			tfs_source_keep(fs->m->shards[s].src);
		}
		tfs_err e = v->open ? v->open(fs->tree, n) : TFS_OK;
		if (e) {
			fuse_reply_err(req, tfs_errno(e));
			return;
		}
		/* Direct I/O where the kernel still lets it be mapped shared
		 * (fuse/kinit.h): a sequential reader then pays no page-cache
		 * page per 4 KiB, and nothing needs dropping behind it. */
		if (!fs->export_cache && tfs_kinit_dio_mmap())
			dio = true;
		else if (fs->behind && !(fi->fh = (uintptr_t)tfs_behind_open(fs->behind))) {
			fuse_reply_err(req, ENOMEM);
			return;
		}
	} else if (v && v->open) {
		tfs_err e = v->open(fs->tree, n);
		if (e) {
			fuse_reply_err(req, tfs_errno(e));
			return;
		}
	}
	fi->keep_cache = 1;
	fi->direct_io = dio;
	/* An open the kernel gave up on (interrupted) gets no release. */
	if (fuse_reply_open(req, fi) == -ENOENT) {
		tfs_behind_close(fs->behind, (struct tfs_stream *)(uintptr_t)fi->fh);
		if (v && v->release)
			v->release(fs->tree, n);
	}
}

/* Read buffers per FUSE worker thread (one for the reply, one for stored
 * bytes being decoded), grown to the largest request seen and freed when
 * the thread ends: no allocation per read. */
static pthread_key_t buf_key[2];
static pthread_once_t buf_once = PTHREAD_ONCE_INIT;

struct tbuf {
	size_t cap;
	char data[];
};

static void buf_key_make(void)
{
	pthread_key_create(&buf_key[0], free);
	pthread_key_create(&buf_key[1], free);
}

static char *thread_buf(int slot, size_t need)
{
	pthread_once(&buf_once, buf_key_make);
	struct tbuf *b = pthread_getspecific(buf_key[slot]);
	if (b && b->cap >= need)
		return b->data;
	size_t cap = need < (128u << 10) ? (128u << 10) : need;
	struct tbuf *nb = malloc(sizeof *nb + cap);
	if (!nb)
		return NULL;
	nb->cap = cap;
	free(b);
	pthread_setspecific(buf_key[slot], nb);
	return nb->data;
}

/* Replies with bytes [at, at + len) of a local source by splicing them from
 * its descriptor. Splice costs an fstat (below) and two pipe hops per
 * request; for small reads one copy through a buffer is cheaper: make
 * bench measured 4 KiB random reads at 0.85-0.87 of a null FUSE server
 * with splice and 0.87-0.90 with a copy (three runs of each). Returns 0
 * when the read is not one to splice. */
static int reply_spliced(fuse_req_t req, const struct tfs_fs *fs, struct tfs_source *src, uint64_t at,
			 size_t len)
{
	if (!fs->splice || src->fd < 0 || len < TFS_SPLICE_MIN)
		return 0;
	/* A short splice would reach the reader as an early end of file, and
	 * a file rewritten in place would give its new bytes: check first
	 * that the source is still the one mounted. (A change between this
	 * fstat and the kernel's splice is not seen.) */
	if (tfs_source_changed(src)) {
		fuse_reply_err(req, EIO);
		return 1;
	}
	struct fuse_bufvec bv = FUSE_BUFVEC_INIT(len);
	bv.buf[0].flags = FUSE_BUF_IS_FD | FUSE_BUF_FD_SEEK | FUSE_BUF_FD_RETRY;
	bv.buf[0].fd = src->fd;
	bv.buf[0].pos = (off_t)at;
	int r = fuse_reply_data(req, &bv, 0);
	(void)r; /* a failed reply means the request is gone already */
	return 1;
}

static void op_release(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	struct tfs_fs *fs = tfs_fs_of(req);
	const struct tfs_node *n = tfs_node_of(fs, ino);
	const struct tfs_view_ops *v = n ? tfs_view_of_kind(n->kind) : NULL;
	tfs_behind_close(fs->behind, (struct tfs_stream *)(uintptr_t)fi->fh);
	if (v && v->release)
		v->release(fs->tree, n);
	fuse_reply_err(req, 0);
}

/* The views' scratch: the thread's second buffer. */
static char *scratch_grow(size_t need)
{
	return thread_buf(1, need);
}

/* The most pieces one reply is written from; a read over more (a generated
 * file over many small tensors) is copied together past that. */
#define PIECES_MAX 64

/* Writes the read's pieces out: one piece of a local file is spliced;
 * otherwise each piece is memory, or where the source holds it (its own
 * mapping: the remote cache's blocks, in memory or in their files), or is
 * read into the reply buffer; then one writev (or a splice of the
 * files' pieces). */
static void reply_with(fuse_req_t req, const struct tfs_fs *fs, struct tfs_pieces *p)
{
	if (p->n == 1 && !p->v[0].mem && reply_spliced(req, fs, p->v[0].src, p->v[0].off, p->v[0].len))
		return;
	struct tfs_iov part[PIECES_MAX + 8];
	struct iovec iov[PIECES_MAX + 8];
	void *token[PIECES_MAX];
	char mapped[PIECES_MAX] = {0};
	unsigned np = 0;
	tfs_err e = TFS_OK;
	for (unsigned i = 0; !e && i < p->n; i++) {
		const struct tfs_piece *x = &p->v[i];
		if (x->mem) {
			part[np++] = (struct tfs_iov){.p = (void *)x->mem, .len = x->len};
			continue;
		}
		unsigned got = 0;
		unsigned room = PIECES_MAX + 8 - np;
		if (x->src->ops->map && room > 8) {
			void *tk = NULL;
			e = x->src->ops->map(x->src, x->off, x->len, x->limit, part + np, room, &got, &tk);
			if (e == TFS_OK) {
				token[i] = tk;
				mapped[i] = 1;
				np += got;
				continue;
			}
			x->src->ops->unmap(x->src, tk);
			if (e != TFS_ERR_UNHANDLED)
				break;
			e = TFS_OK; /* not this way: read below */
		}
		char *to = tfs_pieces_room(p, x->len);
		if (!to) {
			e = TFS_ERR_NOMEM;
			break;
		}
		e = tfs_source_serve(x->src, to, x->len, x->off, x->limit);
		part[np++] = (struct tfs_iov){.p = to, .len = x->len};
	}
	if (e)
		fuse_reply_err(req, tfs_errno(e));
	else
		reply_pieces(req, part, np, iov);
	for (unsigned i = 0; i < p->n; i++)
		if (mapped[i])
			p->v[i].src->ops->unmap(p->v[i].src, token[i]);
}

static void op_read(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off, struct fuse_file_info *fi)
{
	struct tfs_fs *fs = tfs_fs_of(req);
	const struct tfs_node *n = tfs_node_of(fs, ino);
	const struct tfs_view_ops *v = n ? tfs_view_of_kind(n->kind) : NULL;
	if (!v) {
		fuse_reply_err(req, n ? EISDIR : ENOENT);
		return;
	}
	uint64_t fsize = v->size(fs->tree, n);
	if (off < 0 || (uint64_t)off >= fsize || size == 0) {
		fuse_reply_buf(req, NULL, 0);
		return;
	}
	uint64_t avail = fsize - (uint64_t)off;
	size_t len = avail < size ? (size_t)avail : size;
	if (v->flags & TFS_VIEWF_GENERATED)
		tfs_behind_read(fs->behind, (struct tfs_stream *)(uintptr_t)fi->fh, ino, (uint64_t)off, len);
	static _Thread_local struct tfs_piece pv[PIECES_MAX];
	struct tfs_pieces p = {
		.v = pv, .max = PIECES_MAX, .out = thread_buf(0, len), .cap = len, .grow = scratch_grow};
	if (!p.out) {
		fuse_reply_err(req, ENOMEM);
		return;
	}
	tfs_err e = v->pieces(fs->tree, n, (uint64_t)off, len, &p);
	if (e)
		fuse_reply_err(req, tfs_errno(e));
	else
		reply_with(req, fs, &p);
}

static void op_statfs(fuse_req_t req, fuse_ino_t ino)
{
	struct tfs_fs *fs = tfs_fs_of(req);
	struct statvfs sv;
	(void)ino;
	memset(&sv, 0, sizeof sv);
	sv.f_bsize = 4096;
	sv.f_frsize = 4096;
	sv.f_blocks = (fsblkcnt_t)((fs->tree->total_bytes + 4095) / 4096);
	sv.f_files = fs->tree->nnodes - 1;
	sv.f_namemax = 255;
	sv.f_flag = ST_RDONLY | ST_NOSUID | ST_NODEV;
	fuse_reply_statfs(req, &sv);
}

/* ---- everything that would write ---- */

static void op_setattr(fuse_req_t req, fuse_ino_t ino, struct stat *attr, int to_set,
		       struct fuse_file_info *fi)
{
	(void)ino;
	(void)attr;
	(void)to_set;
	(void)fi;
	fuse_reply_err(req, EROFS);
}

static void op_mknod(fuse_req_t req, fuse_ino_t p, const char *name, mode_t mode, dev_t rdev)
{
	(void)p;
	(void)name;
	(void)mode;
	(void)rdev;
	fuse_reply_err(req, EROFS);
}

static void op_mkdir(fuse_req_t req, fuse_ino_t p, const char *name, mode_t mode)
{
	(void)p;
	(void)name;
	(void)mode;
	fuse_reply_err(req, EROFS);
}

static void op_unlink(fuse_req_t req, fuse_ino_t p, const char *name)
{
	(void)p;
	(void)name;
	fuse_reply_err(req, EROFS);
}

static void op_symlink(fuse_req_t req, const char *link, fuse_ino_t p, const char *name)
{
	(void)link;
	(void)p;
	(void)name;
	fuse_reply_err(req, EROFS);
}

static void op_rename(fuse_req_t req, fuse_ino_t p, const char *name, fuse_ino_t np, const char *nn,
		      unsigned int flags)
{
	(void)p;
	(void)name;
	(void)np;
	(void)nn;
	(void)flags;
	fuse_reply_err(req, EROFS);
}

static void op_link(fuse_req_t req, fuse_ino_t ino, fuse_ino_t np, const char *nn)
{
	(void)ino;
	(void)np;
	(void)nn;
	fuse_reply_err(req, EROFS);
}

static void op_write(fuse_req_t req, fuse_ino_t ino, const char *buf, size_t size, off_t off,
		     struct fuse_file_info *fi)
{
	(void)ino;
	(void)buf;
	(void)size;
	(void)off;
	(void)fi;
	fuse_reply_err(req, EROFS);
}

static void op_setxattr(fuse_req_t req, fuse_ino_t ino, const char *name, const char *value, size_t size,
			int flags)
{
	(void)ino;
	(void)name;
	(void)value;
	(void)size;
	(void)flags;
	fuse_reply_err(req, EROFS);
}

static void op_removexattr(fuse_req_t req, fuse_ino_t ino, const char *name)
{
	(void)ino;
	(void)name;
	fuse_reply_err(req, EROFS);
}

static void op_create(fuse_req_t req, fuse_ino_t p, const char *name, mode_t mode, struct fuse_file_info *fi)
{
	(void)p;
	(void)name;
	(void)mode;
	(void)fi;
	fuse_reply_err(req, EROFS);
}

static void op_fallocate(fuse_req_t req, fuse_ino_t ino, int mode, off_t off, off_t len,
			 struct fuse_file_info *fi)
{
	(void)ino;
	(void)mode;
	(void)off;
	(void)len;
	(void)fi;
	fuse_reply_err(req, EROFS);
}

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
	.getxattr = tfs_fuse_getxattr,
	.listxattr = tfs_fuse_listxattr,
	.statfs = op_statfs,
	.setattr = op_setattr,
	.mknod = op_mknod,
	.mkdir = op_mkdir,
	.unlink = op_unlink,
	.rmdir = op_unlink,
	.symlink = op_symlink,
	.rename = op_rename,
	.link = op_link,
	.write = op_write,
	.setxattr = op_setxattr,
	.removexattr = op_removexattr,
	.create = op_create,
	.fallocate = op_fallocate,
};
