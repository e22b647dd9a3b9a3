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
#include "core/edits.h"
#include "core/mem.h"
#include "cli/daemon.h"
#include "fuse/fuse.h"
#include "cli/inspect.h"
#include "cli/diff.h"
#include "cli/stats_cmd.h"
#include "cli/verify.h"
#include "core/hash.h"

#include "core/version.h"

enum {
	EXIT_OK = TFS_EXIT_OK,
	EXIT_INTERNAL = TFS_EXIT_INTERNAL,
	EXIT_USAGE = TFS_EXIT_USAGE,
	EXIT_SOURCE = TFS_EXIT_SOURCE,
	EXIT_FORMAT = TFS_EXIT_FORMAT,
	EXIT_MOUNT = TFS_EXIT_MOUNT,
};

struct cli {
	const char *source; /* a copy: argv's own is scrubbed (take_source) */
	char *shown;        /* SOURCE without credentials, for messages */
	const char *mountpoint;
	int nonopt;
	int strict;
	int direct_io;
	int nosplice;
	int overmount;
	int notsv;
	int export;
	int export_cache;
	int originals;
	int sums;
	int stats_files; /* -o stats (--stats is the tool) */
	char *layout;
	char *format;
	char *convert;
	char *input;
	char *readahead;
	char *edits;
	char *max_shard;
	char *logfile;
	int verbose;
	char *uid, *gid;
	int bad_extra;
	const char *extra;
	int inspect, json, verify, xxh64, stats, diff;
	const char *source_b; /* diff: B, a copy as source is */
	char *shown_b;
	struct tfs_opts driver_opts; /* the source drivers' -o options */
	int nomem;
};

enum { KEY_INSPECT = 1, KEY_JSON, KEY_VERIFY, KEY_XXH64, KEY_STATS };

#define CLI_OPT(t, p, v)                                                                                     \
	{                                                                                                    \
		t, offsetof(struct cli, p), v                                                                \
	}
static const struct fuse_opt cli_opts[] = {
	CLI_OPT("strict", strict, 1),
	CLI_OPT("direct_io", direct_io, 1),
	CLI_OPT("nosplice", nosplice, 1),
	CLI_OPT("overmount", overmount, 1),
	CLI_OPT("notsv", notsv, 1),
	CLI_OPT("export", export, 1),
	CLI_OPT("export_cache", export_cache, 1),
	CLI_OPT("originals", originals, 1),
	CLI_OPT("sums", sums, 1),
	CLI_OPT("stats", stats_files, 1),
	CLI_OPT("layout=%s", layout, 0),
	CLI_OPT("format=%s", format, 0),
	CLI_OPT("convert=%s", convert, 0),
	CLI_OPT("input=%s", input, 0),
	CLI_OPT("readahead_kb=%s", readahead, 0),
	CLI_OPT("edits=%s", edits, 0),
	CLI_OPT("logfile=%s", logfile, 0),
	CLI_OPT("verbose", verbose, 1),
	CLI_OPT("max_shard_size=%s", max_shard, 0),
	CLI_OPT("uid=%s", uid, 0),
	CLI_OPT("gid=%s", gid, 0),
	FUSE_OPT_KEY("--inspect", KEY_INSPECT),
	FUSE_OPT_KEY("--json", KEY_JSON),
	FUSE_OPT_KEY("--verify", KEY_VERIFY),
	FUSE_OPT_KEY("--xxh64", KEY_XXH64),
	FUSE_OPT_KEY("--stats", KEY_STATS),
	FUSE_OPT_END,
};

/* A copy of SOURCE, and the original in argv with the password of a URL
 * (scheme://user:PASSWORD@host/...) overwritten, as curl does: the
 * daemon's /proc/PID/cmdline is readable by every local user for the life
 * of the mount. */
static char *take_source(char *arg, char **shown)
{
	char *copy = strdup(arg);
	*shown = malloc(strlen(arg) + 1);
	if (*shown)
		tfs_source_redact(arg, *shown, strlen(arg) + 1);
	tfs_source_hide(arg);
	return copy;
}

