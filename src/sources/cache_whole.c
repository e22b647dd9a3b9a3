/* Files whose server ignores Range requests (python3 -m http.server answers
 * every range with 200 and the whole file): each is downloaded whole, once,
 * by a thread of its own, into memory (within cache_size) or into an
 * unnamed file in the cache directory, and every read is served from there
 * as soon as its bytes have landed (sources/cache.h, tfs_cwhole). Before
 * the mount is up (its headers, read at mount), a read takes its bytes
 * from the start of an answer instead, and stops it there. */
#include "sources/cache_i.h"
#include "core/thread.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/statvfs.h>
#include <unistd.h>

struct tfs_cwhole {
	struct tfs_cache *c;
	pthread_mutex_t lock;
	pthread_cond_t moved; /* bytes landed, or the download ended */
	char *what;           /* for messages */
	uint64_t size;
	unsigned char *p; /* the mapping of the whole file */
	int fd;           /* its unnamed file in the cache directory, or -1 */
	tfs_whole_fetch_fn fetch;
	void *ctx;
	uint64_t landed; /* bytes [0, landed) are in place */
	int running;     /* a download is under way */
	tfs_err err;     /* how the last one failed, or TFS_OK */
	int64_t failed_at;
	char msg[TFS_DIAG_MAX];
};

static uint64_t mib_up(uint64_t n)
{
	return (n + (1u << 20) - 1) >> 20;
}

/* Room for size bytes: memory while the files kept so fit cache_size,
 * else the cache directory while they fit cache_max and its free space;
 * else one line saying what to add. Under c->lock. */
