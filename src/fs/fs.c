/* The file-system core (fs/fs.h). */
#include "fs/fs.h"

#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/names.h"

/* The node of ino: the tree's, or a generated directory's entry's, made
 * into *tmp. */
static const struct tfs_node *node_of(const struct tfs_fs_core *c, uint64_t ino, struct tfs_node *tmp)
{
	return tfs_tree_node(c->tree, ino, tmp);
}

static int generated(const struct tfs_view_ops *v)
{
	return v && (v->flags & TFS_VIEWF_GENERATED);
}

/* ---- names and attributes ---- */

static void fill_stat(const struct tfs_fs_core *c, uint64_t ino, const struct tfs_node *n, struct stat *st)
{
	/* A tensor carries its shard's times; the rest, the source's. */
	const struct tfs_identity *id =
		n->kind == TFS_NODE_TENSOR ? &c->m->shards[n->shard].src->id : &c->m->id;
	memset(st, 0, sizeof *st);
	st->st_ino = (ino_t)ino;
	st->st_uid = c->uid;
	st->st_gid = c->gid;
	st->st_mtim.tv_sec = id->mtime_sec;
	st->st_mtim.tv_nsec = id->mtime_nsec;
	st->st_atim = st->st_mtim;
	st->st_ctim.tv_sec = id->ctime_sec;
	st->st_ctim.tv_nsec = id->ctime_nsec;
	/* cp and other tools size their buffers by this (coreutils: at least
	 * 128 KiB): for a generated file, which is made to be copied, 1 MiB
	 * reads cost a quarter of the system calls and FUSE requests of
	 * 128 KiB ones. */
	st->st_blksize = generated(tfs_view_of_kind(n->kind)) ? 1 << 20 : 4096;
	if (n->kind == TFS_NODE_DIR) {
		st->st_mode = S_IFDIR | 0555;
		/* ref: number of subdirectories (a generated one's are files) */
		st->st_nlink = 2 + (n->gen ? 0 : n->ref);
	} else {
		uint64_t size = tfs_node_size(c->tree, n);
		st->st_mode = S_IFREG | 0444;
		st->st_nlink = 1;
		st->st_size = (off_t)size;
		st->st_blocks = (blkcnt_t)((size + 511) / 512);
	}
}

tfs_err tfs_fs_attr(const struct tfs_fs_core *c, uint64_t ino, struct stat *st)
{
	struct tfs_node tmp;
	const struct tfs_node *n = node_of(c, ino, &tmp);
	if (!n)
		return TFS_ERR_NOFILE;
	fill_stat(c, ino, n, st);
	return TFS_OK;
}

tfs_err tfs_fs_lookup(const struct tfs_fs_core *c, uint64_t parent, const char *name, uint64_t *ino,
		      struct stat *st)
{
	struct tfs_node tmp;
	const struct tfs_node *p = node_of(c, parent, &tmp);
	if (!p || p->kind != TFS_NODE_DIR)
		return TFS_ERR_NOTDIR;
	size_t len = strlen(name);
	/* The kernel passes FUSE names of up to 1024 bytes; none of ours is
	 * over NAME_MAX, and saying so beats a plain ENOENT. */
	if (len > TFS_NAME_MAX)
		return TFS_ERR_NAMETOOLONG;
	/* (a directory is always a node: parent < 2^32) */
	uint64_t ni = tfs_tree_find(c->tree, (uint32_t)parent, name, len);
	const struct tfs_node *n = ni ? node_of(c, ni, &tmp) : NULL;
	if (!n)
		return TFS_ERR_NOFILE;
	*ino = ni;
	fill_stat(c, ni, n, st);
	return TFS_OK;
}

tfs_err tfs_fs_opendir(const struct tfs_fs_core *c, uint64_t ino)
{
	struct tfs_node tmp;
	const struct tfs_node *n = node_of(c, ino, &tmp);
	return !n ? TFS_ERR_NOFILE : n->kind != TFS_NODE_DIR ? TFS_ERR_NOTDIR : TFS_OK;
}

int tfs_fs_dirent(const struct tfs_fs_core *c, uint64_t ino, uint64_t at, char *buf, const char **name,
		  uint64_t *cino, mode_t *type)
{
	struct tfs_node tmp;
	const struct tfs_node *dir = node_of(c, ino, &tmp);
	if (!dir || dir->kind != TFS_NODE_DIR)
		return 0;
	if (at == 0) {
		*name = ".";
		*cino = ino;
	} else if (at == 1) {
		*name = "..";
		*cino = dir->parent;
	} else if (!tfs_tree_entry(c->tree, (uint32_t)ino, at - 2, buf, name, cino)) {
		return 0;
	}
	/* (a generated directory's entries are files) */
	*type = *cino < c->tree->nnodes && c->tree->nodes[*cino].kind == TFS_NODE_DIR ? S_IFDIR : S_IFREG;
	return 1;
}

