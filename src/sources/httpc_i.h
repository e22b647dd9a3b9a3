/* The HTTP client's insides, shared by its two files: sources/httpc.c (the
 * client: its pool of easy handles, the shared DNS and TLS sessions, the
 * sockets an abort wakes, the counters) and sources/httpc_xfer.c (one
 * request: a try's transfer, its callbacks and verdicts, the retries).
 * The transfer uses the client's functions and the client none of the
 * transfer's. Nothing else includes this. */
#ifndef TFS_HTTPC_I_H
#define TFS_HTTPC_I_H

#include <curl/curl.h>
#include <pthread.h>
#include <stdint.h>

#include "sources/httpc.h"

/* An HTTP client: what the requests of one mount share. Its easy handles
 * (each keeping its connections) are lent to one request at a time, from
 * a pool that grows to the most requests ever in flight at once (the
 * workers, the readers) and is freed with the client: no handle belongs
 * to a thread, so the client can go while threads live on. DNS and TLS
 * sessions are shared between the handles under locks. */
struct tfs_http {
	CURLSH *share;
	pthread_mutex_t share_lock[CURL_LOCK_DATA_LAST];
	pthread_mutex_t pool_lock;
	CURL **pool;
	size_t npool, cpool;
	struct tfs_http_policy policy;
	int aborted;
	uint64_t nrequests, nretried, nbytes;
	/* Every socket libcurl has open, so that an abort can wake the
	 * transfers blocked on them at once: libcurl looks at the progress
	 * callback only about once a second while a server sends nothing, and
	 * SIGTERM must not wait that long (docs/remote.md, "When the network
	 * fails"). Opened and closed under the lock the abort holds, so it
	 * never touches a descriptor that was closed and given to something
	 * else. */
	pthread_mutex_t socks_lock;
	curl_socket_t *socks;
	size_t nsocks, csocks;
};
/* A handle for one request, given back with tfs_http_handle_put. */
CURL *tfs_http_handle_get(struct tfs_http *h);
void tfs_http_handle_put(struct tfs_http *h, CURL *c);
/* What a handle needs of its client, set after every curl_easy_reset:
 * the shared DNS and TLS sessions, and sockets opened where the abort can
 * wake them. */
void tfs_http_client_options(struct tfs_http *h, CURL *c);

#endif
