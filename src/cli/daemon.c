#include "cli/daemon.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <time.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <paths.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/un.h>
#include <syslog.h>
#include <unistd.h>

#include "core/userfile.h"

/* Once detached the daemon has no terminal: its warnings go to syslog. */
static int log_syslog;
/* -d: libfuse's debug lines (every request and reply) go out too. */
static int log_debug;
/* -o verbose: info lines too (retries, the counters at unmount). */
static int log_verbose;
/* -o logfile=PATH: every line there, with a time, instead of syslog. */
static FILE *log_file;
static pthread_mutex_t log_lock = PTHREAD_MUTEX_INITIALIZER;

void tfs_log_debug(int on)
{
	log_debug = on;
}

void tfs_log_verbose(int on)
{
	log_verbose = on;
}

tfs_err tfs_log_open_file(const char *path, struct tfs_diag *d)
{
	int fd;
	tfs_err e = tfs_file_append("-o logfile", path, &fd, d);
	if (e)
		return e;
	FILE *f = fdopen(fd, "a");
	if (!f) {
		close(fd);
		return tfs_fail(d, TFS_ERR_NOMEM, "out of memory");
	}
	setvbuf(f, NULL, _IOLBF, 0);
	log_file = f;
	return TFS_OK;
}

/* One line out: the log file, syslog once detached, or stderr. */
static void emit(int prio, const char *m)
{
	pthread_mutex_lock(&log_lock);
	if (log_file) {
		char ts[32];
		time_t now = time(NULL);
		struct tm tm;
		strftime(ts, sizeof ts, "%Y-%m-%dT%H:%M:%S%z", localtime_r(&now, &tm));
		fprintf(log_file, "%s tensorfs[%d]: %s\n", ts, (int)getpid(), m);
	} else if (log_syslog) {
		syslog(prio, "%s", m);
	} else {
		fprintf(stderr, "tensorfs: %s\n", m);
	}
	pthread_mutex_unlock(&log_lock);
}

void tfs_log_info_line(const char *line)
{
	/* The mount command on a terminal says what it is waiting for
	 * (a server that does not answer); later only -o verbose does. */
	if (!log_syslog && !log_file && isatty(2))
		emit(LOG_INFO, line);
	else if (log_verbose)
		emit(LOG_INFO, line);
}

void tfs_log_detail_line(const char *line)
{
	if (log_verbose)
		emit(LOG_INFO, line);
}

void tfs_log_counters(struct tfs_sources *ss, const char *why)
{
	struct tfs_counters c;
	char line[640];
	int n = snprintf(line, sizeof line, "%s: ", why);
	tfs_sources_counters(ss, &c);
	tfs_counters_line(&c, line + n, sizeof line - (size_t)n);
	emit(LOG_NOTICE, line);
}

/* libfuse prints its own messages, sometimes a line in several calls:
 * gather each line (per thread: ten workers log at once) and print it
 * once with our prefix, one line at a time. */
