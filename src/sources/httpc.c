/* The HTTP client: what the requests of one mount share (one request's
 * transfer and its retries are in sources/httpc_xfer.c). */
#include "sources/httpc_i.h"

#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "core/json.h"
#include "core/table.h"

/* libcurl's global state, once for the process: what it keeps there
 * (its TLS library, its DNS resolver) is no mount's. */
static pthread_once_t curl_once = PTHREAD_ONCE_INIT;

static void curl_init_once(void)
{
	curl_global_init(CURL_GLOBAL_ALL);
}

static void lock_cb(CURL *h, curl_lock_data data, curl_lock_access a, void *u)
{
	(void)h;
	(void)a;
	pthread_mutex_lock(&((struct tfs_http *)u)->share_lock[data]);
}

static void unlock_cb(CURL *h, curl_lock_data data, void *u)
{
	(void)h;
	pthread_mutex_unlock(&((struct tfs_http *)u)->share_lock[data]);
}

tfs_err tfs_http_new(struct tfs_http **out)
{
	pthread_once(&curl_once, curl_init_once);
	struct tfs_http *h = calloc(1, sizeof *h);
	if (!h)
		return TFS_ERR_NOMEM;
	h->policy = (struct tfs_http_policy){.retries = 3, .stall_seconds = 15, .connect_seconds = 10};
	for (int i = 0; i < CURL_LOCK_DATA_LAST; i++)
		pthread_mutex_init(&h->share_lock[i], NULL);
	pthread_mutex_init(&h->pool_lock, NULL);
	pthread_mutex_init(&h->socks_lock, NULL);
	h->share = curl_share_init();
	if (h->share) {
		curl_share_setopt(h->share, CURLSHOPT_LOCKFUNC, lock_cb);
		curl_share_setopt(h->share, CURLSHOPT_UNLOCKFUNC, unlock_cb);
		curl_share_setopt(h->share, CURLSHOPT_USERDATA, h);
		/* Connections are not shared: libcurl says that is unsafe
		 * between threads. Each handle keeps its own. */
		curl_share_setopt(h->share, CURLSHOPT_SHARE, CURL_LOCK_DATA_DNS);
		curl_share_setopt(h->share, CURLSHOPT_SHARE, CURL_LOCK_DATA_SSL_SESSION);
	}
	*out = h;
	return TFS_OK;
}

void tfs_http_free(struct tfs_http *h)
{
	if (!h)
		return;
	for (size_t i = 0; i < h->npool; i++)
		curl_easy_cleanup(h->pool[i]);
	free(h->pool);
	if (h->share)
		curl_share_cleanup(h->share);
	for (int i = 0; i < CURL_LOCK_DATA_LAST; i++)
		pthread_mutex_destroy(&h->share_lock[i]);
	pthread_mutex_destroy(&h->pool_lock);
	pthread_mutex_destroy(&h->socks_lock);
	free(h->socks);
	free(h);
}

CURL *tfs_http_handle_get(struct tfs_http *h)
{
	CURL *c = NULL;
	pthread_mutex_lock(&h->pool_lock);
	if (h->npool)
		c = h->pool[--h->npool];
	pthread_mutex_unlock(&h->pool_lock);
	return c ? c : curl_easy_init();
}

void tfs_http_handle_put(struct tfs_http *h, CURL *c)
{
	pthread_mutex_lock(&h->pool_lock);
	if (h->npool < h->cpool || !tfs_grow((void **)&h->pool, &h->cpool, h->npool + 1, sizeof *h->pool)) {
		h->pool[h->npool++] = c;
		c = NULL;
	}
	pthread_mutex_unlock(&h->pool_lock);
	if (c)
		curl_easy_cleanup(c);
}

void tfs_http_set_policy(struct tfs_http *h, const struct tfs_http_policy *p)
{
	h->policy = *p;
}

void tfs_http_get_policy(const struct tfs_http *h, struct tfs_http_policy *p)
{
	*p = h->policy;
}

