/* The ceiling of any FUSE filesystem on this machine, for make bench: a
 * minimal low-level server with the same libfuse, mount options and loop as
 * tensorfs, whose files read as zeros straight from memory. What tensorfs
 * loses against it is its own work; what both lose against the source file
 * is the FUSE round trip.
 *
 * usage: nullfs [-s] [-o opts] MOUNTPOINT NAME=SIZE...   (stays in the
 * foreground; SIGTERM unmounts) */
#define FUSE_USE_VERSION 312
#include <fuse_lowlevel.h>

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

struct file {
	const char *name;
	unsigned long long size;
};

static struct file *files;
static unsigned nfiles;
static char zeros[1 << 20];
static const double forever = 86400.0 * 365;

/* Inode 1 is the root; file i is inode i + 2. */
static int fill(fuse_ino_t ino, struct stat *st)
{
	memset(st, 0, sizeof *st);
	st->st_ino = ino;
	if (ino == 1) {
		st->st_mode = S_IFDIR | 0555;
		st->st_nlink = 2;
		return 0;
	}
	if (ino < 2 || ino - 2 >= nfiles)
		return -1;
	st->st_mode = S_IFREG | 0444;
	st->st_nlink = 1;
	st->st_size = (off_t)files[ino - 2].size;
	return 0;
}

static void nf_init(void *ud, struct fuse_conn_info *conn)
{
	(void)ud;
	if (conn->capable & FUSE_CAP_READDIRPLUS)
		conn->want |= FUSE_CAP_READDIRPLUS;
	if (conn->max_write > (512u << 10))
		conn->max_write = 512u << 10;
	conn->want &= ~(unsigned)FUSE_CAP_AUTO_INVAL_DATA;
}

static void nf_lookup(fuse_req_t req, fuse_ino_t parent, const char *name)
{
	struct fuse_entry_param e;
	memset(&e, 0, sizeof e);
	e.attr_timeout = e.entry_timeout = forever;
	for (unsigned i = 0; parent == 1 && i < nfiles; i++) {
		if (strcmp(files[i].name, name) == 0) {
			e.ino = i + 2;
			fill(e.ino, &e.attr);
			break;
		}
	}
	fuse_reply_entry(req, &e);
}

static void nf_getattr(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	struct stat st;
	(void)fi;
	if (fill(ino, &st))
		fuse_reply_err(req, ENOENT);
	else
		fuse_reply_attr(req, &st, forever);
}

static void nf_readdir(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off, struct fuse_file_info *fi)
{
	char buf[4096];
	size_t used = 0;
	(void)fi;
	if (ino != 1) {
		fuse_reply_err(req, ENOTDIR);
		return;
	}
	if (size > sizeof buf)
		size = sizeof buf;
	for (unsigned i = (unsigned)off; i < nfiles; i++) {
		struct stat st;
		fill(i + 2, &st);
		size_t n = fuse_add_direntry(req, buf + used, size - used, files[i].name, &st, i + 1);
		if (n > size - used)
			break;
		used += n;
	}
	fuse_reply_buf(req, buf, used);
}

static void nf_open(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	(void)ino;
	fi->keep_cache = 1;
	fuse_reply_open(req, fi);
}

static void nf_read(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off, struct fuse_file_info *fi)
{
	(void)fi;
	unsigned long long fsize = ino >= 2 && ino - 2 < nfiles ? files[ino - 2].size : 0;
	if ((unsigned long long)off >= fsize) {
		fuse_reply_buf(req, NULL, 0);
		return;
	}
	unsigned long long left = fsize - (unsigned long long)off;
	size_t n = left < size ? (size_t)left : size;
	fuse_reply_buf(req, zeros, n < sizeof zeros ? n : sizeof zeros);
}

static const struct fuse_lowlevel_ops ops = {
	.init = nf_init,
	.lookup = nf_lookup,
	.getattr = nf_getattr,
	.readdir = nf_readdir,
	.open = nf_open,
	.read = nf_read,
};

int main(int argc, char **argv)
{
	struct fuse_args args = FUSE_ARGS_INIT(0, NULL);
	struct fuse_cmdline_opts fo;
	const char *mnt = NULL;
	files = calloc((size_t)argc, sizeof *files);
	fuse_opt_add_arg(&args, argv[0]);
	for (int i = 1; i < argc; i++) {
		char *eq = strchr(argv[i], '=');
		if (argv[i][0] == '-') {
			fuse_opt_add_arg(&args, argv[i]);
			if (strcmp(argv[i], "-o") == 0 && i + 1 < argc)
				fuse_opt_add_arg(&args, argv[++i]);
		} else if (!mnt) {
			mnt = argv[i];
		} else if (eq) {
			*eq = 0;
			files[nfiles].name = argv[i];
			files[nfiles++].size = strtoull(eq + 1, NULL, 10);
		}
	}
	if (!mnt || !files) {
		fprintf(stderr, "usage: nullfs [-s] [-o opts] MOUNTPOINT NAME=SIZE...\n");
		return 2;
	}
	fuse_opt_add_arg(&args, "-oro,default_permissions,subtype=nullfs,fsname=nullfs");
	if (fuse_parse_cmdline(&args, &fo) != 0)
		return 2;
	struct fuse_session *se = fuse_session_new(&args, &ops, sizeof ops, NULL);
	if (!se || fuse_set_signal_handlers(se) || fuse_session_mount(se, mnt))
		return 5;
	int r;
	if (fo.singlethread) {
		r = fuse_session_loop(se);
	} else {
		struct fuse_loop_config *lc = fuse_loop_cfg_create();
		fuse_loop_cfg_set_clone_fd(lc, fo.clone_fd);
		fuse_loop_cfg_set_max_threads(lc, fo.max_threads);
		if (fo.max_idle_threads != UINT_MAX)
			fuse_loop_cfg_set_idle_threads(lc, fo.max_idle_threads);
		r = fuse_session_loop_mt(se, lc);
		fuse_loop_cfg_destroy(lc);
	}
	fuse_session_unmount(se);
	fuse_remove_signal_handlers(se);
	fuse_session_destroy(se);
	fuse_opt_free_args(&args);
	free(fo.mountpoint);
	free(files);
	return r < 0 ? 1 : 0;
}
