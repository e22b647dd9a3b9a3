/* The command line: parse options, validate the whole source, mount, and
 * only then detach, so that every failure is reported in the foreground. */
#include <dirent.h>
#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <signal.h>
#include <fcntl.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <syslog.h>
#include <unistd.h>

#include "tfs_fuse.h"
#include "tfs_inspect.h"
#include "tfs_hash.h"

#ifndef TFS_VERSION
#define TFS_VERSION "0.1.0"
#endif

/* Exit codes, one per class of failure (README, "Exit codes"). */
enum {
	EXIT_OK = 0,
	EXIT_INTERNAL = 1, /* out of memory, unexpected library failure */
	EXIT_USAGE = 2,    /* bad arguments or options */
	EXIT_SOURCE = 3,   /* the source cannot be opened or read */
	EXIT_FORMAT = 4,   /* the source is not a valid safetensors file */
	EXIT_MOUNT = 5,    /* the mount point or FUSE itself failed */
};

struct cli {
	const char *source;
	const char *mountpoint;
	int nonopt;
	int strict;
	int direct_io;
	int nosplice;
	int overmount;
	int notsv;
	char *layout;
	char *format;
	char *convert;
	char *input;
	char *readahead;
	char *uid, *gid;
	int bad_extra;
	const char *extra;
};

#define CLI_OPT(t, p, v) { t, offsetof(struct cli, p), v }
static const struct fuse_opt cli_opts[] = {
	CLI_OPT("strict", strict, 1),
	CLI_OPT("direct_io", direct_io, 1),
	CLI_OPT("nosplice", nosplice, 1),
	CLI_OPT("overmount", overmount, 1),
	CLI_OPT("notsv", notsv, 1),
	CLI_OPT("layout=%s", layout, 0),
	CLI_OPT("format=%s", format, 0),
	CLI_OPT("convert=%s", convert, 0),
	CLI_OPT("input=%s", input, 0),
	CLI_OPT("readahead_kb=%s", readahead, 0),
	CLI_OPT("uid=%s", uid, 0),
	CLI_OPT("gid=%s", gid, 0),
	FUSE_OPT_END,
};

static int cli_proc(void *data, const char *arg, int key, struct fuse_args *out)
{
	struct cli *c = data;
	(void)out;
	if (key != FUSE_OPT_KEY_NONOPT)
		return 1;
	switch (c->nonopt++) {
	case 0:
		c->source = arg;
		return 0; /* not for libfuse */
	case 1:
		/* Kept from fuse_parse_cmdline, which would refuse a bad mount
		 * point with its own message and exit code. */
		c->mountpoint = arg;
		return 0;
	default:
		c->bad_extra = 1;
		c->extra = arg;
		return 0;
	}
}

static void warn_cb(void *ctx, const char *where, const char *msg)
{
	(void)ctx;
	fprintf(stderr, "tensorfs: %s: warning: %s\n", where, msg);
}

/* Once detached the daemon has no terminal: its warnings go to syslog. */
static int log_syslog;

/* libfuse prints its own messages, sometimes a line in several calls:
 * gather each line and print it once with our prefix. */
static void log_cb(enum fuse_log_level level, const char *fmt, va_list ap)
{
	static char line[1024];
	static size_t len;
	if (level > FUSE_LOG_NOTICE)
		return;
	if (len < sizeof line - 1)
		vsnprintf(line + len, sizeof line - len, fmt, ap);
	len = strlen(line);
	if (!len || line[len - 1] != '\n')
		return;
	while (len && line[len - 1] == '\n')
		line[--len] = 0;
	for (char *p = line; *p; p++)
		if (*p == '\n')
			*p = ' ';
	const char *m = strncmp(line, "fuse: ", 6) == 0 ? line + 6 : line;
	if (strncmp(m, "tensorfs: ", 10) == 0)
		m += 10;
	if (log_syslog)
		syslog(level <= FUSE_LOG_ERR ? LOG_ERR : LOG_WARNING, "%s", m);
	else
		fprintf(stderr, "tensorfs: %s\n", m);
	len = 0;
	line[0] = 0;
}

