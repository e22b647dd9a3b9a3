/* The file-system core: what a mount answers, with no FUSE in it. The
 * FUSE glue (fuse/) turns each request into one call here and each answer
 * into one reply (errno comes from tfs_err there, nowhere else); the unit
 * tests call it with no mount at all (tests/unit/test_fs.c).
 *
 * Everything here asks the tree (views/tree.h) and the node's view
 * (views/view.h): the core knows no view by name. What a read needs is
 * decided once, at open (struct tfs_handle): the view, the size, direct
 * I/O and whether pages are kept, whether the pages behind a reader are to
 * be dropped. A read gives a list of pieces (struct tfs_reply): memory, a
 * file range to splice, and mapped cache ranges released after the reply
 * is written (tfs_fs_read_done). */
#ifndef TFS_FS_H
#define TFS_FS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/types.h>

#include "core/err.h"
#include "core/source.h"
#include "model/model.h"
#include "views/tree.h"
#include "views/view.h"

/* The largest read request. With splice, a reply must fit the pipe's 256
 * page slots (1 MiB pipes) even when the tensor starts mid-page: 1 MiB
 * requests measured ten times slower than 512 KiB ones, which libfuse then
 * copies instead of splicing. */
#define TFS_MAX_REQUEST (512u << 10)
/* Smaller reads are copied, not spliced. Splice costs an fstat and two
 * pipe hops per request; for small reads one copy through a buffer is
 * cheaper: make bench measured 4 KiB random reads at 0.85-0.87 of a null
 * FUSE server with splice and 0.87-0.90 with a copy (three runs each). */
#define TFS_SPLICE_MIN (64u << 10)
/* Linux refuses xattr values over 64 KiB (linux/limits.h XATTR_SIZE_MAX). */
#define TFS_XATTR_MAX 65536

struct tfs_fs_core {
	const struct tfs_model *m;
	const struct tfs_tree *tree;
	uid_t uid;
	gid_t gid;
	bool direct_io; /* -o direct_io: every file */
	/* Generated files through the page cache even where direct I/O could
	 * keep shared mmap (a view's keep_pages: -o export_cache). */
	bool keep_pages;
	/* Whether the kernel lets a direct-I/O file be mapped shared (Linux
	 * 6.6; known after INIT, fuse/kinit.h); NULL: never. */
	bool (*dio_mmap)(void);
	/* Whether the replies may splice file ranges (set at INIT). */
	bool splice;
};

/* What an open file reads with, decided at open. */
struct tfs_handle {
	uint64_t ino;
	const struct tfs_node *n; /* the tree's, or `node` */
	struct tfs_node node;     /* a generated directory's entry's */
	const struct tfs_view_ops *v;
	uint64_t size;
	bool direct_io;  /* no page cache for this file */
	bool keep_cache; /* pages the kernel has stay valid */
	/* A generated file read through the page cache: the glue drops the
	 * pages behind a sequential reader (fuse/behind.h) in `stream`. */
	bool drop_behind;
	void *stream;
	/* The glue's list of open files: the kernel may end the mount with
	 * files whose release never comes, freed with it. */
	struct tfs_handle *prev, *next;
};

/* ---- names and attributes ---- */

/* st of inode ino; TFS_ERR_NOFILE when there is none. */
tfs_err tfs_fs_attr(const struct tfs_fs_core *c, uint64_t ino, struct stat *st);
/* The inode of `name` in directory `parent`, and its attributes;
 * TFS_ERR_NOFILE when it has no such entry (for ever: the tree never
 * changes), TFS_ERR_NOTDIR, TFS_ERR_NAMETOOLONG. */
tfs_err tfs_fs_lookup(const struct tfs_fs_core *c, uint64_t parent, const char *name, uint64_t *ino,
		      struct stat *st);
/* Whether ino can be listed: TFS_ERR_NOFILE, TFS_ERR_NOTDIR or TFS_OK. */
tfs_err tfs_fs_opendir(const struct tfs_fs_core *c, uint64_t ino);
/* Entry `at` of directory ino (0 is ".", 1 "..", 2 + i child i: offsets
 * that stay valid for the life of the mount): its name (*name: the
 * tree's, or a generated one made into buf, of TFS_NAME_MAX + 1 bytes),
 * inode and type (S_IFDIR or S_IFREG: what a plain listing needs, nothing
 * else worked out); 0 past the last. */
int tfs_fs_dirent(const struct tfs_fs_core *c, uint64_t ino, uint64_t at, char *buf, const char **name,
		  uint64_t *cino, mode_t *type);
void tfs_fs_statfs(const struct tfs_fs_core *c, struct statvfs *sv);

/* ---- reading ---- */

/* Opens ino with open(2) flags: TFS_ERR_ROFS for a write, TFS_ERR_ISDIR,
 * TFS_ERR_IO when a source changed since the mount, the view's refusal;
 * else *h (freed by tfs_fs_release; the view's release is called then). */
tfs_err tfs_fs_open(const struct tfs_fs_core *c, uint64_t ino, int flags, struct tfs_handle **h);
void tfs_fs_release(const struct tfs_fs_core *c, struct tfs_handle *h);

/* The pieces of a reply: memory, or a file range (p NULL: fd at foff). */
#define TFS_REPLY_MAX 72
struct tfs_reply {
	struct tfs_iov part[TFS_REPLY_MAX];
	unsigned n;
	unsigned files; /* how many parts are file ranges */
	/* Cache ranges mapped for the parts, released by tfs_fs_read_done. */
	struct tfs_source *msrc[TFS_REPLY_MAX];
	void *token[TFS_REPLY_MAX];
	unsigned nmapped;
};

/* The bytes [off, off + size) of an open file, clipped to its size (none
 * at or past its end), as parts to write out in order. After writing them
 * (or failing to), tfs_fs_read_done. The memory parts live in the calling
 * thread's buffers until its next read. */
tfs_err tfs_fs_read(const struct tfs_fs_core *c, const struct tfs_handle *h, uint64_t off, size_t size,
		    struct tfs_reply *r);
void tfs_fs_read_done(struct tfs_reply *r);
/* The reply's bytes in total. */
size_t tfs_reply_len(const struct tfs_reply *r);

/* ---- extended attributes ---- */

/* The value of attribute `name` of ino into buf (cap bytes; cap 0 asks
 * only its length) and its length: TFS_ERR_NOTSUP outside user.*,
 * TFS_ERR_NODATA, TFS_ERR_RANGE when cap is too small, TFS_ERR_TOOBIG
 * when no caller could take it. */
tfs_err tfs_fs_getxattr(const struct tfs_fs_core *c, uint64_t ino, const char *name, char *buf, size_t cap,
			size_t *len);
/* The names of ino's attributes, each NUL-terminated, as getxattr takes
 * cap and gives len. */
tfs_err tfs_fs_listxattr(const struct tfs_fs_core *c, uint64_t ino, char *buf, size_t cap, size_t *len);

#endif
