/* Error codes and human-readable diagnostics shared by every layer.
 *
 * Internal functions return a tfs_err; only the FUSE glue turns one into an
 * errno, and only the CLI turns one into an exit status. A failing function
 * may also fill a tfs_diag with one line that says what is wrong, so that the
 * CLI can print it after "tensorfs: FILE: ". */
#ifndef TFS_ERR_H
#define TFS_ERR_H

#include <stdarg.h>
#include <stddef.h>

typedef enum tfs_err {
	TFS_OK = 0,
	TFS_ERR_NOMEM,  /* allocation failed */
	TFS_ERR_IO,     /* the source could not be read */
	TFS_ERR_SHORT,  /* the source holds fewer bytes than it did at mount */
	TFS_ERR_OPEN,   /* the source could not be opened */
	TFS_ERR_NOENT,  /* the source (or a file it names) does not exist */
	TFS_ERR_NOTREG, /* the source is not a regular file */
	TFS_ERR_FORMAT, /* the source is not a valid file of its format */
	TFS_ERR_INVAL,  /* bad argument: a source, option or value that cannot be right */
	/* Not handled here: the caller goes another way (reads instead of
	 * mapping, tries another naming). Never reaches a user. */
	TFS_ERR_UNHANDLED,
	/* What the file-system core (fs/) answers a request with: no such
	 * file in the mount, not a directory, a directory, a name no file can
	 * have, a write (the mount is read-only), no such attribute, a value
	 * larger than the caller's room, larger than any caller's, an
	 * attribute namespace the mount has none of. */
	TFS_ERR_NOFILE,
	TFS_ERR_NOTDIR,
	TFS_ERR_ISDIR,
	TFS_ERR_NAMETOOLONG,
	TFS_ERR_ROFS,
	TFS_ERR_NODATA,
	TFS_ERR_RANGE,
	TFS_ERR_TOOBIG,
	TFS_ERR_NOTSUP,
} tfs_err;

const char *tfs_err_str(tfs_err e);

#define TFS_DIAG_MAX 768

struct tfs_diag {
	char msg[TFS_DIAG_MAX];
};

/* Sets the message and returns `e`, so callers can `return tfs_fail(...)`. */
tfs_err tfs_fail(struct tfs_diag *d, tfs_err e, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
tfs_err tfs_vfail(struct tfs_diag *d, tfs_err e, const char *fmt, va_list ap);

/* One line for the log: stderr, or where the daemon sends its messages once
 * detached (tfs_log_set). For events during reads that a caller cannot
 * report itself (a remote file that changed). */
void tfs_log(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
void tfs_log_set(void (*sink)(const char *line));
/* What is going on that is no problem yet (a retry, a counter): said on
 * the terminal while the mount command is still attached to one, and in
 * the log with -o verbose; dropped without a sink. */
void tfs_log_info(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
void tfs_log_set_info(void (*sink)(const char *line));
/* What happens often and is worth a line only to someone watching closely
 * (a picture drawn): in the log with -o verbose only, never on a
 * terminal by itself; dropped without a sink. */
void tfs_log_detail(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
void tfs_log_set_detail(void (*sink)(const char *line));

/* Writes `name` as a single-quoted, printable, bounded rendering for messages:
 * bytes that could break a one-line message (control characters, C1 ones
 * included, quotes, backslashes, bytes that are not UTF-8) become \xNN and
 * long names are cut with "...". Hostile tensor
 * names must never be able to forge or split an error line. */
void tfs_quote(char *out, size_t outsz, const char *name, size_t len);

/* A path or URL the user gave, as messages show it ("tensorfs: PATH:
 * problem"): as it is when tfs_quote would change nothing in it, else
 * quoted by tfs_quote (a path holding a newline, a control character, a
 * quote, a backslash or bytes that are not UTF-8). Returns out. */
#define TFS_QPATH_MAX 640
const char *tfs_quote_path(char *out, size_t outsz, const char *path);

#endif