static void usage(FILE *f)
{
	fprintf(f,
		"usage: tensorfs [options] SOURCE MOUNTPOINT\n"
		"       tensorfs --inspect [--json] [-o strict] SOURCE\n"
		"\n"
		"Mounts a safetensors checkpoint read-only: one file per tensor, with\n"
		"user.dtype, user.shape, user.name, user.offsets and user.source xattrs,\n"
		"and __metadata__.json. SOURCE is a .safetensors file, a\n"
		"*.safetensors.index.json file, a directory holding one index, or a\n"
		"directory of .safetensors files (all of them, as one model).\n"
		"\n"
		"options:\n"
		"    -h, --help            print this help and exit\n"
		"    -V, --version         print the version and exit\n"
		"    -f                    stay in the foreground\n"
		"    -d                    debug output (implies -f)\n"
		"    -s                    single-threaded\n"
		"    -o opt[,opt...]       mount options:\n"
		"       uid=N, gid=N       owner of every file (default: the caller)\n"
		"       strict             refuse dtypes the reference reader does not know\n"
		"       layout=flat|tree   flat: one file per tensor in the root (default);\n"
		"                          tree: names split on '.' into directories\n"
		"       format=raw|npy     npy: NAME.npy files that np.load reads\n"
		"       convert=f32        BF16, F16, F8, F6 and F4 tensors as float32\n"
		"       notsv              no __tensors__.tsv table in each directory\n"
		"       input=FORMAT       read every file as FORMAT, not as its bytes say\n"
		"       direct_io          bypass the page cache (no shared mmap)\n"
		"       nosplice           copy through a buffer instead of splicing\n"
		"       overmount          mount even where something is mounted already\n"
		"       readahead_kb=N     kernel readahead for the mount (default 4096;\n"
		"                          0 keeps the kernel's 128; needs root)\n"
		"       max_threads=N      worker threads (default 10)\n"
		"       allow_other, ...   standard FUSE mount options pass through\n"
		"\n"
		"exit status: 0 mounted, 1 internal error, 2 usage, 3 source unreadable,\n"
		"4 invalid safetensors file, 5 mount failed.\n"
		"Unmount with: fusermount3 -u MOUNTPOINT\n");
}

/* Finds the absolute, symlink-free path `abs` among the mount points of
 * /proc/self/mountinfo (the last, topmost, match wins). Its paths escape
 * space, tab, newline and backslash as \ooo, so a field is unescaped before
 * it is compared. Fills the device numbers and "TYPE from SOURCE" when
 * asked. Returns 1 when found. */
static void unescape_octal(char *s)
{
	char *o = s;
	for (char *p = s; *p; p++) {
		if (p[0] == '\\' && p[1] >= '0' && p[1] <= '3' && p[2] >= '0' && p[2] <= '7' &&
		    p[3] >= '0' && p[3] <= '7') {
			*o++ = (char)((p[1] - '0') << 6 | (p[2] - '0') << 3 | (p[3] - '0'));
			p += 3;
		} else {
			*o++ = *p;
		}
	}
	*o = 0;
}

static int mountinfo_find(const char *abs, unsigned *maj, unsigned *min, char *what, size_t wsz)
{
	FILE *f = fopen("/proc/self/mountinfo", "r");
	char *line = NULL;
	size_t cap = 0;
	int found = 0;
	while (f && getline(&line, &cap, f) > 0) {
		char *save = NULL, *field[5];
		unsigned a, b;
		int k = 0;
		for (char *t = strtok_r(line, " \n", &save); t && k < 5; t = strtok_r(NULL, " \n", &save))
			field[k++] = t;
		if (k < 5 || sscanf(field[2], "%u:%u", &a, &b) != 2)
			continue;
		unescape_octal(field[4]);
		if (strcmp(field[4], abs) != 0)
			continue;
		found = 1;
		if (maj)
			*maj = a, *min = b;
		if (what) {
			/* Optional fields, then "-", then type and source. */
			char *t, *type = NULL, *src = NULL;
			while ((t = strtok_r(NULL, " \n", &save)) && strcmp(t, "-") != 0)
				;
			if (t && (type = strtok_r(NULL, " \n", &save)))
				src = strtok_r(NULL, " \n", &save);
			if (src)
				unescape_octal(src);
			snprintf(what, wsz, "%s from %s", type ? type : "?", src ? src : "?");
		}
	}
	free(line);
	if (f)
		fclose(f);
	return found;
}