void tfs_log_cb(enum fuse_log_level level, const char *fmt, va_list ap)
{
	static _Thread_local char line[1024];
	static _Thread_local size_t len;
	if (level > FUSE_LOG_NOTICE && !(log_debug && level == FUSE_LOG_DEBUG) &&
	    !(log_verbose && level == FUSE_LOG_INFO))
		return;
	if (len < sizeof line - 1)
		vsnprintf(line + len, sizeof line - len, fmt, ap);
	len = strlen(line);
	if (!len || line[len - 1] != '\n')
		return;
	if (level == FUSE_LOG_DEBUG) {
		/* libfuse's own trace, as it writes it (sshfs -d shows the
		 * same), to stderr: -d keeps the daemon in the foreground. */
		pthread_mutex_lock(&log_lock);
		fputs(line, stderr);
		fflush(stderr);
		pthread_mutex_unlock(&log_lock);
		len = 0;
		line[0] = 0;
		return;
	}
	while (len && line[len - 1] == '\n')
		line[--len] = 0;
	for (char *p = line; *p; p++)
		if (*p == '\n')
			*p = ' ';
	const char *m = strncmp(line, "fuse: ", 6) == 0 ? line + 6 : line;
	if (strncmp(m, "tensorfs: ", 10) == 0)
		m += 10;
	/* libfuse's words for a /dev/fuse the user may not open: say how to
	 * fix it (Debian makes it 0666; a container may not pass it on). */
	char fixed[sizeof line + 200];
	if (strstr(m, "/dev/fuse") && strstr(m, "Permission denied")) {
		snprintf(
			fixed, sizeof fixed,
			"%s (the user must be able to read and write /dev/fuse: Debian makes it 0666, "
			"chmod 0666 /dev/fuse as root; in a container, pass the device, docker run --device /dev/fuse)",
			m);
		m = fixed;
	}
	emit(level <= FUSE_LOG_ERR ? LOG_ERR : level >= FUSE_LOG_INFO ? LOG_INFO : LOG_WARNING, m);
	len = 0;
	line[0] = 0;
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
		if (p[0] == '\\' && p[1] >= '0' && p[1] <= '3' && p[2] >= '0' && p[2] <= '7' && p[3] >= '0' &&
		    p[3] <= '7') {
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

static void dead_mount(const char *q)
{
	fprintf(stderr,
		"tensorfs: %s: transport endpoint is not connected (a tensorfs that died?); clear it with: fusermount3 -u %s\n",
		q, q);
}

/* Checks the mount point and returns its absolute, symlink-free path, or
 * NULL after one line on stderr. Everything the daemon keeps must be
 * absolute: it leaves the caller's working directory when it detaches, and
 * unmounting (at a signal) goes through this path. */
char *tfs_check_mountpoint(const char *mp, int overmount)
{
	char q[TFS_QPATH_MAX]; /* mp as messages show it */
	tfs_quote_path(q, sizeof q, mp);
	struct stat st;
	if (stat(mp, &st) != 0) {
		int e = errno;
		if (e == ENOTCONN || e == ECONNABORTED)
			dead_mount(q);
		else if (e == ENOENT)
			fprintf(stderr, "tensorfs: %s: mount point does not exist\n", q);
		else
			fprintf(stderr, "tensorfs: %s: cannot use as mount point: %s\n", q, strerror(e));
		return NULL;
	}
	if (!S_ISDIR(st.st_mode)) {
		fprintf(stderr, "tensorfs: %s: mount point is not a directory\n", q);
		return NULL;
	}
	/* A FUSE mount whose daemon died still answers stat() from the
	 * kernel's cache; statfs always asks, and tells (ENOTCONN, or
	 * ECONNABORTED on kernels that report an aborted connection so). */
	struct statvfs sv;
	if (statvfs(mp, &sv) != 0 && (errno == ENOTCONN || errno == ECONNABORTED)) {
		dead_mount(q);
		return NULL;
	}
	char *abs = realpath(mp, NULL);
	if (!abs) {
		fprintf(stderr, "tensorfs: %s: cannot use as mount point: %s\n", q, strerror(errno));
		return NULL;
	}
	/* Mounting again on a mount point stacks a second mount that hides
	 * the first, and takes two unmounts to clear: refuse unless asked. */
	char what[512];
	if (!overmount && mountinfo_find(abs, NULL, NULL, what, sizeof what)) {
		fprintf(stderr,
			"tensorfs: %s: already a mount point (%s); unmount it first, or pass -o overmount to mount on top of it\n",
			q, what);
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
				q);
		closedir(dir);
	}
	/* Unprivileged mounts go through the setuid fusermount3, which opens
	 * the device itself: only root needs to open it here. */
	if (access("/dev/fuse", getuid() == 0 ? (R_OK | W_OK) : F_OK) != 0) {
		fprintf(stderr,
			"tensorfs: /dev/fuse: %s (is the fuse module loaded, and is this a container without /dev/fuse?)\n",
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

void tfs_after_init(void *arg)
{
	struct tfs_ready *r = arg;
	if (r->readahead_kb)
		set_readahead(r->mountpoint, r->readahead_kb);
	/* In the process that serves the mount, after any fork. */
	tfs_sources_start(r->sources);
}

/* SIGUSR1 asks for the counters in the log, as rclone's stats; the
 * handler only sets this, the watch thread writes the line. */
static volatile sig_atomic_t usr1;

static void on_usr1(int sig)
{
	(void)sig;
	usr1 = 1;
}

static void *watch(void *arg)
{
	struct tfs_watch *w = arg;
	struct timespec tick = {0, 100 * 1000 * 1000};
	while (!__atomic_load_n(&w->done, __ATOMIC_ACQUIRE) && !fuse_session_exited(w->se)) {
		nanosleep(&tick, NULL);
		if (usr1) {
			usr1 = 0;
			tfs_log_counters(w->sources, "counters (SIGUSR1)");
		}
	}
	tfs_sources_stop(w->sources);
	if (log_verbose)
		tfs_log_counters(w->sources, "counters at unmount");
	return NULL;
}

int tfs_watch_start(struct tfs_watch *w, struct fuse_session *se, struct tfs_sources *ss)
{
	w->se = se;
	w->sources = ss;
	w->done = 0;
	struct sigaction sa;
	memset(&sa, 0, sizeof sa);
	sa.sa_handler = on_usr1;
	sigemptyset(&sa.sa_mask);
	sa.sa_flags = SA_RESTART;
	sigaction(SIGUSR1, &sa, NULL);
	return pthread_create(&w->th, NULL, watch, w);
}

void tfs_watch_end(struct tfs_watch *w)
{
	__atomic_store_n(&w->done, 1, __ATOMIC_RELEASE);
	pthread_join(w->th, NULL);
}

/* Whether syslog() reaches anyone: something listens on /dev/log (glibc
 * tries a datagram socket, then a stream one). In a container without it
 * every line is dropped in silence. */
static int syslog_here(void)
{
	struct sockaddr_un a = {.sun_family = AF_UNIX};
	snprintf(a.sun_path, sizeof a.sun_path, "%s", _PATH_LOG);
	static const int types[] = {SOCK_DGRAM, SOCK_STREAM};
	for (size_t i = 0; i < sizeof types / sizeof *types; i++) {
		int fd = socket(AF_UNIX, types[i] | SOCK_CLOEXEC, 0);
		int ok = fd >= 0 && connect(fd, (struct sockaddr *)&a, sizeof a) == 0;
		if (fd >= 0)
			close(fd);
		if (ok)
			return 1;
	}
	return 0;
}

/* The log of a daemon with no syslog and no -o logfile: the user's state
 * directory, as the XDG Base Directory spec puts logs ($XDG_STATE_HOME,
 * absolute, else ~/.local/state), each directory made 0700 as it asks; a
 * file that outlives the mount and the login, where $XDG_RUNTIME_DIR would
 * not (and is unset in most containers, where this matters). Opened by the
 * one safe open for appending; one line in d when there is no place. */
#define STATE_LOG "tensorfs/tensorfs.log"
/* At mount, a log over this is moved to NAME.1 (replacing it). */
#define STATE_LOG_MAX (16u << 20)

static tfs_err open_state_log(char *path, size_t psz, struct tfs_diag *d)
{
	const char *st = getenv("XDG_STATE_HOME"), *home = getenv("HOME");
	size_t from; /* where the directories to make start: never $HOME itself */
	int n;
	if (st && st[0] == '/') {
		n = snprintf(path, psz, "%s/" STATE_LOG, st);
		from = 1;
	} else if (home && home[0] == '/') {
		n = snprintf(path, psz, "%s/.local/state/" STATE_LOG, home);
		from = strlen(home) + 1;
	} else {
		return tfs_fail(d, TFS_ERR_INVAL, "and no $XDG_STATE_HOME or $HOME for a log");
	}
	if (n < 0 || (size_t)n >= psz)
		return tfs_fail(d, TFS_ERR_INVAL, "and $XDG_STATE_HOME or $HOME is too long for a log");
	for (char *p = strchr(path + from, '/'); p; p = strchr(p + 1, '/')) {
		*p = 0;
		int r = mkdir(path, 0700);
		*p = '/';
		if (r != 0 && errno != EEXIST)
			break; /* (the open below says why) */
	}
	int fd;
	struct stat sb;
	struct tfs_diag od;
	tfs_err e = tfs_file_append("log ", path, &fd, &od);
	if (!e && fstat(fd, &sb) == 0 && (uint64_t)sb.st_size > STATE_LOG_MAX) {
		char old[4300];
		snprintf(old, sizeof old, "%s.1", path);
		close(fd);
		if (rename(path, old) != 0) {
			char q[TFS_QPATH_MAX];
			return tfs_fail(d, TFS_ERR_OPEN, "and the log %s is over 16 MiB: %s",
					tfs_quote_path(q, sizeof q, path), strerror(errno));
		}
		e = tfs_file_append("log ", path, &fd, &od);
	}
	if (e)
		return tfs_fail(d, e, "and the %s", od.msg);
	FILE *f = fdopen(fd, "a");
	if (!f) {
		close(fd);
		return tfs_fail(d, TFS_ERR_NOMEM, "out of memory");
	}
	setvbuf(f, NULL, _IOLBF, 0);
	/* (the workers may be logging already) */
	pthread_mutex_lock(&log_lock);
	log_file = f;
	pthread_mutex_unlock(&log_lock);
	return TFS_OK;
}

/* Where the detached daemon's lines go when there is no -o logfile:
 * syslog, or the state directory's log; the one warning when neither can
 * take them, while the mount command still has its terminal. */
static void detached_log(void)
{
	char path[4200];
	struct tfs_diag d;
	if (log_file || syslog_here() || !open_state_log(path, sizeof path, &d))
		return;
	fprintf(stderr,
		"tensorfs: warning: no syslog here (" _PATH_LOG
		"), %s: the daemon's messages are lost; give -o logfile=PATH\n",
		d.msg);
}

void *tfs_ready_thread(void *arg)
{
	struct tfs_ready *r = arg;
	/* The open is the daemon's first request, which applies the
	 * readahead before it is answered. */
	int fd = open(r->mountpoint, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	unsigned char status = fd >= 0 ? 0 : TFS_EXIT_MOUNT;
	if (fd >= 0)
		close(fd);
	if (r->notify_fd >= 0) {
		/* Said while the terminal is still there. */
		if (fd >= 0)
			detached_log();
		/* The parent has printed nothing and exits with `status`; from
		 * here on the daemon has no terminal. */
		ssize_t w = write(r->notify_fd, &status, 1);
		(void)w;
		close(r->notify_fd);
		if (!log_file)
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

/* nohup, a shell without job control (SIGINT for `cmd &`), some service
 * managers and CI runners start programs with these ignored, to outlive a
 * terminal's hangup or an interrupt meant for someone else. The detached
 * daemon has left that terminal (setsid): no hangup or interrupt of it
 * can reach it, only a kill meant for it, and these three are the
 * documented ways to unmount. In the foreground (-f) it is still the
 * caller's, and keeps what it was given, as every libfuse server does. */
void tfs_signals_detached(void)
{
	static const int sigs[] = {SIGHUP, SIGINT, SIGTERM};
	for (size_t i = 0; i < sizeof sigs / sizeof *sigs; i++) {
		struct sigaction old;
		if (sigaction(sigs[i], NULL, &old) == 0 && old.sa_handler == SIG_IGN)
			signal(sigs[i], SIG_DFL);
	}
}

int tfs_daemonize(void)
{
	int pfd[2];
	if (pipe(pfd) != 0)
		return -1;
	pid_t pid = fork();
	if (pid < 0)
		return -1;
	if (pid > 0) {
		unsigned char status = TFS_EXIT_INTERNAL;
		close(pfd[1]);
		if (read(pfd[0], &status, 1) != 1)
			status = TFS_EXIT_INTERNAL; /* the daemon died before ready */
		_exit(status);
	}
	close(pfd[0]);
	setsid();
	if (chdir("/") != 0) {
		/* not fatal: only keeps the caller's directory busy */
	}
	return pfd[1];
}
