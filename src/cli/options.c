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
#include "core/table.h"
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

/* A copy of SOURCE, and the original in argv with the user:password@ of a
 * URL (or TOKEN@) overwritten: the daemon's /proc/PID/cmdline is readable
 * by every local user for the life of the mount. */
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

/* A tool named on the command line (tools/registry.c). Two different ones
 * are said later (cli/main.c), under the name and usage of the one that
 * ranks first (struct tfs_tool, rank). */
static void set_tool(struct cli *c, const struct tfs_tool *t)
{
	if (!(c->given & (1u << t->rank)))
		c->tools_given++;
	c->given |= 1u << t->rank;
	if (!c->tool || t->rank > c->tool->rank)
		c->tool = t;
}

/* An option that starts with a dash: of these, libfuse's command line
 * takes some (--help lists them); any other is a mistake to say at once,
 * before the source is looked at. */
static int dash_option(struct cli *c, const char *arg)
{
	static const char *const fuse_cmdline[] = {"-h", "--help", "-V", "--version", "-d", "-f", "-s", NULL};
	for (const char *const *f = fuse_cmdline; *f; f++)
		if (strcmp(arg, *f) == 0) {
			c->help |= f - fuse_cmdline < 4;
			return 1;
		}
	if (!c->unknown)
		c->unknown = arg;
	return 0;
}

/* An -o option: a source driver's or a view's is theirs; the rest go on
 * to libfuse, which refuses what it does not know. */
static int o_option(struct cli *c, const char *arg)
{
	const char *eq = strchr(arg, '=');
	size_t klen = eq ? (size_t)(eq - arg) : strlen(arg);
	/* libfuse would take it and the kernel mount would stay read-only:
	 * say so rather than accept it in silence. */
	if (strcmp(arg, "rw") == 0) {
		fprintf(stderr, "tensorfs: -o rw: the mount is read-only (the source is never written); "
				"say ro (in an fstab line: ro, as defaults means rw)\n");
		return -1;
	}
	const struct tfs_opt_spec *spec = tfs_source_opt(arg, klen);
	if (!spec)
		spec = tfs_view_opt(arg, klen);
	if (!spec || spec->takes_value != (eq != NULL)) {
		/* libfuse's, or a mistake: tfs_cli_check_options says which
		 * before anything is opened. */
		char *copy = strdup(arg);
		if (!copy || tfs_grow((void **)&c->odd, &c->odd_cap, c->nodd + 1, sizeof *c->odd))
			c->nomem = 1;
		else
			c->odd[c->nodd++] = copy;
		if (c->nomem)
			free(copy);
		return spec ? 0 : 1;
	}
	if (tfs_opts_add(&c->driver_opts, arg, klen, eq ? eq + 1 : NULL))
		c->nomem = 1;
	return 0;
}