void tfs_fs_statfs(const struct tfs_fs_core *c, struct statvfs *sv)
{
	memset(sv, 0, sizeof *sv);
	sv->f_bsize = 4096;
	sv->f_frsize = 4096;
	sv->f_blocks = (fsblkcnt_t)((c->tree->total_bytes + 4095) / 4096);
	sv->f_files = c->tree->nnodes - 1 + c->tree->generated;
	sv->f_namemax = 255;
	sv->f_flag = ST_RDONLY | ST_NOSUID | ST_NODEV;
}

/* ---- opening ---- */

/* Validation holds only for the bytes that were validated: a shard
 * rewritten in place (same file, new size or mtime) is no longer the
 * checkpoint that was mounted. A shard replaced by rename is not seen here:
 * the held descriptor still reads the old file, which is what was mounted. */
static int shard_changed(const struct tfs_fs_core *c, uint32_t shard)
{
	return tfs_source_changed(c->m->shards[shard].src);
}

/* A generated file reads from every shard it holds: any of them changed
 * and it is no longer the file it was. Its pages are never kept (direct
 * I/O, or dropped behind its reader). */
static tfs_err open_generated(const struct tfs_fs_core *c, struct tfs_handle *h)
{
	for (uint32_t s = 0; s < c->m->nshards; s++) {
		if (shard_changed(c, s))
			return TFS_ERR_IO;
		tfs_source_keep(c->m->shards[s].src);
	}
	/* Direct I/O where the kernel still lets it be mapped shared
	 * (fuse/kinit.h): a sequential reader then pays no page-cache page
	 * per 4 KiB, and nothing needs dropping behind it. */
	if (!c->keep_pages && c->dio_mmap && c->dio_mmap())
		h->direct_io = true;
	else
		h->drop_behind = !h->direct_io;
	return TFS_OK;
}

tfs_err tfs_fs_open(const struct tfs_fs_core *c, uint64_t ino, int flags, struct tfs_handle **out)
{
	struct tfs_node tmp;
	const struct tfs_node *n = node_of(c, ino, &tmp);
	if (!n)
		return TFS_ERR_NOFILE;
	if (n->kind == TFS_NODE_DIR)
		return TFS_ERR_ISDIR;
	if ((flags & O_ACCMODE) != O_RDONLY || (flags & O_TRUNC))
		return TFS_ERR_ROFS;
	if (n->kind == TFS_NODE_TENSOR && shard_changed(c, n->shard))
		return TFS_ERR_IO;
	const struct tfs_view_ops *v = tfs_view_of_kind(n->kind);
	if (!v)
		return TFS_ERR_IO;
	struct tfs_handle *h = calloc(1, sizeof *h);
	if (!h)
		return TFS_ERR_NOMEM;
	h->ino = ino;
	/* A generated entry's node lives as long as its handle. */
	h->node = *n;
	h->n = n == &tmp ? &h->node : n;
	h->v = v;
	h->direct_io = c->direct_io;
	h->keep_cache = true;
	/* With direct I/O no page cache keeps what a reader read: a second
	 * read comes back, and the source's own cache is all there is. */
	if (h->direct_io && n->kind == TFS_NODE_TENSOR)
		tfs_source_keep(c->m->shards[n->shard].src);
	else if (h->direct_io && !generated(v))
		/* A view's file served from the tensors' bytes (a Zarr chunk):
		 * as for a tensor's, though which shard is the view's to know. */
		for (uint32_t s = 0; s < c->m->nshards; s++)
			tfs_source_keep(c->m->shards[s].src);
	tfs_err e = generated(v) ? open_generated(c, h) : TFS_OK;
	if (!e && v->open)
		e = v->open(c->tree, n);
	if (e) {
		free(h);
		return e;
	}
	/* Known once the view has opened it (a picture is made then). */
	h->size = v->size(c->tree, n);
	*out = h;
	return TFS_OK;
}

void tfs_fs_release(const struct tfs_fs_core *c, struct tfs_handle *h)
{
	if (!h)
		return;
	if (h->v->release)
		h->v->release(c->tree, h->n);
	free(h);
}

