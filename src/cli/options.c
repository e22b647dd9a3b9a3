/* The command line's options and --help (cli/options.h). */
#include "cli/options.h"

#include <errno.h>
#include <grp.h>
#include <pwd.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/format.h"
#include "core/url.h"
#include "core/userfile.h"
#include "views/view.h"

#define CLI_OPT(t, p, v)                                                                                     \
	{                                                                                                    \
		t, offsetof(struct cli, p), v                                                                \
	}
const struct fuse_opt tfs_cli_opts[] = {
	CLI_OPT("strict", strict, 1),
	CLI_OPT("direct_io", direct_io, 1),
	CLI_OPT("nosplice", nosplice, 1),
	CLI_OPT("overmount", overmount, 1),
	CLI_OPT("layout=%s", layout, 0),
	CLI_OPT("input=%s", input, 0),
	CLI_OPT("readahead_kb=%s", readahead, 0),
	CLI_OPT("edits=%s", edits, 0),
	CLI_OPT("logfile=%s", logfile, 0),
	CLI_OPT("verbose", verbose, 1),
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
	/* A URL's user:password@ is left out of every message too. */
	if (!tfs_source_is_path(arg) && tfs_url_secret(arg) != 0) {
		free(copy);
		return NULL;
	}
	*shown = malloc(strlen(arg) + 1);
	if (*shown)
		tfs_source_redact(arg, *shown, strlen(arg) + 1);
	tfs_source_hide(arg);
	return copy;
}

int tfs_cli_proc(void *data, const char *arg, int key, struct fuse_args *out)
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
	if (key == FUSE_OPT_KEY_OPT && arg[0] == '-') {
		/* Of the options that start with a dash, libfuse's command line
		 * takes these (--help lists them); any other is a mistake to
		 * say at once, before the source is looked at. */
		static const char *const fuse_cmdline[] = {"-h", "--help", "-V", "--version",
							   "-d", "-f",     "-s", NULL};
		for (const char *const *f = fuse_cmdline; *f; f++)
			if (strcmp(arg, *f) == 0)
				return 1;
		if (!c->unknown)
			c->unknown = arg;
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
			fprintf(stderr,
				"tensorfs: -o rw: the mount is read-only (the source is never written); "
				"say ro (in an fstab line: ro, as defaults means rw)\n");
			return -1;
		}
		const struct tfs_opt_spec *spec = tfs_source_opt(arg, klen);
		if (!spec)
			spec = tfs_view_opt(arg, klen);
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
		if (!(c->mountpoint = strdup(arg)))
			c->nomem = 1;
		return 0;
	default:
		c->bad_extra = 1;
		c->extra = arg;
		return 0;
	}
}

/* A paragraph of --help, its words in lines of at most 76 columns. */
static void wrap(FILE *f, const char *text)
{
	size_t col = 0;
	for (const char *w = text; *w;) {
		size_t n = strcspn(w, " ");
		if (col && col + 1 + n > 76) {
			fputc('\n', f);
			col = 0;
		} else if (col) {
			fputc(' ', f);
			col++;
		}
		fprintf(f, "%.*s", (int)n, w);
		col += n;
		w += n;
		while (*w == ' ')
			w++;
	}
	fputc('\n', f);
}

/* One driver's option in --help: NAME or NAME=VALUE in a column (two
 * spaces at least after it), its help's lines under one another. */
static void usage_opt(FILE *f, const struct tfs_opt_spec *o)
{
	char name[64];
	snprintf(name, sizeof name, "%s%s%s", o->name, o->takes_value ? "=" : "",
		 o->takes_value && o->value ? o->value : "");
	fprintf(f, "       %-18s%s", name, strlen(name) < 18 ? " " : "  ");
	for (const char *h = o->help;;) {
		const char *nl = strchr(h, '\n');
		fprintf(f, "%.*s\n", (int)(nl ? nl - h : (long)strlen(h)), h);
		if (!nl)
			break;
		h = nl + 1;
		fprintf(f, "%26s", "");
	}
}

/* Appends every source driver's usage (env: its environment help) to
 * text from `at` on, the first after a space, the others after sep, then
 * end; what does not fit is cut. */
static void drivers_text(char *text, size_t cap, size_t at, int env, const char *sep, const char *end)
{
	const char *s = " ";
	for (const struct tfs_source_driver *const *d = tfs_source_drivers; *d; d++) {
		const char *v = env ? (*d)->env_help : (*d)->usage;
		if (v && at < cap) {
			at += (size_t)snprintf(text + at, cap - at, "%s%s", s, v);
			s = sep;
		}
	}
	if (at < cap)
		snprintf(text + at, cap - at, "%s", end);
}

