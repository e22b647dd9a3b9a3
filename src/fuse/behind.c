#define FUSE_USE_VERSION 312

#include "fuse/behind.h"

#include <fuse_lowlevel.h>
#include <pthread.h>
#include <stdlib.h>
#include <time.h>

/* Enough for every open file to have a few drops waiting; when it is
 * full a drop is skipped, which only leaves those pages cached. */
#define QUEUE 64

struct drop {
	uint64_t ino, off, len;
};

struct tfs_behind {
	struct fuse_session *se;
	uint64_t keep, gap;
	pthread_t th;
	pthread_mutex_t lock;
	pthread_cond_t wake;
	int stop;
	int joined;
	unsigned head, count;
	struct tfs_stream *open;
	struct drop q[QUEUE];
};

static void *run(void *arg)
{
	struct tfs_behind *b = arg;
	pthread_mutex_lock(&b->lock);
	for (;;) {
		while (!b->stop && !b->count)
			pthread_cond_wait(&b->wake, &b->lock);
		if (b->stop)
			break;
		struct drop d = b->q[b->head];
		b->head = (b->head + 1) % QUEUE;
		b->count--;
		pthread_mutex_unlock(&b->lock);
		/* Fails only when the mount is going away; the pages then go
		 * with it. */
		(void)fuse_lowlevel_notify_inval_inode(b->se, (fuse_ino_t)d.ino, (off_t)d.off, (off_t)d.len);
		pthread_mutex_lock(&b->lock);
	}
	pthread_mutex_unlock(&b->lock);
	return NULL;
}

tfs_err tfs_behind_start(struct tfs_behind **out, struct fuse_session *se, uint64_t readahead)
{
	struct tfs_behind *b = calloc(1, sizeof *b);
	if (!b)
		return TFS_ERR_NOMEM;
	b->se = se;
	/* A reader asking for sequential access doubles the readahead, and
	 * the next window is asked for before the reader reaches it: the
	 * furthest request runs up to four windows ahead of the reader. */
	b->keep = 8 * readahead > TFS_BEHIND_MIN_KEEP ? 8 * readahead : TFS_BEHIND_MIN_KEEP;
	b->gap = 4 * readahead > TFS_BEHIND_MIN_GAP ? 4 * readahead : TFS_BEHIND_MIN_GAP;
	pthread_mutex_init(&b->lock, NULL);
	pthread_cond_init(&b->wake, NULL);
	if (pthread_create(&b->th, NULL, run, b)) {
		pthread_cond_destroy(&b->wake);
		pthread_mutex_destroy(&b->lock);
		free(b);
		return TFS_ERR_NOMEM;
	}
	*out = b;
	return TFS_OK;
}

void tfs_behind_end(struct tfs_behind *b)
{
	if (!b)
		return;
	pthread_mutex_lock(&b->lock);
	b->stop = 1;
	pthread_cond_signal(&b->wake);
	pthread_mutex_unlock(&b->lock);
	struct timespec until;
	clock_gettime(CLOCK_REALTIME, &until);
	until.tv_sec += 1;
	if (pthread_timedjoin_np(b->th, NULL, &until) == 0)
		b->joined = 1;
}

void tfs_behind_free(struct tfs_behind *b)
{
	if (!b)
		return;
	if (!b->joined)
		pthread_join(b->th, NULL);
	pthread_cond_destroy(&b->wake);
	pthread_mutex_destroy(&b->lock);
	while (b->open) {
		struct tfs_stream *s = b->open;
		b->open = s->next;
		free(s);
	}
	free(b);
}

struct tfs_stream *tfs_behind_open(struct tfs_behind *b)
{
	struct tfs_stream *s = calloc(1, sizeof *s);
	if (!s)
		return NULL;
	pthread_mutex_lock(&b->lock);
	s->next = b->open;
	if (b->open)
		b->open->prev = s;
	b->open = s;
	pthread_mutex_unlock(&b->lock);
	return s;
}

void tfs_behind_close(struct tfs_behind *b, struct tfs_stream *s)
{
	if (!b || !s)
		return;
	pthread_mutex_lock(&b->lock);
	if (s->prev)
		s->prev->next = s->next;
	else
		b->open = s->next;
	if (s->next)
		s->next->prev = s->prev;
	pthread_mutex_unlock(&b->lock);
	free(s);
}

void tfs_behind_read(struct tfs_behind *b, struct tfs_stream *s, uint64_t ino, uint64_t off, size_t len)
{
	if (!b || !s || !len)
		return;
	uint64_t end = off + len;
	pthread_mutex_lock(&b->lock);
	/* Readahead requests arrive out of order, but within a few windows of
	 * the furthest one; anything else is a reader that jumps, and a run
	 * starts again where it landed (nothing behind it is dropped). */
	if (s->end == 0 || off > s->end + b->gap || off + b->gap < s->end || off < s->dropped) {
		s->dropped = off;
		s->end = end;
	} else if (end > s->end) {
		s->end = end;
	}
	if (s->end - s->dropped >= 2 * b->keep && b->count < QUEUE) {
		uint64_t to = s->end - b->keep;
		b->q[(b->head + b->count) % QUEUE] = (struct drop){ino, s->dropped, to - s->dropped};
		b->count++;
		s->dropped = to;
		pthread_cond_signal(&b->wake);
	}
	pthread_mutex_unlock(&b->lock);
}
