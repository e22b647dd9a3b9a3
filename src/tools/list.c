/* tensorfs --list (tools/list.h). The mounts come from /proc/self/mountinfo;
 * the PID and the counters from the daemon itself (user.pid and
 * user.counters on the mount's root), asked by a child process so that a
 * stopped or hung daemon costs a second, never a hang; the options from
 * the daemon's command line, where the secrets were masked at start. A
 * mount that another covers (-o overmount, or a mount on a directory above
 * it) cannot be asked through its path, which reaches the other: it is
 * said to be covered, never given the other's PID. */
#include "tools/list.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <sys/xattr.h>
#include <unistd.h>

#include "core/exit.h"
#include "core/err.h"
#include "core/source.h"

/* mountinfo's octal escapes (\040 for a space, \012, \011, \134) undone,
 * in place. */
static void unescape(char *s)
{
	char *w = s;
	for (char *r = s; *r; r++) {
		if (r[0] == '\\' && r[1] >= '0' && r[1] <= '3' && r[2] >= '0' && r[2] <= '7' && r[3] >= '0' &&
		    r[3] <= '7') {
			*w++ = (char)((r[1] - '0') * 64 + (r[2] - '0') * 8 + (r[3] - '0'));
			r += 3;
		} else {
			*w++ = *r;
		}
	}
	*w = 0;
}

/* In the child: the daemon's answer to the question, written to w as
 * "PID\nCOUNTERS", "-ERRNO" or "-covered". dev: the mount's device number
 * in mountinfo, which what the path reaches must have. */
