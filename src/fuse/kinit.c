#include "fuse/kinit.h"

#include <fcntl.h>
#include <linux/fuse.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <sys/uio.h>
#include <unistd.h>

#define FUSE_USE_VERSION 312
#include <fuse_lowlevel.h>

/* FUSE_DIRECT_IO_ALLOW_MMAP is 1 << 36, which travels as bit 4 of flags2;
 * Debian 12's <linux/fuse.h> (protocol 7.38) predates it. */
#define KINIT_DIO_MMAP_FLAGS2 (1u << 4)

/* One session per process. The kernel sends nothing but INIT until INIT
 * is answered, so these change only while one thread handles INIT. */
static _Atomic uint64_t init_unique; /* 0: no offer pending */
static atomic_bool init_seen;
static atomic_bool dio_mmap;

static void note_init(const char *buf, size_t n)
{
	struct fuse_in_header h;
	struct fuse_init_in in;
	if (n < sizeof h)
		return;
	memcpy(&h, buf, sizeof h);
	if (h.opcode != FUSE_INIT)
		return;
	atomic_store(&init_seen, true);
	/* flags2 exists only in the extended request (protocol 7.36+). */
	if (n < sizeof h + offsetof(struct fuse_init_in, flags2) + sizeof in.flags2)
		return;
	memset(&in, 0, sizeof in);
	memcpy(&in, buf + sizeof h, n - sizeof h < sizeof in ? n - sizeof h : sizeof in);
	if ((in.flags & FUSE_INIT_EXT) && (in.flags2 & KINIT_DIO_MMAP_FLAGS2))
		atomic_store(&init_unique, h.unique);
}

static ssize_t kinit_read(int fd, void *buf, size_t len, void *userdata)
{
	(void)userdata;
	ssize_t n = read(fd, buf, len);
	if (n > 0 && !atomic_load_explicit(&init_seen, memory_order_relaxed))
		note_init(buf, (size_t)n);
	return n;
}

static ssize_t kinit_writev(int fd, struct iovec *iov, int count, void *userdata)
{
	(void)userdata;
	uint64_t want = atomic_load_explicit(&init_unique, memory_order_relaxed);
	if (!want || count != 2 || iov[0].iov_len != sizeof(struct fuse_out_header) ||
	    iov[1].iov_len != sizeof(struct fuse_init_out))
		return writev(fd, iov, count);
	struct fuse_out_header h;
	memcpy(&h, iov[0].iov_base, sizeof h);
	if (h.unique != want || h.error != 0)
		return writev(fd, iov, count);
	/* libfuse's own reply, amended in a copy: its buffer stays as it was. */
	struct fuse_init_out out;
	memcpy(&out, iov[1].iov_base, sizeof out);
	out.flags |= FUSE_INIT_EXT;
	out.flags2 |= KINIT_DIO_MMAP_FLAGS2;
	struct iovec v[2] = {iov[0], {&out, sizeof out}};
	atomic_store(&init_unique, 0);
	ssize_t n = writev(fd, v, 2);
	if (n == (ssize_t)(sizeof h + sizeof out))
		atomic_store(&dio_mmap, true);
	return n;
}

static ssize_t kinit_splice_send(int fdin, off_t *offin, int fdout, off_t *offout, size_t len,
				 unsigned int flags, void *userdata)
{
	(void)userdata;
	return splice(fdin, offin, fdout, offout, len, flags);
}

int tfs_kinit_attach(struct fuse_session *se)
{
	/* Without splice_send libfuse would copy every spliced reply; no
	 * splice_receive because splice reads are never asked for. */
	static const struct fuse_custom_io io = {
		.read = kinit_read,
		.writev = kinit_writev,
		.splice_send = kinit_splice_send,
	};
	return fuse_session_custom_io(se, &io, fuse_session_fd(se)) == 0 ? 0 : -1;
}

bool tfs_kinit_dio_mmap(void)
{
	return atomic_load(&dio_mmap);
}