static tfs_err reserve(struct tfs_cwhole *w, struct tfs_diag *d)
{
	struct tfs_cache *c = w->c;
	if (c->whole_mem + w->size <= c->mem) {
		w->p = mmap(NULL, w->size, PROT_READ | PROT_WRITE,
			    MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
		if (w->p == MAP_FAILED)
			return tfs_fail(d, TFS_ERR_NOMEM, "out of memory for the %llu-byte file",
					(unsigned long long)w->size);
		c->whole_mem += w->size;
		c->whole_nmem++;
		return TFS_OK;
	}
	struct statvfs sv;
	/* (Its other files may not be open yet: what to add is said as the
	 * checkpoint's size.) */
	if (!c->lower)
		return tfs_fail(
			d, TFS_ERR_OPEN,
			"the server ignores Range requests, so each of its files must be downloaded whole and kept, and -o cache_size=%lluM cannot hold this %llu MiB one%s: add -o cache_dir=DIR, or -o cache_size= of the whole checkpoint's size or more",
			(unsigned long long)(c->mem >> 20), (unsigned long long)mib_up(w->size),
			c->whole_mem ? " beside the others" : "");
	if (c->whole_disk + w->size > c->lower->max)
		return tfs_fail(
			d, TFS_ERR_OPEN,
			"the server ignores Range requests, so each of its files must be downloaded whole and kept, and neither -o cache_size=%lluM nor -o cache_max=%lluM of -o cache_dir holds this %llu MiB one%s: add -o cache_max= of the whole checkpoint's size or more",
			(unsigned long long)(c->mem >> 20), (unsigned long long)(c->lower->max >> 20),
			(unsigned long long)mib_up(w->size), c->whole_disk ? " beside the others" : "");
	/* Unnamed: it goes with the mount, and no other mount's disk cache
	 * ever sees it. */
	w->fd = c->lower->ops->scratch(c->lower);
	if (w->fd < 0)
		return tfs_fail(d, TFS_ERR_OPEN,
				"-o cache_dir: cannot make a file in %s for the whole file: %s",
				c->lower->where, strerror(errno));
	if (fstatvfs(w->fd, &sv) == 0 && (uint64_t)sv.f_bavail * sv.f_frsize < w->size)
		return tfs_fail(
			d, TFS_ERR_OPEN,
			"the server ignores Range requests, so this %llu MiB file must be downloaded whole and kept, and the -o cache_dir file system has only %llu MiB free",
			(unsigned long long)mib_up(w->size),
			(unsigned long long)(sv.f_bavail * sv.f_frsize >> 20));
	if (ftruncate(w->fd, (off_t)w->size) != 0 ||
	    (w->p = mmap(NULL, w->size, PROT_READ | PROT_WRITE, MAP_SHARED, w->fd, 0)) == MAP_FAILED)
		return tfs_fail(d, TFS_ERR_OPEN, "-o cache_dir: cannot make room for the whole file: %s",
				strerror(errno));
	c->whole_disk += w->size;
	c->whole_ndisk++;
	return TFS_OK;
}

tfs_err tfs_cwhole_new(struct tfs_cache *c, const char *what, uint64_t size, tfs_whole_fetch_fn fetch,
		       void *ctx, struct tfs_cwhole **out, struct tfs_diag *d)
{
	struct tfs_cwhole *w = calloc(1, sizeof *w);
	if (!w || !(w->what = strdup(what))) {
		free(w);
		return tfs_fail(d, TFS_ERR_NOMEM, "out of memory");
	}
	pthread_mutex_init(&w->lock, NULL);
	pthread_cond_init(&w->moved, NULL);
	w->c = c;
	w->size = size;
	w->fd = -1;
	w->p = MAP_FAILED;
	w->fetch = fetch;
	w->ctx = ctx;
	pthread_mutex_lock(&c->lock);
	tfs_err e = reserve(w, d);
	pthread_mutex_unlock(&c->lock);
	if (e) {
		tfs_cwhole_free(w);
		return e;
	}
	*out = w;
	return TFS_OK;
}

void tfs_cwhole_totals(struct tfs_cache *c, unsigned *nmem, uint64_t *mem, unsigned *ndisk, uint64_t *disk)
{
	pthread_mutex_lock(&c->lock);
	*nmem = c->whole_nmem;
	*mem = c->whole_mem;
	*ndisk = c->whole_ndisk;
	*disk = c->whole_disk;
	pthread_mutex_unlock(&c->lock);
}

void tfs_cwhole_free(struct tfs_cwhole *w)
{
	if (!w)
		return;
	/* A download under way uses the source: it ends at once at unmount
	 * (the fetches are stopped), and is waited for. */
	pthread_mutex_lock(&w->lock);
	while (w->running)
		pthread_cond_wait(&w->moved, &w->lock);
	pthread_mutex_unlock(&w->lock);
	if (w->p != MAP_FAILED) {
		struct tfs_cache *c = w->c;
		munmap(w->p, w->size);
		pthread_mutex_lock(&c->lock);
		if (w->fd >= 0) {
			c->whole_disk -= w->size;
			c->whole_ndisk--;
		} else {
			c->whole_mem -= w->size;
			c->whole_nmem--;
		}
		pthread_mutex_unlock(&c->lock);
	}
	if (w->fd >= 0)
		close(w->fd);
	pthread_cond_destroy(&w->moved);
	pthread_mutex_destroy(&w->lock);
	free(w->what);
	free(w);
}

static void landed(void *arg, uint64_t n)
{
	struct tfs_cwhole *w = arg;
	pthread_mutex_lock(&w->lock);
	if (n > w->landed) {
		w->landed = n;
		pthread_cond_broadcast(&w->moved);
	}
	pthread_mutex_unlock(&w->lock);
}

static void *download(void *arg)
{
	struct tfs_cwhole *w = arg;
	pthread_mutex_lock(&w->lock);
	uint64_t in_place = w->landed; /* a download after a failure goes on */
	pthread_mutex_unlock(&w->lock);
	struct tfs_diag d = {{0}};
	tfs_err e = w->fetch(w->ctx, w->p, 0, w->size, landed, w, &in_place, &d);
	pthread_mutex_lock(&w->lock);
	w->running = 0;
	w->err = e;
	if (e) {
		w->failed_at = tfs_cache_now_ns();
		snprintf(w->msg, sizeof w->msg, "%s", d.msg);
		if (!tfs_cache_stopping(w->c)) {
			char q[TFS_QPATH_MAX];
			tfs_log("%s: the download of the whole file failed: %s",
				tfs_quote_path(q, sizeof q, w->what), d.msg);
		}
	} else {
		w->landed = w->size;
	}
	pthread_cond_broadcast(&w->moved);
	pthread_mutex_unlock(&w->lock);
	return NULL;
}

/* Waits until [0, end) has landed, starting the download if none is
 * under way. Under w->lock. */
static tfs_err wait_for(struct tfs_cwhole *w, uint64_t end, struct tfs_diag *d)
{
	while (w->landed < end) {
		if (!w->running) {
			/* The failure a reader just received answers the
			 * kernel's immediate re-read too (as a block's does). */
			if (w->err && tfs_cache_now_ns() - w->failed_at <
					      __atomic_load_n(&w->c->hold_ns, __ATOMIC_RELAXED))
				return tfs_fail(d, w->err, "%s", w->msg);
			if (tfs_cache_stopping(w->c))
				return tfs_fail(d, TFS_ERR_IO, "stopped: the mount is going away");
			pthread_t t;
			pthread_attr_t a;
			pthread_attr_init(&a);
			pthread_attr_setdetachstate(&a, PTHREAD_CREATE_DETACHED);
			w->running = 1;
			w->err = TFS_OK;
			int r = tfs_thread_start(&t, &a, download, w);
			pthread_attr_destroy(&a);
			if (r) {
				w->running = 0;
				return tfs_fail(d, TFS_ERR_NOMEM, "cannot start the download");
			}
		}
		pthread_cond_wait(&w->moved, &w->lock);
		if (!w->running && w->err && w->landed < end)
			return tfs_fail(d, w->err, "%s", w->msg);
	}
	return TFS_OK;
}

static int started(struct tfs_cache *c)
{
	pthread_mutex_lock(&c->lock);
	int s = c->started;
	pthread_mutex_unlock(&c->lock);
	return s;
}

tfs_err tfs_cwhole_at(struct tfs_cwhole *w, uint64_t off, size_t len, const void **p, struct tfs_diag *d)
{
	if (off > w->size || len > w->size - off)
		return tfs_fail(d, TFS_ERR_SHORT, "read past the end");
	if (!started(w->c))
		return TFS_ERR_UNHANDLED;
	pthread_mutex_lock(&w->lock);
	tfs_err e = wait_for(w, off + len, d);
	pthread_mutex_unlock(&w->lock);
	*p = e ? NULL : w->p + off;
	return e;
}

tfs_err tfs_cwhole_read(struct tfs_cwhole *w, void *buf, size_t len, uint64_t off, struct tfs_diag *d)
{
	const void *p;
	tfs_err e = tfs_cwhole_at(w, off, len, &p, d);
	if (e == TFS_ERR_UNHANDLED) {
		/* Nothing may run in the background yet (the daemon may still
		 * fork): the bytes from the start of an answer, here. */
		pthread_mutex_lock(&w->lock);
		int have = off + len <= w->landed;
		pthread_mutex_unlock(&w->lock);
		if (!have)
			return w->fetch(w->ctx, buf, off, len, NULL, NULL, NULL, d);
		p = w->p + off;
		e = TFS_OK;
	}
	if (!e)
		memcpy(buf, p, len);
	return e;
}
