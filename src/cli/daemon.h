/* Becoming a mount: the mount point's checks, detaching once the mount
 * answers, the mount's readahead, and where messages go once detached. */
#ifndef TFS_DAEMON_H
#define TFS_DAEMON_H

#include <pthread.h>

#include "fuse/fuse.h"

#include "core/exit.h"

/* libfuse's log function: one line per message, prefixed, to stderr, or
 * to syslog once the daemon has detached. */
void tfs_log_cb(enum fuse_log_level level, const char *fmt, va_list ap);
/* -d: let libfuse's debug lines through too. */
void tfs_log_debug(int on);
/* -o verbose: info lines too. */
void tfs_log_verbose(int on);
/* -o logfile=PATH: every line appended there. Opened as
 * tfs_file_append opens (not through a link, only the mounting user's
 * own regular file, made 0600), or one line in d. */
tfs_err tfs_log_open_file(const char *path, struct tfs_diag *d);
/* The core's info sink (tfs_log_set_info): the terminal while the mount
 * command has one, else the log with -o verbose. */
void tfs_log_info_line(const char *line);
/* tfs_log_detail's sink: -o verbose only. */
void tfs_log_detail_line(const char *line);
/* One line of the mount's sources' counters, "WHY: requests=N ...", always. */
void tfs_log_counters(struct tfs_sources *ss, const char *why);

/* Checks the mount point and returns its absolute, symlink-free path, or
 * NULL after one line on stderr. */
char *tfs_check_mountpoint(const char *mp, int overmount);

struct tfs_ready {
	char *mountpoint;            /* absolute: the daemon leaves the caller's cwd */
	struct tfs_sources *sources; /* the mount's, started after INIT */
	unsigned long readahead_kb;
	int notify_fd; /* write end of the parent's pipe, or -1 */
};

/* The first request after INIT: applies the readahead. */
void tfs_after_init(void *ready);

/* The helper thread of a detaching daemon: waits until the mount answers,
 * then tells the waiting parent and leaves the terminal. */
void *tfs_ready_thread(void *ready);

/* Watches the session from a thread: once it ends (a signal, an unmount),
 * the sources stop their transfers, so that a read waiting on a dead
 * server cannot hold up the exit (libfuse waits for its workers). Start it
 * with the signals blocked. */
struct tfs_watch {
	struct fuse_session *se;
	struct tfs_sources *sources; /* the mount's, stopped at its end */
	int done;
	pthread_t th;
};
int tfs_watch_start(struct tfs_watch *w, struct fuse_session *se, struct tfs_sources *ss);
void tfs_watch_end(struct tfs_watch *w);

/* Forks; the parent waits for the child's word and exits with it. Returns
 * the write end of the pipe in the child, -1 on failure. */
int tfs_daemonize(void);

/* Before libfuse's handlers are set, for a mount that will detach: SIGHUP,
 * SIGINT and SIGTERM, if ignored, back to their default, so that libfuse
 * (which leaves an ignored signal ignored) handles them. */
void tfs_signals_detached(void);

#endif