static void dead_mount(const char *mp)
{
	fprintf(stderr,
		"tensorfs: %s: transport endpoint is not connected (a tensorfs that died?); clear it with: fusermount3 -u %s\n",
		mp, mp);
}

/* Checks the mount point and returns its absolute, symlink-free path, or
 * NULL after one line on stderr. Everything the daemon keeps must be
 * absolute: it leaves the caller's working directory when it detaches, and
 * unmounting (at a signal) goes through this path. */
static char *check_mountpoint(const char *mp, int overmount)
{
	struct stat st;
	if (stat(mp, &st) != 0) {
		int e = errno;
		if (e == ENOTCONN || e == ECONNABORTED)
			dead_mount(mp);
		else if (e == ENOENT)
			fprintf(stderr, "tensorfs: %s: mount point does not exist\n", mp);
		else
			fprintf(stderr, "tensorfs: %s: cannot use as mount point: %s\n", mp,
				strerror(e));
		return NULL;
	}
	if (!S_ISDIR(st.st_mode)) {
		fprintf(stderr, "tensorfs: %s: mount point is not a directory\n", mp);
		return NULL;
	}
	/* A FUSE mount whose daemon died still answers stat() from the
	 * kernel's cache; statfs always asks, and tells (ENOTCONN, or
	 * ECONNABORTED on kernels that report an aborted connection so). */
	struct statvfs sv;
	if (statvfs(mp, &sv) != 0 && (errno == ENOTCONN || errno == ECONNABORTED)) {
		dead_mount(mp);
		return NULL;
	}
	char *abs = realpath(mp, NULL);
	if (!abs) {
		fprintf(stderr, "tensorfs: %s: cannot use as mount point: %s\n", mp, strerror(errno));
		return NULL;
	}
	/* Mounting again on a mount point stacks a second mount that hides
	 * the first, and takes two unmounts to clear: refuse unless asked. */
	char what[512];
	if (!overmount && mountinfo_find(abs, NULL, NULL, what, sizeof what)) {
		fprintf(stderr,
			"tensorfs: %s: already a mount point (%s); unmount it first, or pass -o overmount to mount on top of it\n",
			mp, what);
		free(abs);
		return NULL;
	}
	DIR *dir = opendir(abs);
	if (dir) {
		struct dirent *de;
		while ((de = readdir(dir)))
			if (strcmp(de->d_name, ".") != 0 && strcmp(de->d_name, "..") != 0)
				break;
		if (de)
			fprintf(stderr,
				"tensorfs: %s: warning: the mount point is not empty; its files are hidden until the unmount\n",
				mp);
		closedir(dir);
	}
	/* Unprivileged mounts go through the setuid fusermount3, which opens
	 * the device itself: only root needs to open it here. */
	if (access("/dev/fuse", getuid() == 0 ? (R_OK | W_OK) : F_OK) != 0) {
		fprintf(stderr, "tensorfs: /dev/fuse: %s (is the fuse module loaded, and is this a container without /dev/fuse?)\n",
			strerror(errno));
		free(abs);
		return NULL;
	}
	return abs;
}

/* The kernel reads ahead only 128 KiB on a FUSE mount, and a daemon cannot
 * ask for more at INIT; the mount's backing device in sysfs can be told
 * (by root). Big sequential reads then arrive as 1 MiB requests, several
 * at once, which is what first reads of large tensors need. The device
 * number comes from mountinfo: stat() on the mount point would wait for
 * the daemon, which is not answering yet. */