/* A word that is no option: a tool's name, a SOURCE, the mount point. */
static int non_option(struct cli *c, const char *arg)
{
	/* tensorfs diff A B (a SOURCE named diff is ./diff) */
	if (c->nonopt == 0 && c->tool != tfs_tool_named("diff") && strcmp(arg, "diff") == 0) {
		set_tool(c, tfs_tool_named("diff"));
		return 0;
	}
	if (c->nonopt == 1 && c->tool && c->tool->sources == 2) {
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

int tfs_cli_proc(void *data, const char *arg, int key, struct fuse_args *out)
{
	struct cli *c = data;
	(void)out;
	if (key == KEY_STATS || key == KEY_INSPECT || key == KEY_VERIFY) {
		set_tool(c, tfs_tool_named(key == KEY_STATS     ? "--stats"
					   : key == KEY_INSPECT ? "--inspect"
								: "--verify"));
		return 0;
	}
	if (key == KEY_JSON || key == KEY_XXH64) {
		*(key == KEY_JSON ? &c->json : &c->xxh64) = 1;
		return 0;
	}
	if (key == FUSE_OPT_KEY_OPT)
		return arg[0] == '-' ? dash_option(c, arg) : o_option(c, arg);
	if (key != FUSE_OPT_KEY_NONOPT)
		return 1;
	return non_option(c, arg);
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

/* ---- one check of every option ---- */

/* The edit distance of a and b (a letter put in, left out, changed, or
 * two swapped), or more than `most` when it is. */
static size_t distance(const char *a, size_t al, const char *b, size_t bl, size_t most)
{
	size_t d[3][66];
	if (al > 64 || bl > 64 || (al > bl ? al - bl : bl - al) > most)
		return most + 1;
	for (size_t j = 0; j <= bl; j++)
		d[0][j] = j;
	for (size_t i = 1; i <= al; i++) {
		size_t *r = d[i % 3], *p = d[(i - 1) % 3], *pp = d[(i + 1) % 3];
		r[0] = i;
		for (size_t j = 1; j <= bl; j++) {
			size_t v = p[j - 1] + (a[i - 1] != b[j - 1]);
			v = p[j] + 1 < v ? p[j] + 1 : v;
			v = r[j - 1] + 1 < v ? r[j - 1] + 1 : v;
			if (i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1] &&
			    pp[j - 2] + 1 < v)
				v = pp[j - 2] + 1;
			r[j] = v;
		}
	}
	return d[al % 3][bl];
}

/* libfuse's options (fuse_session_new's and fuse_parse_cmdline's), for
 * "did you mean" alone: whether libfuse takes one is asked of libfuse. */
static const char *const fuse_names[] = {"allow_other", "allow_root", "auto_unmount", "default_permissions",
					 "fsname=",     "subtype=",   "max_read=",    "blkdev",
					 "blksize=",    "ro",         "nosuid",       "nodev",
					 "noexec",      "noatime",    "nodiratime",   "relatime",
					 "strictatime", "lazytime",   "dirsync",      "sync",
					 "debug",       "clone_fd",   "max_threads=", "max_idle_threads=",
					 NULL};

/* A name that takes a value ends in '='. */
struct known {
	char name[64];
	const char *value; /* its value's name, for messages */
};

/* The k-th option of a source driver or a view, NULL past the last. */
static const struct tfs_opt_spec *driver_opt_at(size_t k)
{
	size_t j = 0;
	while (j < k && tfs_source_opt_at(j))
		j++;
	return j == k && tfs_source_opt_at(j) ? tfs_source_opt_at(j) : tfs_view_opt_at(k - j);
}

/* The k-th option name anyone takes: tensorfs's, the sources', the views',
 * libfuse's; 0 past the last. */
static int known_at(size_t k, struct known *o)
{
	for (const struct fuse_opt *f = tfs_cli_opts; f->templ; f++)
		if (f->templ[0] != '-' && k-- == 0) {
			size_t n = strcspn(f->templ, "=");
			snprintf(o->name, sizeof o->name, "%.*s%s", (int)n, f->templ, f->templ[n] ? "=" : "");
			o->value = strncmp(f->templ, "layout=", 7) == 0    ? "flat|tree"
				   : strncmp(f->templ, "input=", 6) == 0   ? "FORMAT"
				   : strncmp(f->templ, "edits=", 6) == 0   ? "FILE"
				   : strncmp(f->templ, "logfile=", 8) == 0 ? "PATH"
									   : "N";
			return 1;
		}
	size_t n = 0;
	const struct tfs_opt_spec *sp;
	while ((sp = driver_opt_at(n)) && n < k)
		n++;
	if (sp) {
		snprintf(o->name, sizeof o->name, "%s%s", sp->name, sp->takes_value ? "=" : "");
		o->value = sp->value ? sp->value : "VALUE";
		return 1;
	}
	for (const char *const *f = fuse_names; *f; f++)
		if (n++ == k) {
			snprintf(o->name, sizeof o->name, "%s", *f);
			o->value = "VALUE";
			return 1;
		}
	return 0;
}

/* The known option nearest name[0..len), or 0: one or two letters off, and
 * fewer than half of its letters. */
static int nearest(const char *name, size_t len, struct known *out)
{
	size_t best = 3;
	struct known o;
	for (size_t k = 0; known_at(k, &o); k++) {
		size_t ol = strcspn(o.name, "=");
		size_t dd = distance(name, len, o.name, ol, 2);
		if (dd && dd < best && 2 * dd < ol) {
			best = dd;
			*out = o;
		}
	}
	return best < 3;
}

/* The known option named name[0..len), or 0. */
static int known(const char *name, size_t len, struct known *out)
{
	for (size_t k = 0; known_at(k, out); k++)
		if (strcspn(out->name, "=") == len && memcmp(out->name, name, len) == 0)
			return 1;
	return 0;
}

static void quiet_log(enum fuse_log_level level, const char *fmt, va_list ap)
{
	(void)level;
	(void)fmt;
	(void)ap;
}

/* Whether libfuse takes -o opt for a mount: a session made with it alone
 * and dropped (fuse_session_new opens nothing and mounts nothing), so
 * that every libfuse has its own say. */
static int fuse_takes(const char *opt)
{
	static const struct fuse_lowlevel_ops none;
	struct fuse_args a = FUSE_ARGS_INIT(0, NULL);
	struct fuse_cmdline_opts fo;
	memset(&fo, 0, sizeof fo);
	fuse_set_log_func(quiet_log);
	int ok = fuse_opt_add_arg(&a, "tensorfs") == 0 && fuse_opt_add_arg(&a, "-o") == 0 &&
		 fuse_opt_add_arg(&a, opt) == 0 && fuse_parse_cmdline(&a, &fo) == 0;
	free(fo.mountpoint);
	struct fuse_session *se = ok ? fuse_session_new(&a, &none, sizeof none, NULL) : NULL;
	if (se)
		fuse_session_destroy(se);
	fuse_opt_free_args(&a);
	fuse_set_log_func(tfs_log_cb);
	return se != NULL;
}

/* The word after the -o list that ends with `opt` (-o layout tree), or
 * NULL. */
static const char *word_after(const char *opt, int argc, char **argv)
{
	for (int i = 1; i < argc && strcmp(argv[i], "--") != 0; i++) {
		const char *list = strcmp(argv[i], "-o") == 0 && i + 1 < argc ? argv[i + 1]
				   : strncmp(argv[i], "-o", 2) == 0           ? argv[i] + 2
									      : NULL;
		if (!list)
			continue;
		int next = list == argv[i] + 2 ? i + 1 : i + 2;
		size_t n = strlen(list), o = strlen(opt);
		if (n >= o && strcmp(list + n - o, opt) == 0 && (n == o || list[n - o - 1] == ',') &&
		    next < argc && argv[next][0] != '-')
			return argv[next];
		if (list != argv[i] + 2)
			i++;
	}
	return NULL;
}

/* How many arguments the command takes at most (SOURCE MOUNTPOINT...). */
static int args_max(const struct cli *c)
{
	return c->tool ? (int)c->tool->args_max : 2;
}

/* One -o option tensorfs did not take as given: EXIT_OK (libfuse's, for
 * a mount) or EXIT_USAGE with one line. */
static int check_odd(const struct cli *c, const char *opt, int argc, char **argv)
{
	const char *eq = strchr(opt, '=');
	size_t len = eq ? (size_t)(eq - opt) : strlen(opt);
	int tool = c->tool != NULL;
	struct known k;
	int is_known = known(opt, len, &k), takes = is_known && k.name[strlen(k.name) - 1] == '=';
	if (takes && !eq) {
		const char *w = c->nonopt > args_max(c) ? word_after(opt, argc, argv) : NULL;
		if (w)
			fprintf(stderr, "tensorfs: -o %s %s: an option's value follows '=' (-o %s=%s)\n", opt,
				w, opt, w);
		else
			fprintf(stderr, "tensorfs: -o %s takes a value (-o %s=%s)\n", opt, opt, k.value);
		return EXIT_USAGE;
	}
	if (is_known && !takes && eq) {
		fprintf(stderr, "tensorfs: -o %.*s takes no value (-o %.*s)\n", (int)len, opt, (int)len, opt);
		return EXIT_USAGE;
	}
	if (fuse_takes(opt)) {
		if (!tool)
			return EXIT_OK;
		fprintf(stderr, "tensorfs: -o %s is a mount option: %s mounts nothing\n", opt, c->tool->name);
		return EXIT_USAGE;
	}
	if (is_known) /* libfuse's, with a value it refuses */
		fprintf(stderr, "tensorfs: -o %s: libfuse refuses this value (see tensorfs --help)\n", opt);
	else if (nearest(opt, len, &k))
		fprintf(stderr,
			"tensorfs: unknown option '-o %s': did you mean '-o %.*s%s'? (see tensorfs --help)\n",
			opt, (int)strcspn(k.name, "="), k.name,
			eq && k.name[strlen(k.name) - 1] == '=' ? eq : "");
	else
		fprintf(stderr, "tensorfs: unknown option '-o %s' (see tensorfs --help)\n", opt);
	return EXIT_USAGE;
}

int tfs_cli_check_flags(const struct cli *c)
{
	int tool = c->tool != NULL;
	if (c->unknown) {
		static const char *const flags[] = {"--inspect", "--verify", "--stats",   "--json", "--xxh64",
						    "--list",    "--help",   "--version", NULL};
		const char *near = NULL;
		size_t ul = strlen(c->unknown);
		for (const char *const *f = flags; *f && !near && ul > 3; f++)
			if (distance(c->unknown, ul, *f, strlen(*f), 2) <= 2)
				near = *f;
		if (near)
			fprintf(stderr,
				"tensorfs: unknown option '%s': did you mean '%s'? (see tensorfs --help)\n",
				c->unknown, near);
		else
			fprintf(stderr, "tensorfs: unknown option '%s' (see tensorfs --help)\n", c->unknown);
		return EXIT_USAGE;
	}
	if (c->json && !tool) {
		fprintf(stderr,
			"tensorfs: --json goes with --inspect, --verify, --stats or diff; a mount has no output "
			"to format\n");
		return EXIT_USAGE;
	}
	if (c->xxh64 && c->tool != tfs_tool_named("--verify")) {
		fprintf(stderr, "tensorfs: --xxh64 goes with --verify\n");
		return EXIT_USAGE;
	}
	return EXIT_OK;
}

int tfs_cli_check_options(const struct cli *c, int argc, char **argv, struct settings *s)
{
	s->uid = getuid();
	s->gid = getgid();
	s->readahead_kb = 4096;
	s->layout = TFS_LAYOUT_FLAT;
	for (size_t k = 0; k < c->nodd; k++) {
		int rc = check_odd(c, c->odd[k], argc, argv);
		if (rc != EXIT_OK)
			return rc;
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
	if (c->layout && strcmp(c->layout, "tree") == 0) {
		s->layout = TFS_LAYOUT_TREE;
	} else if (c->layout && strcmp(c->layout, "flat") != 0) {
		fprintf(stderr, "tensorfs: -o layout= takes flat or tree, not '%s'\n", c->layout);
		return EXIT_USAGE;
	}
	if (c->input && !tfs_format_find(c->input)) {
		fprintf(stderr, "tensorfs: -o input= takes one of %s, not '%s'\n", tfs_format_names(),
			c->input);
		return EXIT_USAGE;
	}
	/* The views' own options, each checked by its view. */
	struct tfs_diag d;
	if (tfs_views_check(&c->driver_opts, &d) != TFS_OK) {
		fprintf(stderr, "tensorfs: %s\n", d.msg);
		return EXIT_USAGE;
	}
	return EXIT_OK;
}

int tfs_cli_check_settings(struct cli *c)
{
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
	return EXIT_OK;
}

/* ---- what the user names: secrets and paths ---- */

static const struct tfs_opt_spec *opt_spec(const char *name, size_t len)
{
	const struct tfs_opt_spec *s = tfs_source_opt(name, len);
	return s ? s : tfs_view_opt(name, len);
}

/* The URL options' user:password@ in one -o list of argv, masked in place
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
	if (mount || (c->tool && c->tool->manifest))
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
	for (size_t k = 0; k < c->nodd; k++)
		free(c->odd[k]);
	free(c->odd);
	fuse_opt_free_args(args);
}