_Noreturn static void ask_in_child(const char *mnt, dev_t dev, int w)
{
	char v[768];
	struct stat st;
	/* The descriptor, not the path again: what is asked is what was
	 * checked. */
	int fd = open(mnt, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (fd < 0 && errno != ENOENT && errno != ENOTDIR) {
		dprintf(w, "-%d", errno);
		_exit(0);
	}
	if (fd < 0 || fstat(fd, &st) != 0 || st.st_dev != dev) {
		dprintf(w, "-covered");
		_exit(0);
	}
	ssize_t n = fgetxattr(fd, "user.pid", v, sizeof v - 1);
	if (n < 0) {
		dprintf(w, "-%d", errno);
		_exit(0);
	}
	v[n] = 0;
	dprintf(w, "%s\n", v);
	n = fgetxattr(fd, "user.counters", v, sizeof v - 1);
	if (n > 0) {
		v[n] = 0;
		dprintf(w, "%s", v);
	}
	_exit(0);
}

/* The child's answer from r into buf (a string): its length, or -1 when
 * none came within a second. */
static long read_answer(int r, char *buf, size_t sz)
{
	size_t len = 0;
	for (;;) {
		struct pollfd pf = {.fd = r, .events = POLLIN};
		int k = poll(&pf, 1, 1000);
		if (k == 0) {
			buf[len] = 0;
			return -1;
		}
		if (k < 0 && errno == EINTR)
			continue;
		ssize_t n = k > 0 ? read(r, buf + len, sz - 1 - len) : -1;
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			break;
		len += (size_t)n;
		if (len == sz - 1)
			break;
	}
	buf[len] = 0;
	return (long)len;
}

/* What the child's answer says: 0 for "PID\nCOUNTERS", or -1 with why in
 * buf. */
static int answer_said(char *buf, size_t len, size_t sz)
{
	if (strcmp(buf, "-covered") == 0) {
		snprintf(buf, sz,
			 "covered by another mount on top of it: unmount that one first to reach this "
			 "one's daemon");
		return -1;
	}
	if (buf[0] == '-' || !len) {
		int e = len ? atoi(buf + 1) : EIO;
		snprintf(buf, sz, "%s",
			 e == ENOTCONN  ? "gone (the daemon ended: fusermount3 -u the mount point)"
			 : e == ENODATA ? "does not say its PID (a tensorfs from before --list)"
					: strerror(e));
		return -1;
	}
	return 0;
}

/* What the daemon answers: "PID\nCOUNTERS" into buf. 0, or -1 with why
 * in buf (not answering, gone, covered). dev: the mount's device number
 * in mountinfo, which what the path reaches must have. */
static int ask_daemon(const char *mnt, dev_t dev, char *buf, size_t sz)
{
	int p[2];
	if (pipe2(p, O_CLOEXEC) != 0) {
		snprintf(buf, sz, "cannot ask: %s", strerror(errno));
		return -1;
	}
	pid_t child = fork();
	if (child < 0) {
		close(p[0]);
		close(p[1]);
		snprintf(buf, sz, "cannot ask: %s", strerror(errno));
		return -1;
	}
	if (child == 0) {
		close(p[0]);
		ask_in_child(mnt, dev, p[1]);
	}
	close(p[1]);
	long len = read_answer(p[0], buf, sz);
	close(p[0]);
	if (len < 0)
		kill(child, SIGKILL);
	while (waitpid(child, NULL, 0) < 0 && errno == EINTR)
		;
	if (len < 0) {
		snprintf(buf, sz, "not answering (stopped or hung?)");
		return -1;
	}
	return answer_said(buf, (size_t)len, sz);
}

/* The -o options on the daemon's command line, joined with ','. */
static void daemon_options(const char *pid, char *out, size_t sz)
{
	char path[64], buf[8192];
	snprintf(path, sizeof path, "/proc/%ld/cmdline", atol(pid));
	*out = 0;
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return;
	ssize_t n = read(fd, buf, sizeof buf - 1);
	close(fd);
	if (n <= 0)
		return;
	buf[n] = 0;
	size_t used = 0;
	for (char *a = buf; a < buf + n; a += strlen(a) + 1) {
		const char *v = NULL;
		if (strcmp(a, "-o") == 0 && a + strlen(a) + 1 < buf + n)
			v = a + strlen(a) + 1;
		else if (strncmp(a, "-o", 2) == 0 && a[2])
			v = a + 2;
		else
			continue;
		int k = snprintf(out + used, sz - used, "%s%s", used ? "," : "", v);
		if (k < 0 || (size_t)k >= sz - used)
			break;
		used += (size_t)k;
		if (strcmp(a, "-o") == 0)
			a += strlen(a) + 1;
	}
}

int tfs_list_mounts(FILE *out)
{
	FILE *f = fopen("/proc/self/mountinfo", "re");
	if (!f) {
		fprintf(stderr, "tensorfs: /proc/self/mountinfo: %s\n", strerror(errno));
		return TFS_EXIT_INTERNAL;
	}
	char want[32];
	snprintf(want, sizeof want, "user_id=%u", (unsigned)getuid());
	char *line = NULL;
	size_t cap = 0;
	int n = 0;
	while (getline(&line, &cap, f) > 0) {
		/* ID PARENT MAJ:MIN ROOT MOUNTPOINT OPTIONS [OPTIONAL...] - TYPE SOURCE SUPER */
		char *fields[6], *save = NULL, *tok = strtok_r(line, " \n", &save);
		int k = 0;
		for (; tok && k < 6; tok = strtok_r(NULL, " \n", &save))
			fields[k++] = tok;
		while (tok && strcmp(tok, "-") != 0)
			tok = strtok_r(NULL, " \n", &save);
		char *type = tok ? strtok_r(NULL, " \n", &save) : NULL;
		char *source = type ? strtok_r(NULL, " \n", &save) : NULL;
		char *super = source ? strtok_r(NULL, " \n", &save) : NULL;
		if (k < 6 || !super || strcmp(type, "fuse.tensorfs") != 0)
			continue;
		/* user_id= is the mounting user's: only the caller's mounts. */
		int mine = 0;
		for (char *o = super; o; o = strchr(o, ',') ? strchr(o, ',') + 1 : NULL)
			if (strncmp(o, want, strlen(want)) == 0 &&
			    (o[strlen(want)] == ',' || o[strlen(want)] == 0))
				mine = 1;
		if (!mine)
			continue;
		char *mnt = fields[4];
		unescape(mnt);
		unescape(source);
		char ans[1024], qm[TFS_QPATH_MAX], qs[TFS_QPATH_MAX], opts[1024];
		unsigned maj = 0, min = 0;
		if (sscanf(fields[2], "%u:%u", &maj, &min) != 2)
			continue;
		int ok = ask_daemon(mnt, makedev(maj, min), ans, sizeof ans) == 0;
		if (!n++)
			fprintf(out, "%-8s %s\n", "PID", "MOUNTPOINT  SOURCE");
		char *counters = ok ? strchr(ans, '\n') : NULL;
		if (counters)
			*counters++ = 0;
		fprintf(out, "%-8s %s  %s\n", ok ? ans : "-", tfs_quote_path(qm, sizeof qm, mnt),
			tfs_quote_path(qs, sizeof qs, source));
		if (!ok) {
			fprintf(out, "         daemon: %s\n", ans);
			continue;
		}
		daemon_options(ans, opts, sizeof opts);
		if (*opts)
			fprintf(out, "         options: -o %s\n", tfs_quote_path(qm, sizeof qm, opts));
		if (counters && *counters && !tfs_source_is_path(source))
			fprintf(out, "         counters: %s\n", counters);
	}
	free(line);
	fclose(f);
	if (!n)
		fprintf(stderr, "tensorfs: no tensorfs mounts of user %u here\n", (unsigned)getuid());
	return TFS_EXIT_OK;
}

static int run(const struct tfs_tool_args *a)
{
	return tfs_list_mounts(a->out);
}

const struct tfs_tool tfs_tool_list = {
	.rank = 0,
	.name = "--list",
	.usage = LIST_USAGE,
	.run = run,
};
