/* The command line: parse options, validate the whole source, mount, and
 * only then detach, so that every failure is reported in the foreground. */
#include <dirent.h>
#include <grp.h>
#include <pwd.h>
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

#include "views/view.h"
#include "fuse/behind.h"
#include "fuse/kinit.h"
#include "fs/mount.h"
#include "core/mem.h"
#include "cli/daemon.h"
#include "cli/options.h"
#include "fuse/fuse.h"
#include "tools/tools.h"
#include "core/hash.h"

#include "core/version.h"

/* The core's log lines go where libfuse's go (stderr, then syslog). */
static void log_line(const char *line)
{
	fuse_log(FUSE_LOG_WARNING, "tensorfs: %s\n", line);
}

static void warn_cb(void *ctx, const char *where, const char *msg)
{
	char q[TFS_QPATH_MAX];
	(void)ctx;
	fprintf(stderr, "tensorfs: %s: warning: %s\n", tfs_quote_path(q, sizeof q, where), msg);
}

static int exit_of(tfs_err e)
{
	switch (e) {
	case TFS_ERR_FORMAT:
		return EXIT_FORMAT;
	case TFS_ERR_INVAL:
		return EXIT_USAGE; /* a source or option that cannot be right */
	case TFS_ERR_OPEN:
	case TFS_ERR_NOENT:
	case TFS_ERR_NOTREG:
	case TFS_ERR_IO:
	case TFS_ERR_SHORT:
		return EXIT_SOURCE;
	default:
		return EXIT_INTERNAL;
	}
}

/* Arguments beyond what the tool takes: EXIT_USAGE with one line said. */
static int tool_args(const struct cli *c, const struct fuse_args *rest)
{
	const struct tfs_tool *t = c->tool;
	const char *extra = c->bad_extra ? c->extra : !t->manifest && c->mountpoint ? c->mountpoint : NULL;
	if (extra || rest->argc > 1) {
		const char *what = extra ? extra : rest->argv[1];
		/* libfuse gathers the options it would take as "-o", "a,b". */
		if (!extra && strcmp(what, "-o") == 0 && rest->argc > 2)
			what = rest->argv[2];
		fprintf(stderr, "tensorfs: unexpected argument '%s' (usage: %s)\n", what, t->usage);
		return EXIT_USAGE;
	}
	if (!c->source || (t->sources == 2 && !c->source_b)) {
		fprintf(stderr, "tensorfs: missing %s (usage: %s)\n",
			t->sources == 2 ? c->source ? "B" : "A and B" : "SOURCE", t->usage);
		return EXIT_USAGE;
	}
	if (c->tools_given > 1) {
		fprintf(stderr,
			"tensorfs: diff, --inspect, --verify and --stats are separate tools: give one\n");
		return EXIT_USAGE;
	}
	return EXIT_OK;
}

static void say_warning(void *shown, const char *line)
{
	char q[TFS_QPATH_MAX];
	fprintf(stderr, "tensorfs: %s: warning: %s\n", tfs_quote_path(q, sizeof q, shown), line);
}

/* The checkpoint through the one pipeline (fs/mount.h): the model with
 * the edits applied, and with s (a mount) its file tree; EXIT_OK, or the
 * exit code with one line said. */
static int open_mount(const struct cli *c, const char *source, const char *shown,
		      const struct tfs_model_opts *mo, const struct settings *s, int tree,
		      struct tfs_mount *out)
{
	char line[TFS_MOUNT_LINE_MAX];
	struct tfs_mount_opts o = {
		.source = source,
		.shown = shown,
		.model = mo,
		.edits = c->edits,
		.tree = s != NULL || tree,
		.layout = s ? s->layout : TFS_LAYOUT_FLAT,
		.opts = &c->driver_opts,
	};
	tfs_err e = tfs_mount_open(&o, out, line, sizeof line);
	if (e) {
		fprintf(stderr, "tensorfs: %s\n", line);
		return exit_of(e);
	}
	if (s) {
		tfs_views_notice(&out->tree, say_warning, (void *)shown);
		tfs_sources_notice(out->model.sources, say_warning, (void *)shown);
	}
	return EXIT_OK;
}

