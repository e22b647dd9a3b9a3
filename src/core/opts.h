/* Mount options that belong to a driver (a source's or a view's): how a
 * driver declares them (struct tfs_opt_spec), how the command line hands
 * them over (struct tfs_opts), and the one parser of numbers in them. */
#ifndef TFS_OPTS_H
#define TFS_OPTS_H

#include <stddef.h>
#include <stdint.h>

#include "core/err.h"

/* Mount options that belong to drivers, of sources (-o cache_dir=...,
 * -o path_style) and of views (-o pictures), as the command line
 * collected them: key and value ("" for a flag). */
struct tfs_opts {
	char **key, **val;
	size_t n;
};

/* The value of `key`, or NULL when it was not given. */
const char *tfs_opts_get(const struct tfs_opts *o, const char *key);
/* A number in an option's value: decimal digits only (no sign, no
 * spaces), at most max; with sizes, a K, M, G or T after it (either case)
 * multiplies it by 2^10, 2^20, 2^30 or 2^40. 0, or -1 for anything else.
 * The one parser of every numeric option. */
int tfs_opt_number(const char *s, int sizes, uint64_t max, uint64_t *v);
tfs_err tfs_opts_add(struct tfs_opts *o, const char *key, size_t klen, const char *val);
void tfs_opts_free(struct tfs_opts *o);

/* What an option's value (or an environment variable) is, declared where
 * the option is: the command line then handles every such value one way,
 * before anything reads it. */
enum {
	/* A local path: made absolute against the caller's working directory
	 * before anything checks or opens it (the daemon works from /). */
	TFS_OPT_PATH = 1,
	/* A URL that may hold user:password@: the password masked in argv
	 * (/proc/PID/cmdline), the user:password@ left out of every message
	 * and log line (core/url.h). */
	TFS_OPT_URL = 2,
};

struct tfs_opt_spec {
	const char *name;
	int takes_value;
	const char *help;  /* one line for --help */
	const char *value; /* its value's name in --help (SIZE, DIR...) */
	unsigned kind;     /* TFS_OPT_PATH, TFS_OPT_URL, or 0 */
};

/* The option named name[0..len) among those at(0), at(1)... list (until
 * NULL), or NULL: the lookup of the source drivers' and the views'. */
const struct tfs_opt_spec *tfs_opt_find(const struct tfs_opt_spec *(*at)(size_t k), const char *name,
					size_t len);

#endif