void tfs_cli_usage(FILE *f)
{
	fprintf(f, "usage: tensorfs [options] SOURCE MOUNTPOINT\n"
		   "       " INSPECT_USAGE "\n"
		   "       " VERIFY_USAGE "\n"
		   "       " STATS_USAGE "\n"
		   "       " DIFF_USAGE "\n"
		   "       " LIST_USAGE "\n"
		   "\n"
		   "commands:\n"
		   "  SOURCE MOUNTPOINT  mount SOURCE read-only, one file per tensor\n"
		   "  --inspect          print the tensors (name, dtype, shape, size) and metadata\n"
		   "  --verify           hash every tensor: check against MANIFEST, or write one\n"
		   "  --stats            print each tensor's min, max, mean, std, zeros, NaN, Inf\n"
		   "  diff               compare two checkpoints: names, dtypes, shapes and values\n"
		   "  --list             this user's mounts: mount point, source, daemon PID\n"
		   "\n");
	/* The sources' and the formats' part, from their registries. */
	char text[2048];
	size_t at = (size_t)snprintf(
		text, sizeof text,
		"Mounts a checkpoint read-only: one file per tensor, with user.dtype, "
		"user.shape, user.name, user.offsets and user.source xattrs, and "
		"__metadata__.json. SOURCE is a checkpoint file, an index (*.index.json), a directory holding "
		"one index, or a directory of checkpoint files (all of them, as one model), "
		"on disk or remote:");
	drivers_text(text, sizeof text, at, 0, ", ", ".");
	wrap(f, text);
	/* On one line: the bash completion reads the formats from it. */
	fprintf(f, "Formats: %s.\n", tfs_format_names());
	fprintf(f, "\n"
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
		   "       edits=FILE         metadata edits (JSON: a key set, or deleted with\n"
		   "                          null) applied to __metadata__.json and generated files\n"
		   "       input=FORMAT       read every file as FORMAT, not as its bytes say\n"
		   "       direct_io          bypass the page cache (shared mmap needs Linux 6.6)\n"
		   "       nosplice           copy through a buffer instead of splicing\n"
		   "       overmount          mount even where something is mounted already\n"
		   "       readahead_kb=N     kernel readahead for the mount (default 4096;\n"
		   "                          0 keeps the kernel's 128; needs root)\n"
		   "       max_threads=N      worker threads (default 10)\n"
		   "       logfile=PATH       the daemon's messages appended to PATH, with\n"
		   "                          times (default: syslog, else ~/.local/state/tensorfs)\n"
		   "       verbose            also retries, and the counters at unmount\n");
	const struct tfs_opt_spec *o;
	for (size_t k = 0; (o = tfs_view_opt_at(k)); k++)
		usage_opt(f, o);
	for (size_t k = 0; (o = tfs_source_opt_at(k)); k++)
		usage_opt(f, o);
	fprintf(f, "       allow_other, ...   standard FUSE mount options pass through\n\n");
	at = (size_t)snprintf(text, sizeof text, "environment:");
	drivers_text(text, sizeof text, at, 1, "; ", ". See man tensorfs.");
	wrap(f, text);
	fprintf(f, "\n"
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

int tfs_cli_check_flags(const struct cli *c)
{
	int tool = c->inspect || c->verify || c->stats || c->diff;
	if (c->unknown) {
		fprintf(stderr, "tensorfs: unknown option '%s' (see tensorfs --help)\n", c->unknown);
		return EXIT_USAGE;
	}
	if (c->json && !tool) {
		fprintf(stderr,
			"tensorfs: --json goes with --inspect, --verify, --stats or diff; a mount has no output "
			"to format\n");
		return EXIT_USAGE;
	}
	if (c->xxh64 && !c->verify) {
		fprintf(stderr, "tensorfs: --xxh64 goes with --verify\n");
		return EXIT_USAGE;
	}
	return EXIT_OK;
}

/* EXIT_OK, or EXIT_USAGE with one line said. */
int tfs_cli_check_settings(struct cli *c, struct settings *s)
{
	s->uid = getuid();
	s->gid = getgid();
	s->readahead_kb = 4096;
	s->layout = TFS_LAYOUT_FLAT;
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
	/* Every path named, absolute before anything opens it: the daemon
	 * works from / once detached. */
	int rc = tfs_cli_absolute(c, 1);
	if (rc != EXIT_OK)
		return rc;
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
	struct tfs_diag d;
	if (c->logfile && tfs_log_open_file(c->logfile, &d) != TFS_OK) {
		fprintf(stderr, "tensorfs: %s\n", d.msg);
		return EXIT_USAGE;
	}
	tfs_log_verbose(c->verbose);
	if (c->layout && strcmp(c->layout, "tree") == 0) {
		s->layout = TFS_LAYOUT_TREE;
	} else if (c->layout && strcmp(c->layout, "flat") != 0) {
		fprintf(stderr, "tensorfs: -o layout= takes flat or tree, not '%s'\n", c->layout);
		return EXIT_USAGE;
	}
	/* The views' own options, each checked by its view. */
	if (tfs_views_check(&c->driver_opts, &d) != TFS_OK) {
		fprintf(stderr, "tensorfs: %s\n", d.msg);
		return EXIT_USAGE;
	}
	return EXIT_OK;
}

/* ---- what the user names: secrets and paths ---- */

static const struct tfs_opt_spec *opt_spec(const char *name, size_t len)
{
	const struct tfs_opt_spec *s = tfs_source_opt(name, len);
	return s ? s : tfs_view_opt(name, len);
}

/* The URL options' passwords in one -o list of argv, masked in place
 * (libfuse's escapes kept: "\," is not the end of a value). */
static void hide_in_list(char *s)
{
	for (char *p = s; *p;) {
		char *seg = p;
		while (*p && *p != ',')
			p += p[0] == '\\' && p[1] ? 2 : 1;
		char *eq = memchr(seg, '=', (size_t)(p - seg));
		const struct tfs_opt_spec *spec = eq ? opt_spec(seg, (size_t)(eq - seg)) : NULL;
		if (spec && (spec->kind & TFS_OPT_URL))
			tfs_url_hide_n(eq + 1, (size_t)(p - eq - 1));
		if (*p)
			p++;
	}
}

int tfs_cli_secrets(const struct cli *c, int argc, char **argv)
{
	for (int i = 1; i < argc && strcmp(argv[i], "--") != 0; i++) {
		if (strcmp(argv[i], "-o") == 0 && i + 1 < argc)
			hide_in_list(argv[++i]);
		else if (strncmp(argv[i], "-o", 2) == 0)
			hide_in_list(argv[i] + 2);
	}
	int r = 0;
	for (size_t i = 0; i < c->driver_opts.n; i++) {
		const char *k = c->driver_opts.key[i];
		const struct tfs_opt_spec *spec = opt_spec(k, strlen(k));
		if (spec && (spec->kind & TFS_OPT_URL))
			r |= tfs_url_secret(c->driver_opts.val[i]);
	}
	const struct tfs_opt_spec *e;
	for (size_t k = 0; (e = tfs_source_env_at(k)); k++)
		if ((e->kind & TFS_OPT_URL) && getenv(e->name))
			r |= tfs_url_secret(getenv(e->name));
	if (r)
		fprintf(stderr,
			"tensorfs: more than %d URLs with a user:password@: too many to keep out of messages\n",
			TFS_URL_SECRETS_MAX);
	return r ? EXIT_USAGE : EXIT_OK;
}

/* *p made absolute in place (a malloc'd string, or a copy of argv's). */
static int absolute(const char *what, char **p, int owned)
{
	char *abs;
	struct tfs_diag d;
	if (!*p || !**p)
		return 0;
	if (tfs_path_absolute(what, *p, &abs, &d)) {
		fprintf(stderr, "tensorfs: %s\n", d.msg);
		return -1;
	}
	if (owned)
		free(*p);
	*p = abs;
	return 0;
}

int tfs_cli_absolute(struct cli *c, int mount)
{
	int r = 0;
	if (tfs_source_is_path(c->source)) {
		r |= absolute("SOURCE ", (char **)&c->source, 1);
		free(c->shown);
		c->shown = strdup(c->source);
	}
	if (c->source_b && tfs_source_is_path(c->source_b)) {
		r |= absolute("B ", (char **)&c->source_b, 1);
		free(c->shown_b);
		c->shown_b = strdup(c->source_b);
	}
	if (mount || c->verify)
		r |= absolute(mount ? "MOUNTPOINT " : "MANIFEST ", &c->mountpoint, 1);
	r |= absolute("-o edits", &c->edits, 1);
	r |= absolute("-o logfile", &c->logfile, 1);
	for (size_t i = 0; i < c->driver_opts.n; i++) {
		const char *k = c->driver_opts.key[i];
		const struct tfs_opt_spec *spec = opt_spec(k, strlen(k));
		char what[80];
		snprintf(what, sizeof what, "-o %s", k);
		if (spec && (spec->kind & TFS_OPT_PATH))
			r |= absolute(what, &c->driver_opts.val[i], 1);
	}
	/* The environment the drivers read: the daemon's own copy. */
	const struct tfs_opt_spec *e;
	for (size_t k = 0; (e = tfs_source_env_at(k)); k++) {
		char *v = getenv(e->name);
		if (!(e->kind & TFS_OPT_PATH) || !v || !*v || *v == '/')
			continue;
		if (absolute(e->name, &v, 0) != 0)
			r = -1;
		else if (setenv(e->name, v, 1) != 0)
			c->nomem = 1;
		if (v != getenv(e->name))
			free(v);
	}
	if (!r && (!c->shown || (c->source_b && !c->shown_b)))
		c->nomem = 1;
	return r ? EXIT_USAGE : c->nomem ? EXIT_INTERNAL : EXIT_OK;
}

void tfs_cli_free(struct cli *c, struct fuse_cmdline_opts *fo, struct fuse_args *args)
{
	free((char *)c->source);
	free(c->shown);
	free((char *)c->source_b);
	free(c->shown_b);
	free(c->mountpoint);
	free(fo->mountpoint);
	free(c->uid);
	free(c->gid);
	free(c->layout);
	free(c->input);
	free(c->readahead);
	free(c->edits);
	free(c->logfile);
	tfs_opts_free(&c->driver_opts);
	fuse_opt_free_args(args);
}