/* A tool (tools/tools.h): the checkpoints it takes opened through the
 * same pipeline, sources, checks and exit codes as mounting, without a
 * mount point, then the tool run over them. */
static int tool_main(struct cli *c, const struct tfs_model_opts *mo, struct fuse_args *rest)
{
	const struct tfs_tool *t = c->tool;
	int rc = tool_args(c, rest);
	if (rc == EXIT_OK)
		rc = tfs_cli_absolute(c, 0);
	if (rc != EXIT_OK)
		return rc;
	struct tfs_mount m[2];
	const char *src[2] = {c->source, c->source_b}, *shown[2] = {c->shown, c->shown_b};
	struct tfs_model_opts io = *mo;
	io.index_only_ok = t->index_only_ok;
	for (unsigned k = 0; k < t->sources; k++) {
		rc = open_mount(c, src[k], shown[k], &io, NULL, t->tree, &m[k]);
		if (rc != EXIT_OK) {
			while (k-- > 0)
				tfs_mount_close(&m[k]);
			return t->trouble ? t->trouble : rc;
		}
	}
	struct tfs_tool_args a = {
		.a = t->sources > 0 ? &m[0] : NULL,
		.b = t->sources > 1 ? &m[1] : NULL,
		.shown = c->shown,
		.shown_b = c->shown_b,
		.manifest = t->manifest ? c->mountpoint : NULL,
		.opts = &c->driver_opts,
		.json = c->json,
		.xxh64 = c->xxh64,
		.out = stdout,
	};
	/* Their sources' work in the background (the read-ahead of a remote
	 * one) runs while the tool does, and stops before they close. */
	for (unsigned k = 0; k < t->sources; k++)
		tfs_sources_start(m[k].model.sources);
	rc = t->run(&a);
	for (unsigned k = t->sources; k-- > 0;)
		tfs_sources_stop(m[k].model.sources);
	if (fflush(stdout) != 0)
		rc = t->trouble ? t->trouble : rc == TFS_EXIT_OK ? TFS_EXIT_INTERNAL : rc;
	for (unsigned k = t->sources; k-- > 0;)
		tfs_mount_close(&m[k]);
	return rc;
}

/* Read-only at the kernel too, and named so findmnt and mount show what
 * is mounted: fuse.tensorfs, with the source as the device. */
static int add_mount_args(struct fuse_args *args, const char *device)
{
	if (fuse_opt_add_arg(args, "-oro,default_permissions,subtype=tensorfs") != 0)
		return -1;
	char *fsname = NULL;
	if (fuse_opt_add_opt_escaped(&fsname, device) != 0)
		return -1;
	char *opt = malloc(strlen(fsname) + 16);
	if (!opt) {
		free(fsname);
		return -1;
	}
	sprintf(opt, "-ofsname=%s", fsname);
	free(fsname);
	int r = fuse_opt_add_arg(args, opt);
	free(opt);
	return r;
}

/* The mounted session until it ends: the helper that says "ready", the
 * watch on the mount, drop-behind, then the loop. The exit code. */
