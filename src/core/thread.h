/* Threads of the program's own (the cache's workers, its warm-up and
 * downloads, the readers of the shards' tables, the hashers) start with
 * every signal blocked: SIGTERM, SIGINT and SIGHUP must reach a thread of
 * libfuse's loop, whose handler only flags the session; taken by a worker
 * of ours, they would end the loop only at its next request (with -s,
 * never while the mount is idle). */
#ifndef TFS_THREAD_H
#define TFS_THREAD_H

#include <pthread.h>
#include <signal.h>

/* pthread_create with every signal blocked in the new thread; 0 or its
 * error number. */
static inline int tfs_thread_start(pthread_t *t, const pthread_attr_t *a, void *(*fn)(void *), void *arg)
{
	sigset_t all, old;
	sigfillset(&all);
	pthread_sigmask(SIG_SETMASK, &all, &old);
	int r = pthread_create(t, a, fn, arg);
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	return r;
}

#endif