/* ---- reading ---- */

/* Read buffers per worker thread (one for the reply, one for stored bytes
 * being decoded), grown to the largest request seen and freed when the
 * thread ends: no allocation per read. */
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

/* The views' scratch: the thread's second buffer. */
static char *scratch_grow(size_t need)
{
	return thread_buf(1, need);
}

/* The most pieces a view gives for one read; a read over more (a generated
 * file over many small tensors) is copied together past that. */
#define PIECES_MAX 64
_Static_assert(TFS_REPLY_MAX >= PIECES_MAX + 8, "a reply holds every piece and a mapped range's parts");

/* One piece that is a range of a source: where the source holds it (its
 * own mapping: the remote cache's blocks, in memory or in their files),
 * or read into the reply buffer. */
static tfs_err add_source_piece(struct tfs_reply *r, struct tfs_pieces *p, const struct tfs_piece *x)
{
	unsigned room = TFS_REPLY_MAX - r->n;
	if (x->src->ops->map && room > 8) {
		void *tk = NULL;
		unsigned got = 0;
		tfs_err e =
			x->src->ops->map(x->src, x->off, x->len, x->limit, r->part + r->n, room, &got, &tk);
		if (e == TFS_OK) {
			r->msrc[r->nmapped] = x->src;
			r->token[r->nmapped++] = tk;
			for (unsigned k = 0; k < got; k++)
				r->files += r->part[r->n + k].p == NULL;
			r->n += got;
			return TFS_OK;
		}
		x->src->ops->unmap(x->src, tk);
		if (e != TFS_ERR_UNHANDLED)
			return e;
		/* not this way: read below */
	}
	char *to = tfs_pieces_room(p, x->len);
	if (!to)
		return TFS_ERR_NOMEM;
	tfs_err e = tfs_source_serve(x->src, to, x->len, x->off, x->limit);
	r->part[r->n++] = (struct tfs_iov){.p = to, .len = x->len, .fd = -1};
	return e;
}

/* One piece of a local file, large enough: spliced from its descriptor. A
 * short splice would reach the reader as an early end of file, and a file
 * rewritten in place would give its new bytes: check first that the
 * source is still the one mounted (a change between this fstat and the
 * kernel's splice is not seen). 0 when the read is not one to splice. */
static int spliced(const struct tfs_fs_core *c, const struct tfs_pieces *p, struct tfs_reply *r, tfs_err *e)
{
	const struct tfs_piece *x = &p->v[0];
	if (p->n != 1 || x->mem || !c->splice || x->src->fd < 0 || x->len < TFS_SPLICE_MIN)
		return 0;
	*e = tfs_source_changed(x->src) ? TFS_ERR_IO : TFS_OK;
	r->part[0] = (struct tfs_iov){.p = NULL, .len = x->len, .fd = x->src->fd, .foff = x->off};
	r->n = r->files = 1;
	return 1;
}

tfs_err tfs_fs_read(const struct tfs_fs_core *c, const struct tfs_handle *h, uint64_t off, size_t size,
		    struct tfs_reply *r)
{
	r->n = r->files = r->nmapped = 0;
	if (off >= h->size || size == 0)
		return TFS_OK;
	uint64_t avail = h->size - off;
	size_t len = avail < size ? (size_t)avail : size;
	static _Thread_local struct tfs_piece pv[PIECES_MAX];
	struct tfs_pieces p = {
		.v = pv, .max = PIECES_MAX, .out = thread_buf(0, len), .cap = len, .grow = scratch_grow};
	if (!p.out)
		return TFS_ERR_NOMEM;
	tfs_err e = h->v->pieces(c->tree, h->n, off, len, &p);
	if (e || spliced(c, &p, r, &e))
		return e;
	for (unsigned i = 0; !e && i < p.n; i++) {
		const struct tfs_piece *x = &p.v[i];
		if (x->mem)
			r->part[r->n++] = (struct tfs_iov){.p = (void *)x->mem, .len = x->len, .fd = -1};
		else
			e = add_source_piece(r, &p, x);
	}
	return e;
}

void tfs_fs_read_done(struct tfs_reply *r)
{
	for (unsigned i = 0; i < r->nmapped; i++)
		r->msrc[i]->ops->unmap(r->msrc[i], r->token[i]);
	r->nmapped = 0;
}

size_t tfs_reply_len(const struct tfs_reply *r)
{
	size_t len = 0;
	for (unsigned i = 0; i < r->n; i++)
		len += r->part[i].len;
	return len;
}