static int serve(struct fuse_session *se, const struct fuse_cmdline_opts *fo, const struct cli *c,
		 struct tfs_fs *fs, struct tfs_ready *rd, pthread_t *rt, int *have_rt)
{
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
	int tr = fo->foreground ? 0 : pthread_create(rt, NULL, tfs_ready_thread, rd);
	*have_rt = !fo->foreground && tr == 0;
	struct tfs_watch watch;
	int tw = tr == 0 ? tfs_watch_start(&watch, se, fs->core.m->sources) : -1;
	/* Only generated files drop pages behind their readers: a tensor's
	 * file is what np.memmap and repeated reads use. Whether they are
	 * cached at all is known only after INIT (fuse/kinit.h), so the thread
	 * starts anyway; it costs nothing while no stream is open. */
	uint64_t ra = (rd->readahead_kb ? rd->readahead_kb : 128) << 10;
	int tb = tw == 0 && tfs_tree_generates(fs->core.tree) && !c->direct_io
			 ? tfs_behind_start(&fs->behind, se, ra)
			 : 0;
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	if (tr != 0 || tw != 0 || tb != 0) {
		if (tw == 0)
			tfs_watch_end(&watch);
		return EXIT_INTERNAL;
	}
	int r;
	if (fo->singlethread) {
		r = fuse_session_loop(se);
	} else {
		struct fuse_loop_config *lc = fuse_loop_cfg_create();
		if (!lc) {
			tfs_watch_end(&watch);
			return EXIT_INTERNAL;
		}
		fuse_loop_cfg_set_clone_fd(lc, fo->clone_fd);
		fuse_loop_cfg_set_max_threads(lc, fo->max_threads);
		/* UINT_MAX means "not given"; Debian's 3.14 warns if it is
		 * passed on. */
		if (fo->max_idle_threads != UINT_MAX)
			fuse_loop_cfg_set_idle_threads(lc, fo->max_idle_threads);
		r = fuse_session_loop_mt(se, lc);
		fuse_loop_cfg_destroy(lc);
	}
	tfs_watch_end(&watch);
	/* The loops return 0 after an unmount, the signal number after
	 * SIGTERM/SIGINT/SIGHUP (both clean ends) and -errno on failure. */
	return r >= 0 ? EXIT_OK : EXIT_INTERNAL;
}

/* -h, -V, --inspect, or a mistake in the arguments: the exit code, or -1
 * to go on and mount. */
static int before_mount(struct cli *c, const struct tfs_model_opts *mo, struct fuse_args *args,
			struct fuse_cmdline_opts *fo)
{
	if (c->tool)
		return tool_main(c, mo, args);
	if (fuse_parse_cmdline(args, fo) != 0)
		return EXIT_USAGE;
	tfs_log_debug(fo->debug);
	if (fo->show_help) {
		tfs_cli_usage(stdout);
		return EXIT_OK;
	}
	if (fo->show_version) {
		printf("tensorfs %s (libfuse %s)\n", TFS_VERSION, fuse_pkgversion());
		return EXIT_OK;
	}
	int rc = tfs_cli_check_settings(c);
	return rc == EXIT_OK ? -1 : rc;
}

/* The session of a mount: made, mounted, served until the end, undone.
 * The exit code. */
static int session(struct fuse_args *args, const struct fuse_cmdline_opts *fo, const struct cli *c,
		   struct tfs_fs *fs, struct tfs_ready *rd)
{
	int rc = EXIT_INTERNAL, have_rt = 0;
	pthread_t rt;
	struct fuse_session *se = fuse_session_new(args, &tfs_fuse_ops, sizeof tfs_fuse_ops, fs);
	if (!se)
		return EXIT_USAGE; /* libfuse said which option it refused */
	if (!fo->foreground)
		tfs_signals_detached();
	if (fuse_set_signal_handlers(se) != 0)
		goto out_session;
	if (fuse_session_mount(se, rd->mountpoint) != 0) {
		rc = EXIT_MOUNT;
		goto out_signals;
	}
	/* Without the hooks the mount works as before: direct_io files just
	 * cannot be mapped shared. */
	tfs_kinit_attach(se);
	fs->after_init = tfs_after_init;
	fs->after_init_ctx = rd;
	if (!fo->foreground && (rd->notify_fd = tfs_daemonize()) < 0) {
		fprintf(stderr, "tensorfs: cannot start the daemon: %s\n", strerror(errno));
		goto out_unmount;
	}
	rc = serve(se, fo, c, fs, rd, &rt, &have_rt);

out_unmount:
	tfs_behind_end(fs->behind);
	fuse_session_unmount(se);
	tfs_behind_free(fs->behind);
out_signals:
	fuse_remove_signal_handlers(se);
out_session:
	fuse_session_destroy(se);
	/* Only now: a signal can end the loop before the helper's open() is
	 * answered, and only closing the session's /dev/fuse (just done)
	 * makes that open() return. */
	if (have_rt)
		pthread_join(rt, NULL);
	tfs_fuse_close_all(fs);
	return rc;
}