static int cli_proc(void *data, const char *arg, int key, struct fuse_args *out)
{
	struct cli *c = data;
	(void)out;
	if (key == KEY_STATS) {
		c->stats = 1;
		return 0;
	}
	if (key == KEY_INSPECT || key == KEY_JSON || key == KEY_VERIFY || key == KEY_XXH64) {
		*(key == KEY_INSPECT  ? &c->inspect
		  : key == KEY_JSON   ? &c->json
		  : key == KEY_VERIFY ? &c->verify
				      : &c->xxh64) = 1;
		return 0;
	}
	if (key == FUSE_OPT_KEY_OPT) {
		/* A source driver's option is the driver's; the rest go on to
		 * libfuse, which refuses what it does not know. */
		const char *eq = strchr(arg, '=');
		size_t klen = eq ? (size_t)(eq - arg) : strlen(arg);
		/* libfuse would take it and the kernel mount would stay
		 * read-only: say so rather than accept it in silence. */
		if (strcmp(arg, "rw") == 0) {
			fprintf(stderr, "tensorfs: -o rw: the mount is read-only (the source is never written); "
					"say ro (in an fstab line: ro, as defaults means rw)\n");
			return -1;
		}
		const struct tfs_opt_spec *spec = tfs_source_opt(arg, klen);
		if (!spec)
			return 1;
		if (spec->takes_value != (eq != NULL)) {
			fprintf(stderr, "tensorfs: -o %.*s %s\n", (int)klen, arg,
				spec->takes_value ? "takes a value (-o NAME=VALUE)" : "takes no value");
			return -1;
		}
		if (tfs_opts_add(&c->driver_opts, arg, klen, eq ? eq + 1 : NULL))
			c->nomem = 1;
		return 0;
	}
	if (key != FUSE_OPT_KEY_NONOPT)
		return 1;
	/* tensorfs diff A B (a SOURCE named diff is ./diff) */
	if (c->nonopt == 0 && !c->diff && strcmp(arg, "diff") == 0) {
		c->diff = 1;
		return 0;
	}
	if (c->nonopt == 1 && c->diff) {
		c->nonopt++;
		c->source_b = take_source((char *)arg, &c->shown_b);
		if (!c->source_b || !c->shown_b)
			c->nomem = 1;
		return 0;
	}
	switch (c->nonopt++) {
	case 0:
		c->source = take_source((char *)arg, &c->shown);
		if (!c->source || !c->shown)
			c->nomem = 1;
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

/* The core's log lines go where libfuse's go (stderr, then syslog). */
static void log_line(const char *line)
{
	fuse_log(FUSE_LOG_WARNING, "tensorfs: %s\n", line);
}

static void warn_cb(void *ctx, const char *where, const char *msg)
{
	(void)ctx;
	fprintf(stderr, "tensorfs: %s: warning: %s\n", where, msg);
}

#define INSPECT_USAGE "tensorfs --inspect [--json] [-o OPTIONS] SOURCE"
#define VERIFY_USAGE "tensorfs --verify [--xxh64] [--json] [-o OPTIONS] SOURCE [MANIFEST]"
#define STATS_USAGE "tensorfs --stats [--json] [-o OPTIONS] SOURCE"
#define DIFF_USAGE "tensorfs diff [--json] [-o OPTIONS] A B"

static void usage(FILE *f)
{
	fprintf(f,
		"usage: tensorfs [options] SOURCE MOUNTPOINT\n"
		"       " INSPECT_USAGE "\n"
		"       " VERIFY_USAGE "\n"
		"       " STATS_USAGE "\n"
		"       " DIFF_USAGE "\n"
		"\n"
		"Mounts a checkpoint read-only: one file per tensor, with user.dtype,\n"
		"user.shape, user.name, user.offsets and user.source xattrs, and\n"
		"__metadata__.json. SOURCE is a checkpoint file, an index\n"
		"(*.index.json), a directory holding one index, or a directory of\n"
		"checkpoint files (all of them, as one model), on disk or remote:\n"
		"http(s)://HOST/PATH, hf://ORG/REPO[@REV][/PATH] (the Hugging Face\n"
		"Hub), s3://BUCKET/KEY. Formats: %s.\n"
		"\n"
		"options:\n"
		"    -h, --help            print this help and exit\n"
		"    -V, --version         print the version and exit\n"
		"    -f                    stay in the foreground\n"
		"    -d                    debug output (implies -f)\n"
		"    -s                    single-threaded\n"
		"    -o opt[,opt...]       mount options:\n"
		"       uid=N, gid=N       owner of every file, a number or a name\n"
		"                          (default: the caller)\n"
		"       strict             refuse what the format's reference reader refuses\n"
		"       layout=flat|tree   flat: one file per tensor in the root (default);\n"
		"                          tree: names split on '.' into directories\n"
		"       format=raw|npy     npy: NAME.npy files that np.load reads\n"
		"       convert=f32        narrow float and quantized tensors as float32\n"
		"       notsv              no __tensors__.tsv table in each directory\n"
		"       export             model.safetensors of every tensor, and with\n"
		"                          layout=tree D.safetensors beside every directory D;\n"
		"                          for a GGUF model also model.gguf (all parts merged)\n"
		"       export_cache       read generated files through the page cache even\n"
		"                          where direct I/O could keep shared mmap\n"
		"       originals          the source's own files (shards, index, config.json...)\n"
		"                          byte for byte in __files__/\n"
		"       sums               __sha256sums__.txt in each directory with tensors\n"
		"                          (sha256sum -c reads it; reading it hashes them)\n"
		"       stats              NAME.stats.json beside each tensor file (--stats's\n"
		"                          figures for it, worked out when read)\n"
		"       edits=FILE         metadata edits (JSON: a key set, or deleted with\n"
		"                          null) applied to __metadata__.json and generated files\n"
		"       max_shard_size=SIZE  the model re-sharded as save_pretrained does it, in\n"
		"                          __shards__/ (5GB: 10^9 bytes; 4GiB, 4G: 2^30)\n"
		"       input=FORMAT       read every file as FORMAT, not as its bytes say\n"
		"       direct_io          bypass the page cache (shared mmap needs Linux 6.6)\n"
		"       nosplice           copy through a buffer instead of splicing\n"
		"       overmount          mount even where something is mounted already\n"
		"       readahead_kb=N     kernel readahead for the mount (default 4096;\n"
		"                          0 keeps the kernel's 128; needs root)\n"
		"       max_threads=N      worker threads (default 10)\n"
		"       logfile=PATH       the daemon's messages appended to PATH, with\n"
		"                          times (default: syslog once detached)\n"
		"       verbose            also retries, and the counters at unmount\n",
		tfs_format_names());
	const struct tfs_opt_spec *o;
	for (size_t k = 0; (o = tfs_source_opt_at(k)); k++) {
		char name[64];
		snprintf(name, sizeof name, "%s%s%s", o->name, o->takes_value ? "=" : "",
			 o->takes_value && o->value ? o->value : "");
		fprintf(f, "       %-18s %s\n", name, o->help);
	}
	fprintf(f, "       allow_other, ...   standard FUSE mount options pass through\n"
		   "\n"
		   "environment: HF_TOKEN (or HUGGING_FACE_HUB_TOKEN), HF_ENDPOINT, HF_HOME,\n"
		   "HF_HUB_CACHE, HF_HUB_OFFLINE; AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY,\n"
		   "AWS_SESSION_TOKEN, AWS_PROFILE, AWS_SHARED_CREDENTIALS_FILE, AWS_CONFIG_FILE,\n"
		   "AWS_REGION, AWS_DEFAULT_REGION, AWS_ENDPOINT_URL. See man tensorfs.\n"
		   "\n"
		   "exit status: 0 mounted, 1 internal error, 2 usage, 3 source unreadable,\n"
		   "4 invalid checkpoint, 5 mount failed, 6 --verify found a mismatch.\n"
		   "Unmount with: fusermount3 -u MOUNTPOINT\n");
}

static int parse_id(const char *s, unsigned long *v)
{
	uint64_t x;
	if (tfs_opt_number(s, 0, 0xfffffffeul, &x))
		return -1;
	*v = (unsigned long)x;
	return 0;
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
	const char *usage_line = c->diff     ? DIFF_USAGE
				 : c->verify ? VERIFY_USAGE
				 : c->stats  ? STATS_USAGE
					     : INSPECT_USAGE;
	const char *extra = c->bad_extra ? c->extra : !c->verify && c->mountpoint ? c->mountpoint : NULL;
	if (extra || rest->argc > 1) {
		const char *what = extra ? extra : rest->argv[1];
		/* libfuse gathers the options it would take as "-o", "a,b". */
		if (!extra && strcmp(what, "-o") == 0 && rest->argc > 2)
			what = rest->argv[2];
		fprintf(stderr, "tensorfs: unexpected argument '%s' (usage: %s)\n", what, usage_line);
		return EXIT_USAGE;
	}
	if (!c->source || (c->diff && !c->source_b)) {
		fprintf(stderr, "tensorfs: missing %s (usage: %s)\n",
			c->diff ? c->source ? "B" : "A and B" : "SOURCE", usage_line);
		return EXIT_USAGE;
	}
	if (c->inspect + c->verify + c->stats + c->diff > 1) {
		fprintf(stderr,
			"tensorfs: diff, --inspect, --verify and --stats are separate tools: give one\n");
		return EXIT_USAGE;
	}
	return EXIT_OK;
}

static void say_index_only(const struct tfs_model *model)
{
	char list[512] = "";
	size_t o = 0;
	uint32_t k = 0, ptrs = 0;
	for (uint32_t s = 0; s < model->nshards; s++) {
		ptrs += (uint32_t)model->shards[s].lfs_pointer;
		if (!model->shards[s].missing && !model->shards[s].lfs_pointer)
			continue;
		if (k++ < 4 && o < sizeof list)
			o += (size_t)snprintf(list + o, sizeof list - o, "%s%s", k > 1 ? ", " : "",
					      model->shards[s].name);
	}
	fprintf(stderr,
		"tensorfs: %s: warning: %u of %u shards missing%s (%s%s): showing what the index alone tells\n",
		model->index_path, k, model->nshards, ptrs ? " or Git LFS pointers" : "", list,
		k > 4 ? ", ..." : "");
}

/* tensorfs --inspect [--json] [-o OPTIONS] SOURCE, and --verify SOURCE
 * [MANIFEST]: same sources, same checks and exit codes as mounting, without
 * a mount point. */
static int tool_main(struct cli *c, const struct tfs_model_opts *mo, struct fuse_args *rest)
{
	int rc = tool_args(c, rest);
	if (rc != EXIT_OK)
		return rc;
	struct tfs_model model;
	struct tfs_model_diag md;
	struct tfs_model_opts io = *mo;
	io.index_only_ok = c->inspect;
	tfs_err e = tfs_model_open(c->source, &io, &model, &md);
	if (e) {
		fprintf(stderr, "tensorfs: %s: %s\n", md.where, md.d.msg);
		return c->diff ? 2 : exit_of(e); /* diff(1): 2 is trouble */
	}
	if (c->diff) {
		struct tfs_model mb;
		if ((e = tfs_model_open(c->source_b, &io, &mb, &md))) {
			fprintf(stderr, "tensorfs: %s: %s\n", md.where, md.d.msg);
			tfs_model_free(&model);
			return 2;
		}
		tfs_sources_start();
		rc = tfs_diff(&model, c->shown, &mb, c->shown_b, c->json, stdout);
		tfs_sources_stop();
		if (fflush(stdout) != 0)
			rc = 2;
		tfs_model_free(&mb);
		tfs_model_free(&model);
		return rc;
	}
	if (c->stats) {
		tfs_sources_start();
		rc = tfs_stats_print(&model, c->shown, c->json, stdout) ? EXIT_SOURCE : EXIT_OK;
		tfs_sources_stop();
		if (fflush(stdout) != 0 && rc == EXIT_OK)
			rc = EXIT_INTERNAL;
		tfs_model_free(&model);
		return rc;
	}
	if (c->verify) {
		tfs_sources_start(); /* read-ahead for remote sources */
		rc = tfs_verify(&model, c->shown, c->mountpoint, c->xxh64, c->json, stdout);
		tfs_sources_stop();
		if (fflush(stdout) != 0 && rc == EXIT_OK)
			rc = EXIT_INTERNAL;
		tfs_model_free(&model);
		return rc;
	}
	if (model.index_only)
		say_index_only(&model);
	int r = tfs_inspect(&model, c->shown, c->json, stdout);
	if (fflush(stdout) != 0)
		r = -1;
	tfs_model_free(&model);
	if (r) {
		fprintf(stderr, "tensorfs: %s: cannot write the listing\n", c->shown);
		return EXIT_INTERNAL;
	}
	return EXIT_OK;
}

/* What the options say, checked. */
struct settings {
	unsigned long uid, gid, readahead_kb;
	enum tfs_layout layout;
	unsigned view;
	uint64_t max_shard;
};

/* A size as transformers' max_shard_size takes it ("5GB" is 5 x 10^9,
 * "5GiB" 5 x 2^30; KB, MB, TB alike), or as our other options do (a
 * number, or with K, M, G or T: powers of 2). 0, or -1. */
static int parse_shard_size(const char *s, uint64_t *v)
{
	size_t n = strlen(s);
	char num[32];
	uint64_t mul = 0;
	static const char units[] = "KMGT";
	if (n >= 3 && (s[n - 1] | 0x20) == 'b' && (s[n - 2] | 0x20) == 'i' && strchr(units, s[n - 3] & ~0x20) &&
	    s[n - 3] != 0) {
		mul = 1ull << (10 * (strchr(units, s[n - 3] & ~0x20) - units + 1));
		n -= 3;
	} else if (n >= 2 && (s[n - 1] | 0x20) == 'b' && s[n - 2] != 0 && strchr(units, s[n - 2] & ~0x20)) {
		mul = 1;
		for (long k = strchr(units, s[n - 2] & ~0x20) - units + 1; k > 0; k--)
			mul *= 1000;
		n -= 2;
	}
	if (!mul)
		return tfs_opt_number(s, 1, UINT64_MAX, v);
	if (n == 0 || n >= sizeof num)
		return -1;
	memcpy(num, s, n);
	num[n] = 0;
	uint64_t x;
	if (tfs_opt_number(num, 0, UINT64_MAX / mul, &x))
		return -1;
	*v = x * mul;
	return 0;
}

/* EXIT_OK, or EXIT_USAGE with one line said. */
static int check_settings(const struct cli *c, struct settings *s)
{
	s->uid = getuid();
	s->gid = getgid();
	s->readahead_kb = 4096;
	s->layout = TFS_LAYOUT_FLAT;
	s->view = 0;
	s->max_shard = 0;
	if (c->bad_extra) {
		fprintf(stderr,
			"tensorfs: unexpected argument '%s' (usage: tensorfs [options] SOURCE MOUNTPOINT)\n",
			c->extra);
		return EXIT_USAGE;
	}
	if (!c->source || !c->mountpoint) {
		fprintf(stderr,
			"tensorfs: %s (usage: tensorfs [options] SOURCE MOUNTPOINT; see tensorfs --help)\n",
			!c->source ? "missing SOURCE and MOUNTPOINT" : "missing MOUNTPOINT");
		return EXIT_USAGE;
	}
	/* A name, as sshfs takes it (an fstab line is easier to read so). */
	if (c->uid && parse_id(c->uid, &s->uid)) {
		struct passwd *pw = getpwnam(c->uid);
		if (!pw) {
			fprintf(stderr, "tensorfs: -o uid=%s: no such user (a name or a number)\n", c->uid);
			return EXIT_USAGE;
		}
		s->uid = pw->pw_uid;
	}
	if (c->gid && parse_id(c->gid, &s->gid)) {
		struct group *gr = getgrnam(c->gid);
		if (!gr) {
			fprintf(stderr, "tensorfs: -o gid=%s: no such group (a name or a number)\n", c->gid);
			return EXIT_USAGE;
		}
		s->gid = gr->gr_gid;
	}
	if (c->readahead && (parse_id(c->readahead, &s->readahead_kb) || s->readahead_kb > (1ul << 20))) {
		fprintf(stderr, "tensorfs: -o readahead_kb= takes a number of KiB up to 1048576\n");
		return EXIT_USAGE;
	}
	/* Only root may write the mount's read_ahead_kb in sysfs. */
	if (c->readahead && geteuid() != 0)
		fprintf(stderr,
			"tensorfs: warning: -o readahead_kb=%s needs root; the kernel's readahead (128 KiB) stays\n",
			c->readahead);
	if (c->max_shard && (parse_shard_size(c->max_shard, &s->max_shard) || s->max_shard == 0)) {
		fprintf(stderr, "tensorfs: -o max_shard_size= takes a size above 0 such as 5GB (10^9 bytes), "
				"4GiB or 4G (2^30), or a number of bytes, not '%s'\n",
			c->max_shard);
		return EXIT_USAGE;
	}
	if (c->logfile && tfs_log_open_file(c->logfile) != 0) {
		fprintf(stderr, "tensorfs: -o logfile=%s: cannot open it: %s\n", c->logfile, strerror(errno));
		return EXIT_USAGE;
	}
	tfs_log_verbose(c->verbose);
	if (c->export_cache && !c->export) {
		fprintf(stderr, "tensorfs: -o export_cache goes with -o export\n");
		return EXIT_USAGE;
	}
	if (c->layout && strcmp(c->layout, "tree") == 0) {
		s->layout = TFS_LAYOUT_TREE;
	} else if (c->layout && strcmp(c->layout, "flat") != 0) {
		fprintf(stderr, "tensorfs: -o layout= takes flat or tree, not '%s'\n", c->layout);
		return EXIT_USAGE;
	}
	if (c->format && strcmp(c->format, "npy") == 0) {
		s->view |= TFS_VIEW_NPY;
	} else if (c->format && strcmp(c->format, "raw") != 0) {
		fprintf(stderr, "tensorfs: -o format= takes raw or npy, not '%s'\n", c->format);
		return EXIT_USAGE;
	}
	if (c->convert && strcmp(c->convert, "f32") == 0) {
		s->view |= TFS_VIEW_F32;
	} else if (c->convert && strcmp(c->convert, "none") != 0) {
		fprintf(stderr, "tensorfs: -o convert= takes f32 or none, not '%s'\n", c->convert);
		return EXIT_USAGE;
	}
	return EXIT_OK;
}

static void say_warning(void *shown, const char *line)
{
	fprintf(stderr, "tensorfs: %s: warning: %s\n", (const char *)shown, line);
}

/* The checkpoint and its file tree; EXIT_OK, or the exit code with one
 * line said. */
static int open_checkpoint(const struct cli *c, const struct tfs_model_opts *mo, const struct settings *s,
			   struct tfs_model *model, struct tfs_tree *tree)
{
	struct tfs_model_diag md;
	struct tfs_diag d = {{0}};
	tfs_err e = tfs_model_open(c->source, mo, model, &md);
	if (e) {
		fprintf(stderr, "tensorfs: %s: %s\n", md.where, md.d.msg);
		return exit_of(e);
	}
	if (c->edits) {
		struct tfs_edits *ed = NULL;
		e = tfs_edits_load(c->edits, &ed, &d);
		for (uint32_t k = 0; !e && k < model->nshards; k++)
			e = tfs_edits_apply(ed, &model->shards[k].h, &d);
		tfs_edits_free(ed);
		if (e) {
			fprintf(stderr, "tensorfs: %s\n", d.msg);
			return exit_of(e);
		}
	}
	struct tfs_tree_opts to = {.layout = s->layout,
				   .view = s->view,
				   .tables = !c->notsv,
				   .export = c->export,
				   .originals = c->originals,
				   .sums = c->sums,
				   .stats = c->stats_files,
				   .max_shard_size = s->max_shard};
	e = tfs_tree_build(model, &to, tree, &d);
	if (e) {
		fprintf(stderr, "tensorfs: %s: %s\n", c->shown, d.msg);
		return exit_of(e);
	}
	tfs_views_notice(tree, say_warning, (void *)c->shown);
	return EXIT_OK;
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
	int tw = tr == 0 ? tfs_watch_start(&watch, se) : -1;
	/* Only generated files drop pages behind their readers: a tensor's
	 * file is what np.memmap and repeated reads use. Whether they are
	 * cached at all is known only after INIT (fuse/kinit.h), so the thread
	 * starts anyway; it costs nothing while no stream is open. */
	uint64_t ra = (rd->readahead_kb ? rd->readahead_kb : 128) << 10;
	int tb = tw == 0 && c->export && !c->direct_io ? tfs_behind_start(&fs->behind, se, ra) : 0;
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
			struct fuse_cmdline_opts *fo, struct settings *s)
{
	if (c->inspect || c->verify || c->stats || c->diff)
		return tool_main(c, mo, args);
	if (fuse_parse_cmdline(args, fo) != 0)
		return EXIT_USAGE;
	tfs_log_debug(fo->debug);
	if (fo->show_help) {
		usage(stdout);
		return EXIT_OK;
	}
	if (fo->show_version) {
		printf("tensorfs %s (libfuse %s)\n", TFS_VERSION, fuse_pkgversion());
		return EXIT_OK;
	}
	int rc = check_settings(c, s);
	return rc == EXIT_OK ? -1 : rc;
}

static void free_cli(struct cli *c, struct fuse_cmdline_opts *fo, struct fuse_args *args)
{
	free((char *)c->source);
	free(c->shown);
	free((char *)c->source_b);
	free(c->shown_b);
	free(fo->mountpoint);
	free(c->uid);
	free(c->gid);
	free(c->layout);
	free(c->format);
	free(c->convert);
	free(c->input);
	free(c->readahead);
	free(c->edits);
	free(c->logfile);
	free(c->max_shard);
	tfs_opts_free(&c->driver_opts);
	fuse_opt_free_args(args);
}

int main(int argc, char **argv)
{
	struct fuse_args args = FUSE_ARGS_INIT(argc, argv);
	struct fuse_cmdline_opts fo;
	struct cli c;
	struct settings s;
	struct tfs_model model;
	struct tfs_tree tree;
	struct tfs_fs fs;
	struct fuse_session *se = NULL;
	int rc;
	struct tfs_ready rd = {.mountpoint = NULL, .readahead_kb = 0, .notify_fd = -1};
	pthread_t rt;
	int have_rt = 0;

	tfs_mem_init();
	memset(&c, 0, sizeof c);
	memset(&fo, 0, sizeof fo);
	memset(&model, 0, sizeof model);
	memset(&tree, 0, sizeof tree);
	memset(&fs, 0, sizeof fs);
	fuse_set_log_func(tfs_log_cb);
	tfs_log_set(log_line);
	tfs_log_set_info(tfs_log_info_line);

	if (fuse_opt_parse(&args, &c, cli_opts, cli_proc) != 0 || c.nomem) {
		rc = c.nomem ? EXIT_INTERNAL : EXIT_USAGE;
		goto out_args;
	}
	const struct tfs_format *input = NULL;
	if (c.input && !(input = tfs_format_find(c.input))) {
		fprintf(stderr, "tensorfs: -o input= takes one of %s, not '%s'\n", tfs_format_names(),
			c.input);
		rc = EXIT_USAGE;
		goto out_args;
	}
	tfs_hash_seed_init();
	struct tfs_model_opts mo = {
		.parse_flags = c.strict ? TFS_PARSE_STRICT : 0,
		.format = input,
		.opts = &c.driver_opts,
		.warn = warn_cb,
	};
	if ((rc = before_mount(&c, &mo, &args, &fo, &s)) >= 0)
		goto out_args;
	if ((rc = open_checkpoint(&c, &mo, &s, &model, &tree)) != EXIT_OK)
		goto out_tree;
	rc = EXIT_MOUNT;
	if (!(rd.mountpoint = tfs_check_mountpoint(c.mountpoint, c.overmount)))
		goto out_tree;
	rc = EXIT_INTERNAL;
	if (add_mount_args(&args, model.store ? model.store->location : c.shown) != 0)
		goto out_tree;

	fs.m = &model;
	fs.tree = &tree;
	fs.uid = (uid_t)s.uid;
	fs.gid = (gid_t)s.gid;
	fs.direct_io = c.direct_io;
	fs.export_cache = c.export_cache;
	fs.nosplice = c.nosplice;
	fs.splice = false;
	fs.timeout = 86400.0 * 365;

	se = fuse_session_new(&args, &tfs_fuse_ops, sizeof tfs_fuse_ops, &fs);
	if (!se) {
		rc = EXIT_USAGE; /* libfuse said which option it refused */
		goto out_tree;
	}
	if (fuse_set_signal_handlers(se) != 0)
		goto out_session;
	rd.readahead_kb = s.readahead_kb;
	if (fuse_session_mount(se, rd.mountpoint) != 0) {
		rc = EXIT_MOUNT;
		goto out_signals;
	}
	/* Without the hooks the mount works as before: direct_io files just
	 * cannot be mapped shared. */
	tfs_kinit_attach(se);
	fs.after_init = tfs_after_init;
	fs.after_init_ctx = &rd;
	if (!fo.foreground && (rd.notify_fd = tfs_daemonize()) < 0) {
		fprintf(stderr, "tensorfs: cannot start the daemon: %s\n", strerror(errno));
		goto out_unmount;
	}
	rc = serve(se, &fo, &c, &fs, &rd, &rt, &have_rt);

out_unmount:
	tfs_behind_end(fs.behind);
	fuse_session_unmount(se);
	tfs_behind_free(fs.behind);
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
	tfs_tree_free(&tree);
	tfs_model_free(&model);
out_args:
	free_cli(&c, &fo, &args);
	return rc;
}