/* ---- extended attributes ---- */

/* Attributes of the root: what the sources did so far (requests, bytes,
 * cache), and the warm-up's progress (bytes cached and of all). */
static tfs_err root_xattr(const struct tfs_fs_core *c, const char *name, char *v, size_t cap, size_t *len)
{
	uint64_t done, total;
	if (strcmp(name, "user.counters") == 0) {
		struct tfs_counters cn;
		tfs_sources_counters(c->m->sources, &cn);
		int k = tfs_counters_line(&cn, v, cap);
		*len = k < 0 ? 0 : (size_t)k < cap ? (size_t)k : cap - 1;
		return TFS_OK;
	}
	if (strcmp(name, "user.pid") == 0) {
		/* The daemon's PID, for tensorfs --list (kill -USR1, SIGTERM);
		 * asked for by name, never listed. */
		*len = (size_t)snprintf(v, cap, "%ld", (long)getpid());
		return TFS_OK;
	}
	if (strcmp(name, "user.warm") == 0) {
		if (!tfs_sources_warm(c->m->sources, &done, &total))
			return TFS_ERR_NODATA;
		*len = (size_t)snprintf(v, cap, "%llu %llu", (unsigned long long)done,
					(unsigned long long)total);
		return TFS_OK;
	}
	return TFS_ERR_UNHANDLED;
}

/* The getxattr size protocol over a value's length. */
static tfs_err sized(size_t len, size_t cap)
{
	return len > TFS_XATTR_MAX ? TFS_ERR_TOOBIG : cap && cap < len ? TFS_ERR_RANGE : TFS_OK;
}

tfs_err tfs_fs_getxattr(const struct tfs_fs_core *c, uint64_t ino, const char *name, char *buf, size_t cap,
			size_t *len)
{
	struct tfs_node tmp;
	const struct tfs_node *n = node_of(c, ino, &tmp);
	if (!n)
		return TFS_ERR_NOFILE;
	/* Only user.* exists here. EOPNOTSUPP for the other namespaces lets
	 * ls -l stop asking for security.selinux and POSIX ACLs after the
	 * first file (coreutils remembers it per device), which saves two
	 * round trips per file; the kernel disables getxattr only on ENOSYS. */
	if (strncmp(name, "user.", 5) != 0)
		return TFS_ERR_NOTSUP;
	if (ino == TFS_TREE_ROOT) {
		char v[768];
		tfs_err e = root_xattr(c, name, v, sizeof v, len);
		if (e != TFS_ERR_UNHANDLED) {
			if (!e && !(e = sized(*len, cap)) && cap)
				memcpy(buf, v, *len);
			return e;
		}
	}
	const struct tfs_view_ops *v = tfs_view_of_kind(n->kind);
	if (!v || !v->xattr_get)
		return TFS_ERR_NODATA;
	/* The length first: only a value asked for is worked out. */
	tfs_err e = v->xattr_get(c->tree, n, name, NULL, 0, len);
	if (e || (e = sized(*len, cap)) || !cap)
		return e;
	e = v->xattr_get(c->tree, n, name, buf, cap, len);
	return e == TFS_ERR_TOOBIG ? TFS_ERR_RANGE : e;
}

tfs_err tfs_fs_listxattr(const struct tfs_fs_core *c, uint64_t ino, char *buf, size_t cap, size_t *len)
{
	struct tfs_node tmp;
	const struct tfs_node *n = node_of(c, ino, &tmp);
	char list[512];
	size_t l = 0;
	if (!n)
		return TFS_ERR_NOFILE;
	if (ino == TFS_TREE_ROOT) {
		uint64_t done, total;
		struct tfs_counters cn;
		/* Listed where there is something to count (a remote source);
		 * a local mount's root keeps no attribute. */
		if ((tfs_sources_counters(c->m->sources, &cn), cn.requests > 0)) {
			memcpy(list, "user.counters", 14);
			l = 14;
		}
		if (tfs_sources_warm(c->m->sources, &done, &total)) {
			memcpy(list + l, "user.warm", 10);
			l += 10;
		}
	}
	const struct tfs_view_ops *v = tfs_view_of_kind(n->kind);
	if (v && v->xattr_list)
		l += v->xattr_list(c->tree, n, list + l, sizeof list - l);
	*len = l;
	tfs_err e = sized(l, cap);
	if (!e && cap)
		memcpy(buf, list, l);
	return e;
}