int main(int argc, char **argv)
{
	struct fuse_args args = FUSE_ARGS_INIT(argc, argv);
	struct fuse_cmdline_opts fo;
	struct cli c;
	struct settings s;
	struct tfs_mount mnt;
	struct tfs_fs fs;
	int rc;
	struct tfs_ready rd = {.mountpoint = NULL, .readahead_kb = 0, .notify_fd = -1};

	tfs_mem_init();
	memset(&c, 0, sizeof c);
	memset(&fo, 0, sizeof fo);
	memset(&s, 0, sizeof s);
	memset(&mnt, 0, sizeof mnt);
	memset(&fs, 0, sizeof fs);
	fuse_set_log_func(tfs_log_cb);
	tfs_log_set(log_line);
	tfs_log_set_info(tfs_log_info_line);
	tfs_log_set_detail(tfs_log_detail_line);

	/* tensorfs --list takes nothing else, and needs none of the parsing. */
	for (int i = 1; i < argc; i++)
		if (strcmp(argv[i], "--list") == 0) {
			if (argc == 2)
				return tfs_tool_named("--list")->run(&(struct tfs_tool_args){.out = stdout});
			fprintf(stderr, "tensorfs: --list takes no other argument (usage: %s)\n", LIST_USAGE);
			return EXIT_USAGE;
		}
	if (fuse_opt_parse(&args, &c, tfs_cli_opts, tfs_cli_proc) != 0 || c.nomem) {
		rc = c.nomem ? EXIT_INTERNAL : EXIT_USAGE;
		goto out_args;
	}
	if ((rc = tfs_cli_secrets(&c, argc, argv)) != EXIT_OK)
		goto out_args;
	if ((rc = tfs_cli_check_flags(&c)) != EXIT_OK)
		goto out_args;
	/* Every option, for every command, before SOURCE is looked at. */
	if (!c.help && (rc = tfs_cli_check_options(&c, argc, argv, &s)) != EXIT_OK)
		goto out_args;
	const struct tfs_format *input = c.input ? tfs_format_find(c.input) : NULL;
	tfs_hash_seed_init();
	struct tfs_model_opts mo = {
		.parse_flags = c.strict ? TFS_PARSE_STRICT : 0,
		.format = input,
		.opts = &c.driver_opts,
		.warn = warn_cb,
	};
	if ((rc = before_mount(&c, &mo, &args, &fo)) >= 0)
		goto out_args;
	if ((rc = open_mount(&c, c.source, c.shown, &mo, &s, 0, &mnt)) != EXIT_OK)
		goto out_tree;
	rc = EXIT_MOUNT;
	if (!(rd.mountpoint = tfs_check_mountpoint(c.mountpoint, c.overmount)))
		goto out_tree;
	rc = EXIT_INTERNAL;
	if (add_mount_args(&args, mnt.model.store ? mnt.model.store->location : c.shown) != 0)
		goto out_tree;

	fs.core = (struct tfs_fs_core){
		.m = &mnt.model,
		.tree = &mnt.tree,
		.uid = (uid_t)s.uid,
		.gid = (gid_t)s.gid,
		.direct_io = c.direct_io,
		.keep_pages = tfs_views_keep_pages(&c.driver_opts),
		.dio_mmap = tfs_kinit_dio_mmap,
	};
	pthread_mutex_init(&fs.open_lock, NULL);
	fs.nosplice = c.nosplice;
	fs.timeout = 86400.0 * 365;
	rd.readahead_kb = s.readahead_kb;
	rd.sources = mnt.model.sources;
	rc = session(&args, &fo, &c, &fs, &rd);

out_tree:
	free(rd.mountpoint);
	tfs_mount_close(&mnt);
out_args:
	tfs_cli_free(&c, &fo, &args);
	return rc;
}