static void set_readahead(const char *mountpoint, unsigned long kb)
{
	unsigned maj = 0, min = 0;
	if (!mountinfo_find(mountpoint, &maj, &min, NULL, 0))
		return;
	char path[128];
	snprintf(path, sizeof path, "/sys/class/bdi/%u:%u/read_ahead_kb", maj, min);
	FILE *ra = fopen(path, "w");
	if (!ra) {
		fuse_log(FUSE_LOG_DEBUG, "tensorfs: cannot set %s: %s\n", path, strerror(errno));
		return;
	}
	fprintf(ra, "%lu\n", kb);
	fclose(ra);
}

/* Readiness, when detaching: after the loop starts, a helper thread opens
 * the mount root, which the kernel lets through only once INIT with us is
 * complete (and which applies the readahead, see after_init), and then
 * tells the waiting parent that the mount is ready. open(), not stat():
 * valgrind holds its lock over syscalls it thinks cannot block, stat among
 * them, and the daemon would wait for itself. In the foreground there is no
 * helper: nobody waits, and its open could make an early unmount busy. */
struct ready {
	char *mountpoint;     /* absolute: the daemon leaves the caller's cwd */
	unsigned long readahead_kb;
	int notify_fd;        /* write end of the parent's pipe, or -1 */
};

static void after_init(void *arg)
{
	struct ready *r = arg;
	if (r->readahead_kb)
		set_readahead(r->mountpoint, r->readahead_kb);
}