static curl_socket_t open_sock(void *ctx, curlsocktype purpose, struct curl_sockaddr *a)
{
	struct tfs_http *h = ctx;
	(void)purpose;
	pthread_mutex_lock(&h->socks_lock);
	curl_socket_t fd = CURL_SOCKET_BAD;
	if (!tfs_http_aborted(h) && (h->nsocks < h->csocks || !tfs_grow((void **)&h->socks, &h->csocks,
									h->nsocks + 1, sizeof *h->socks))) {
		fd = socket(a->family, a->socktype | SOCK_CLOEXEC, a->protocol);
		if (fd != CURL_SOCKET_BAD)
			h->socks[h->nsocks++] = fd;
	}
	pthread_mutex_unlock(&h->socks_lock);
	return fd;
}

static int close_sock(void *ctx, curl_socket_t fd)
{
	struct tfs_http *h = ctx;
	pthread_mutex_lock(&h->socks_lock);
	for (size_t i = 0; i < h->nsocks; i++)
		if (h->socks[i] == fd) {
			h->socks[i] = h->socks[--h->nsocks];
			break;
		}
	int r = close(fd);
	pthread_mutex_unlock(&h->socks_lock);
	return r;
}

void tfs_http_client_options(struct tfs_http *h, CURL *c)
{
	curl_easy_setopt(c, CURLOPT_SHARE, h->share);
	curl_easy_setopt(c, CURLOPT_OPENSOCKETFUNCTION, open_sock);
	curl_easy_setopt(c, CURLOPT_OPENSOCKETDATA, h);
	curl_easy_setopt(c, CURLOPT_CLOSESOCKETFUNCTION, close_sock);
	curl_easy_setopt(c, CURLOPT_CLOSESOCKETDATA, h);
}

void tfs_http_abort(struct tfs_http *h)
{
	__atomic_store_n(&h->aborted, 1, __ATOMIC_RELEASE);
	pthread_mutex_lock(&h->socks_lock);
	for (size_t i = 0; i < h->nsocks; i++)
		shutdown(h->socks[i], SHUT_RDWR);
	pthread_mutex_unlock(&h->socks_lock);
}

int tfs_http_aborted(const struct tfs_http *h)
{
	return __atomic_load_n(&h->aborted, __ATOMIC_ACQUIRE);
}

uint64_t tfs_http_requests(const struct tfs_http *h)
{
	return __atomic_load_n(&h->nrequests, __ATOMIC_RELAXED);
}

uint64_t tfs_http_bytes(const struct tfs_http *h)
{
	return __atomic_load_n(&h->nbytes, __ATOMIC_RELAXED);
}

uint64_t tfs_http_retried(const struct tfs_http *h)
{
	return __atomic_load_n(&h->nretried, __ATOMIC_RELAXED);
}

tfs_err tfs_http_escape(const char *s, size_t n, char **out, size_t *len, size_t *cap)
{
	static const char hex[] = "0123456789ABCDEF";
	for (size_t i = 0; i < n; i++) {
		unsigned char c = (unsigned char)s[i];
		char e[3];
		size_t k = 1;
		if ((c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-' ||
		    c == '.' || c == '_' || c == '~') {
			e[0] = (char)c;
		} else {
			e[0] = '%';
			e[1] = hex[c >> 4];
			e[2] = hex[c & 15];
			k = 3;
		}
		if (tfs_grow((void **)out, cap, *len + k + 1, 1))
			return TFS_ERR_NOMEM;
		memcpy(*out + *len, e, k);
		*len += k;
		(*out)[*len] = 0;
	}
	return TFS_OK;
}

tfs_err tfs_http_escape_path(const char *path, char **out, size_t *len, size_t *cap)
{
	tfs_err e = TFS_OK;
	for (const char *p = path; !e && *p;) {
		size_t seg = strcspn(p, "/");
		e = tfs_http_escape(p, seg, out, len, cap);
		p += seg;
		if (!e && *p == '/') {
			e = tfs_json_put(out, len, cap, "/", 1);
			p++;
		}
	}
	return e;
}
