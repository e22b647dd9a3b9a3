/* The command line's options: what tensorfs takes (struct cli, parsed by
 * libfuse's option parser with tfs_cli_proc), --help, and the settings
 * they give once checked. cli/main.c runs the tools or the mount. */
#ifndef TFS_CLI_OPTIONS_H
#define TFS_CLI_OPTIONS_H

#include <stdint.h>
#include <stdio.h>

#include "fuse/fuse.h"
#include "cli/daemon.h"
#include "core/source.h"
#include "tools/tools.h"
#include "views/tree.h"

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
	char *mountpoint;   /* a copy; --verify's MANIFEST */
	int nonopt;
	int strict;
	int direct_io;
	int nosplice;
	int overmount;
	char *layout;
	char *input;
	char *readahead;
	char *edits;
	char *logfile;
	int verbose;
	char *uid, *gid;
	int bad_extra;
	const char *extra;
	const char *unknown; /* the first option (-x, --xx) nobody takes */
	int help;            /* -h, --help, -V or --version: nothing else is checked */
	/* The -o options tensorfs did not take as given (libfuse's, unknown
	 * ones, one given without the value it takes or with one it does
	 * not), in order, for tfs_cli_check_options. */
	char **odd;
	size_t nodd, odd_cap;
	int json, xxh64;
	/* The tool given (--inspect, --verify, --stats, diff), or NULL for a
	 * mount; how many different ones were given. */
	const struct tfs_tool *tool;
	int tools_given;
	unsigned given;       /* which (bits by rank, cli/options.c) */
	const char *source_b; /* diff: B, a copy as source is */
	char *shown_b;
	struct tfs_opts driver_opts; /* the source drivers' -o options */
	int nomem;
};

enum { KEY_INSPECT = 1, KEY_JSON, KEY_VERIFY, KEY_XXH64, KEY_STATS };

/* What the options say, checked. */
struct settings {
	unsigned long uid, gid, readahead_kb;
	enum tfs_layout layout;
};

extern const struct fuse_opt tfs_cli_opts[];
/* libfuse's option callback: the tools' flags, the source drivers' -o
 * options, SOURCE and MOUNTPOINT (and diff's B). */
int tfs_cli_proc(void *data, const char *arg, int key, struct fuse_args *out);
void tfs_cli_usage(FILE *f);
/* The mount's arguments and settings (after tfs_cli_check_options): EXIT_OK,
 * or EXIT_USAGE with one line said. Makes the paths absolute
 * (tfs_cli_absolute) first. */
int tfs_cli_check_settings(struct cli *c);
/* Right after parsing: the password of every URL option (TFS_OPT_URL)
 * masked in argv, and every URL's user:password@ (options and the
 * environment the drivers declare) left out of messages from now on.
 * EXIT_OK, or the exit code with one line said. */
int tfs_cli_secrets(const struct cli *c, int argc, char **argv);
/* Every path the user named made absolute against the working directory,
 * once, before anything opens it: SOURCE and B when they are local paths,
 * MOUNTPOINT (mount) or --verify's MANIFEST, -o edits=, -o logfile=, the
 * drivers' path options (TFS_OPT_PATH) and the environment variables
 * they declare as paths (set again, absolute). EXIT_OK, or the exit code
 * with one line said. */
int tfs_cli_absolute(struct cli *c, int mount);
/* The options against each other, before anything else: an unknown one,
 * a tool's flag without its tool. EXIT_OK, or EXIT_USAGE with one line. */
int tfs_cli_check_flags(const struct cli *c);
/* Every -o option, for every command, before SOURCE is looked at: each
 * name taken by tensorfs, a source driver, a view or (for a mount)
 * libfuse, with a value where it takes one (a name near a known one: "did
 * you mean"); the values of tensorfs's own and the views' (into s). The
 * source drivers check theirs first thing when SOURCE is resolved, before
 * any request. EXIT_OK, or EXIT_USAGE with one line said. */
int tfs_cli_check_options(const struct cli *c, int argc, char **argv, struct settings *s);
void tfs_cli_free(struct cli *c, struct fuse_cmdline_opts *fo, struct fuse_args *args);

#endif