static void *ready_thread(void *arg)
{
	struct ready *r = arg;
	/* The open is the daemon's first request, which applies the
	 * readahead before it is answered. */
	int fd = open(r->mountpoint, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	unsigned char status = fd >= 0 ? 0 : EXIT_MOUNT;
	if (fd >= 0)
		close(fd);
	if (r->notify_fd >= 0) {
		/* The parent has printed nothing and exits with `status`; from
		 * here on the daemon has no terminal. */
		ssize_t w = write(r->notify_fd, &status, 1);
		(void)w;
		close(r->notify_fd);
		openlog("tensorfs", LOG_PID, LOG_DAEMON);
		log_syslog = 1;
		int nul = open("/dev/null", O_RDWR);
		if (nul >= 0) {
			dup2(nul, 0);
			dup2(nul, 1);
			dup2(nul, 2);
			if (nul > 2)
				close(nul);
		}
	}
	return NULL;
}

/* Forks; the parent waits for the child's word and exits with it. Returns
 * the write end of the pipe in the child, -1 on failure. */
static int daemonize(void)
{
	int pfd[2];
	if (pipe(pfd) != 0)
		return -1;
	pid_t pid = fork();
	if (pid < 0)
		return -1;
	if (pid > 0) {
		unsigned char status = EXIT_INTERNAL;
		close(pfd[1]);
		if (read(pfd[0], &status, 1) != 1)
			status = EXIT_INTERNAL; /* the daemon died before ready */
		_exit(status);
	}
	close(pfd[0]);
	setsid();
	if (chdir("/") != 0) {
		/* not fatal: only keeps the caller's directory busy */
	}
	return pfd[1];
}

static int parse_id(const char *s, unsigned long *v)
{
	char *end;
	if (!s || !*s)
		return -1;
	errno = 0;
	*v = strtoul(s, &end, 10);
	if (errno || *end || *v > 0xfffffffeul || s[0] == '-')
		return -1;
	return 0;
}

static int exit_of(tfs_err e)
{
	switch (e) {
	case TFS_ERR_FORMAT: return EXIT_FORMAT;
	case TFS_ERR_OPEN:
	case TFS_ERR_NOTREG:
	case TFS_ERR_IO:
	case TFS_ERR_SHORT: return EXIT_SOURCE;
	default: return EXIT_INTERNAL;
	}
}

/* tensorfs --inspect [--json] [-o strict] SOURCE: same sources, same checks
 * and exit codes as mounting, without a mount point. */
static int inspect_main(int argc, char **argv)
{
	int json = 0, strict = 0;
	const char *source = NULL;
	for (int i = 1; i < argc; i++) {
		if (strcmp(argv[i], "--inspect") == 0)
			continue;
		if (strcmp(argv[i], "--json") == 0) {
			json = 1;
		} else if (strcmp(argv[i], "-o") == 0 && i + 1 < argc && strcmp(argv[i + 1], "strict") == 0) {
			strict = 1;
			i++;
		} else if (argv[i][0] == '-' || source) {
			fprintf(stderr, "tensorfs: unexpected argument '%s' (usage: tensorfs --inspect [--json] [-o strict] SOURCE)\n", argv[i]);
			return EXIT_USAGE;
		} else {
			source = argv[i];
		}
	}
	if (!source) {
		fprintf(stderr, "tensorfs: missing SOURCE (usage: tensorfs --inspect [--json] [-o strict] SOURCE)\n");
		return EXIT_USAGE;
	}
	struct tfs_model model;
	struct tfs_model_diag md;
	struct tfs_model_opts mo = {
		.parse_flags = strict ? TFS_PARSE_STRICT : 0,
		.warn = warn_cb,
		.index_only_ok = 1,
	};
	tfs_hash_seed_init();
	tfs_err e = tfs_model_open(source, &mo, &model, &md);
	if (e) {
		fprintf(stderr, "tensorfs: %s: %s\n", md.where, md.d.msg);
		return exit_of(e);
	}
	if (model.index_only) {
		char list[512];
		size_t o = 0;
		uint32_t k = 0;
		for (uint32_t s = 0; s < model.nshards; s++) {
			if (!model.shards[s].missing)
				continue;
			if (k++ < 4 && o < sizeof list)
				o += (size_t)snprintf(list + o, sizeof list - o, "%s%s", k > 1 ? ", " : "",
						      model.shards[s].name);
		}
		fprintf(stderr, "tensorfs: %s: warning: %u of %u shards missing (%s%s): showing what the index alone tells\n",
			model.index_path, k, model.nshards, list, k > 4 ? ", ..." : "");
	}
	int r = tfs_inspect(&model, source, json, stdout);
	if (fflush(stdout) != 0)
		r = -1;
	tfs_model_free(&model);
	if (r) {
		fprintf(stderr, "tensorfs: %s: cannot write the listing\n", source);
		return EXIT_INTERNAL;
	}
	return EXIT_OK;
}

int main(int argc, char **argv)
{
	for (int i = 1; i < argc; i++)
		if (strcmp(argv[i], "--inspect") == 0)
			return inspect_main(argc, argv);

	struct fuse_args args = FUSE_ARGS_INIT(argc, argv);
	struct fuse_cmdline_opts fo;
	struct cli c;
	struct tfs_diag d = {{0}};
	struct tfs_model_diag md;
	struct tfs_model model;
	struct tfs_tree tree;
	struct tfs_fs fs;
	struct fuse_session *se = NULL;
	int rc = EXIT_INTERNAL;
	tfs_err e;
	struct ready rd = {.mountpoint = NULL, .readahead_kb = 0, .notify_fd = -1};
	pthread_t rt;
	int have_rt = 0;

	memset(&c, 0, sizeof c);
	memset(&fo, 0, sizeof fo);
	memset(&model, 0, sizeof model);
	memset(&tree, 0, sizeof tree);
	memset(&fs, 0, sizeof fs);
	fuse_set_log_func(log_cb);

	if (fuse_opt_parse(&args, &c, cli_opts, cli_proc) != 0) {
		fuse_opt_free_args(&args);
		return EXIT_USAGE;
	}
	if (fuse_parse_cmdline(&args, &fo) != 0) {
		fuse_opt_free_args(&args);
		return EXIT_USAGE;
	}
	if (fo.show_help) {
		usage(stdout);
		rc = EXIT_OK;
		goto out_args;
	}
	if (fo.show_version) {
		printf("tensorfs %s (libfuse %s)\n", TFS_VERSION, fuse_pkgversion());
		rc = EXIT_OK;
		goto out_args;
	}
	if (c.bad_extra) {
		fprintf(stderr, "tensorfs: unexpected argument '%s' (usage: tensorfs [options] SOURCE MOUNTPOINT)\n", c.extra);
		rc = EXIT_USAGE;
		goto out_args;
	}
	if (!c.source || !c.mountpoint) {
		fprintf(stderr, "tensorfs: %s (usage: tensorfs [options] SOURCE MOUNTPOINT; see tensorfs --help)\n",
			!c.source ? "missing SOURCE and MOUNTPOINT" : "missing MOUNTPOINT");
		rc = EXIT_USAGE;
		goto out_args;
	}
	unsigned long uid = getuid(), gid = getgid();
	if ((c.uid && parse_id(c.uid, &uid)) || (c.gid && parse_id(c.gid, &gid))) {
		fprintf(stderr, "tensorfs: -o uid= and gid= take a decimal number\n");
		rc = EXIT_USAGE;
		goto out_args;
	}

	unsigned long readahead_kb = 4096;
	if (c.readahead && (parse_id(c.readahead, &readahead_kb) || readahead_kb > (1ul << 20))) {
		fprintf(stderr, "tensorfs: -o readahead_kb= takes a number of KiB up to 1048576\n");
		rc = EXIT_USAGE;
		goto out_args;
	}
	enum tfs_layout layout = TFS_LAYOUT_FLAT;
	if (c.layout && strcmp(c.layout, "tree") == 0) {
		layout = TFS_LAYOUT_TREE;
	} else if (c.layout && strcmp(c.layout, "flat") != 0) {
		fprintf(stderr, "tensorfs: -o layout= takes flat or tree, not '%s'\n", c.layout);
		rc = EXIT_USAGE;
		goto out_args;
	}

	unsigned view = 0;
	if (c.format && strcmp(c.format, "npy") == 0) {
		view |= TFS_VIEW_NPY;
	} else if (c.format && strcmp(c.format, "raw") != 0) {
		fprintf(stderr, "tensorfs: -o format= takes raw or npy, not '%s'\n", c.format);
		rc = EXIT_USAGE;
		goto out_args;
	}
	if (c.convert && strcmp(c.convert, "f32") == 0) {
		view |= TFS_VIEW_F32;
	} else if (c.convert && strcmp(c.convert, "none") != 0) {
		fprintf(stderr, "tensorfs: -o convert= takes f32 or none, not '%s'\n", c.convert);
		rc = EXIT_USAGE;
		goto out_args;
	}

	const struct tfs_format *input = NULL;
	if (c.input && !(input = tfs_format_find(c.input))) {
		fprintf(stderr, "tensorfs: -o input= takes one of %s, not '%s'\n", tfs_format_names(), c.input);
		rc = EXIT_USAGE;
		goto out_args;
	}

	tfs_hash_seed_init();
	struct tfs_model_opts mo = {
		.parse_flags = c.strict ? TFS_PARSE_STRICT : 0,
		.format = input,
		.warn = warn_cb,
	};
	e = tfs_model_open(c.source, &mo, &model, &md);
	if (e) {
		fprintf(stderr, "tensorfs: %s: %s\n", md.where, md.d.msg);
		rc = exit_of(e);
		goto out_args;
	}
	struct tfs_tree_opts to = {.layout = layout, .view = view, .tables = !c.notsv};
	e = tfs_tree_build(&model, &to, &tree, &d);
	if (e) {
		fprintf(stderr, "tensorfs: %s: %s\n", c.source, d.msg);
		rc = exit_of(e);
		goto out_model;
	}

	if (!(rd.mountpoint = check_mountpoint(c.mountpoint, c.overmount))) {
		rc = EXIT_MOUNT;
		goto out_tree;
	}

	/* Read-only at the kernel too, and named so findmnt and mount show
	 * what is mounted: fuse.tensorfs, with the source as the device. */
	if (fuse_opt_add_arg(&args, "-oro,default_permissions,subtype=tensorfs") != 0)
		goto out_tree;
	{
		char *fsname = NULL, *abs = realpath(c.source, NULL);
		int r0 = fuse_opt_add_opt_escaped(&fsname, abs ? abs : c.source);
		free(abs);
		if (r0 != 0)
			goto out_tree;
		char *opt = malloc(strlen(fsname) + 16);
		if (!opt) {
			free(fsname);
			goto out_tree;
		}
		sprintf(opt, "-ofsname=%s", fsname);
		free(fsname);
		int r = fuse_opt_add_arg(&args, opt);
		free(opt);
		if (r != 0)
			goto out_tree;
	}

	fs.m = &model;
	fs.tree = &tree;
	fs.changed = calloc(model.nshards ? model.nshards : 1, sizeof *fs.changed);
	if (!fs.changed)
		goto out_tree;
	fs.uid = (uid_t)uid;
	fs.gid = (gid_t)gid;
	fs.direct_io = c.direct_io;
	fs.view = view;
	fs.nosplice = c.nosplice;
	fs.splice = false;
	fs.timeout = 86400.0 * 365;

	se = fuse_session_new(&args, &tfs_fuse_ops, sizeof tfs_fuse_ops, &fs);
	if (!se) {
		rc = EXIT_USAGE; /* libfuse said which option it refused */
		goto out_tree;
	}
	if (fuse_set_signal_handlers(se) != 0) {
		rc = EXIT_INTERNAL;
		goto out_session;
	}
	rd.readahead_kb = readahead_kb;
	if (fuse_session_mount(se, rd.mountpoint) != 0) {
		rc = EXIT_MOUNT;
		goto out_signals;
	}
	fs.after_init = after_init;
	fs.after_init_ctx = &rd;
	if (!fo.foreground && (rd.notify_fd = daemonize()) < 0) {
		fprintf(stderr, "tensorfs: cannot start the daemon: %s\n", strerror(errno));
		rc = EXIT_INTERNAL;
		goto out_unmount;
	}
	/* The helper must never take SIGTERM/SIGINT/SIGHUP: libfuse's handler
	 * only flags the session, and the loop notices when the signal
	 * interrupts one of its own threads. The helper inherits this mask. */
	sigset_t block, old;
	sigemptyset(&block);
	sigaddset(&block, SIGTERM);
	sigaddset(&block, SIGINT);
	sigaddset(&block, SIGHUP);
	sigaddset(&block, SIGPIPE);
	pthread_sigmask(SIG_BLOCK, &block, &old);
	int tr = fo.foreground ? 0 : pthread_create(&rt, NULL, ready_thread, &rd);
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	if (tr != 0) {
		rc = EXIT_INTERNAL;
		goto out_unmount;
	}
	have_rt = !fo.foreground;
	int r;
	if (fo.singlethread) {
		r = fuse_session_loop(se);
	} else {
		struct fuse_loop_config *lc = fuse_loop_cfg_create();
		if (!lc) {
			rc = EXIT_INTERNAL;
			goto out_unmount;
		}
		fuse_loop_cfg_set_clone_fd(lc, fo.clone_fd);
		fuse_loop_cfg_set_max_threads(lc, fo.max_threads);
		/* UINT_MAX means "not given"; Debian's 3.14 warns if it is
		 * passed on. */
		if (fo.max_idle_threads != UINT_MAX)
			fuse_loop_cfg_set_idle_threads(lc, fo.max_idle_threads);
		r = fuse_session_loop_mt(se, lc);
		fuse_loop_cfg_destroy(lc);
	}
	/* The loops return 0 after an unmount, the signal number after
	 * SIGTERM/SIGINT/SIGHUP (both clean ends) and -errno on failure. */
	rc = r >= 0 ? EXIT_OK : EXIT_INTERNAL;

out_unmount:
	fuse_session_unmount(se);
out_signals:
	fuse_remove_signal_handlers(se);
out_session:
	fuse_session_destroy(se);
	/* Only now: a signal can end the loop before the helper's open() is
	 * answered, and only closing the session's /dev/fuse (just done)
	 * makes that open() return. */
	if (have_rt)
		pthread_join(rt, NULL);
out_tree:
	free(rd.mountpoint);
	free(fs.changed);
	tfs_tree_free(&tree);
out_model:
	tfs_model_free(&model);
out_args:
	free(fo.mountpoint);
	free(c.uid);
	free(c.gid);
	free(c.layout);
	free(c.format);
	free(c.convert);
	free(c.input);
	free(c.readahead);
	fuse_opt_free_args(&args);
	return rc;
}
