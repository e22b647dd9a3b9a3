/* Hashes of what a file of the tree serves (views/tree_digest.h). */
#include "views/tree_digest.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <openssl/evp.h>
#include <xxhash.h>

#include "compute/hashes.h"
#include "views/tree.h"
#include "views/view.h"
#include "core/thread.h"

/* The tree's digests. */
static struct tfs_digests *digests_of(const struct tfs_tree *t)
{
	return t->digests;
}

/* Bytes asked of a view at a time: large enough that a piece's overhead
 * vanishes, small enough for one buffer per hashing thread. */
#define CHUNK (4u << 20)
#define PIECES 16

/* A hashing thread's buffers: what views make (out), what sources give
 * (rd) and a view's scratch (grown on demand through the thread's own
 * pointer, as the pieces' grow hook has no context). */
struct worker {
	char *out, *rd, *scratch;
	size_t scratch_cap;
};
static _Thread_local struct worker *cur;

static char *scratch_grow(size_t need)
{
	char *s = realloc(cur->scratch, need);
	if (s) {
		cur->scratch = s;
		cur->scratch_cap = need;
	}
	return s;
}

static int worker_init(struct worker *w)
{
	memset(w, 0, sizeof *w);
	w->out = malloc(CHUNK);
	w->rd = malloc(CHUNK);
	return w->out && w->rd ? 0 : -1;
}

static void worker_free(struct worker *w)
{
	free(w->out);
	free(w->rd);
	free(w->scratch);
}

struct hasher {
	enum tfs_digest_algo a;
	EVP_MD_CTX *sha;
	XXH64_state_t *xx;
};

static int hasher_start(struct hasher *h, enum tfs_digest_algo a)
{
	memset(h, 0, sizeof *h);
	h->a = a;
	if (a == TFS_DIGEST_SHA256)
		return (h->sha = EVP_MD_CTX_new()) && EVP_DigestInit_ex(h->sha, EVP_sha256(), NULL) == 1 ? 0
													 : -1;
	return (h->xx = XXH64_createState()) && XXH64_reset(h->xx, 0) == XXH_OK ? 0 : -1;
}

static void hasher_add(struct hasher *h, const void *p, size_t n)
{
	if (h->sha)
		EVP_DigestUpdate(h->sha, p, n);
	else
		XXH64_update(h->xx, p, n);
}

static void hasher_end(struct hasher *h, unsigned char *sha, uint64_t *xxh)
{
	unsigned int len = 32;
	if (h->sha)
		EVP_DigestFinal_ex(h->sha, sha, &len);
	else
		*xxh = XXH64_digest(h->xx);
	EVP_MD_CTX_free(h->sha);
	if (h->xx)
		XXH64_freeState(h->xx);
}

/* Feeds the node's file to the hasher, CHUNK bytes of it at a time. */
static tfs_err feed(const struct tfs_tree *t, const struct tfs_node *n, struct worker *w, struct hasher *h)
{
	uint64_t size = tfs_node_size(t, n);
	struct tfs_piece pv[PIECES];
	for (uint64_t off = 0; off < size;) {
		size_t len = size - off < CHUNK ? (size_t)(size - off) : CHUNK;
		struct tfs_pieces p = {.v = pv,
				       .max = PIECES,
				       .out = w->out,
				       .cap = CHUNK,
				       .scratch = w->scratch,
				       .scratch_cap = w->scratch_cap,
				       .grow = scratch_grow};
		if (tfs_sources_stopped(t->m->sources))
			return TFS_ERR_IO; /* the mount is going away: never wait for a hash */
		tfs_err e = tfs_node_pieces(t, n, off, len, &p);
		if (e)
			return e;
		for (unsigned k = 0; k < p.n; k++) {
			const struct tfs_piece *x = &p.v[k];
			if (x->mem) {
				hasher_add(h, x->mem, x->len);
				continue;
			}
			if ((e = tfs_source_serve(x->src, w->rd, x->len, x->off, x->limit)))
				return e;
			hasher_add(h, w->rd, x->len);
		}
		off += len;
	}
	return TFS_OK;
}

int tfs_digest_known(const struct tfs_tree *t, uint32_t ino, enum tfs_digest_algo a, char *hex)
{
	return digests_of(t) && tfs_digests_get(digests_of(t), ino, a, hex);
}

/* A tensor's digest from its source's memo (kept across mounts where the
 * source keeps one: a remote source's disk cache); the key into key. */
static int from_memo(const struct tfs_tree *t, uint32_t ino, enum tfs_digest_algo a, char *key, size_t cap,
		     unsigned char *sha, uint64_t *xxh)
{
	const struct tfs_node *n = &t->nodes[ino];
	*key = 0;
	if (n->kind != TFS_NODE_TENSOR)
		return 0;
	const struct tfs_tensor *x = tfs_node_tensor(t, n);
	tfs_digest_memo_key(a, tfs_node_converted(t, n), n->first, x->begin, x->end, key, cap);
	char v[80];
	return tfs_source_memo_get(t->m->shards[n->shard].src, key, v, sizeof v) &&
	       !tfs_digest_parse(a, v, sha, xxh);
}

static tfs_err digest_with(const struct tfs_tree *t, uint32_t ino, enum tfs_digest_algo a, struct worker *w,
			   char *hex)
{
	if (tfs_digest_known(t, ino, a, hex))
		return TFS_OK;
	struct hasher h;
	unsigned char sha[32] = {0};
	uint64_t xxh = 0;
	char key[128];
	if (from_memo(t, ino, a, key, sizeof key, sha, &xxh)) {
		tfs_digests_put(digests_of(t), ino, a, sha, xxh);
		tfs_digest_hex(a, sha, xxh, hex);
		return TFS_OK;
	}
	if (hasher_start(&h, a)) {
		hasher_end(&h, sha, &xxh);
		return TFS_ERR_NOMEM;
	}
	struct worker *before = cur;
	cur = w;
	tfs_err e = feed(t, &t->nodes[ino], w, &h);
	cur = before;
	hasher_end(&h, sha, &xxh);
	if (e)
		return e;
	tfs_digests_put(digests_of(t), ino, a, sha, xxh);
	tfs_digest_hex(a, sha, xxh, hex);
	if (*key)
		tfs_source_memo_put(t->m->shards[t->nodes[ino].shard].src, key, hex);
	return TFS_OK;
}

tfs_err tfs_digest_node(const struct tfs_tree *t, uint32_t ino, enum tfs_digest_algo a, char *hex,
			struct tfs_diag *d)
{
	if (tfs_digest_known(t, ino, a, hex))
		return TFS_OK;
	struct worker w;
	tfs_err e = worker_init(&w) ? TFS_ERR_NOMEM : digest_with(t, ino, a, &w, hex);
	worker_free(&w);
	return e ? tfs_fail(d, e, "%s",
			    e == TFS_ERR_NOMEM ? "out of memory" : "the tensor's bytes cannot be read")
		 : TFS_OK;
}

struct batch {
	const struct tfs_tree *t;
	const uint32_t *inos;
	size_t count, next;
	enum tfs_digest_algo a;
	pthread_mutex_t lock;
	tfs_err e;
	uint32_t failed; /* the node that failed */
	void (*progress)(void *ctx, uint64_t bytes);
	void *ctx;
};

static void *batch_worker(void *arg)
{
	struct batch *b = arg;
	struct worker w;
	char hex[80];
	int bad = worker_init(&w);
	for (;;) {
		pthread_mutex_lock(&b->lock);
		if (bad && !b->e)
			b->e = TFS_ERR_NOMEM;
		size_t i = b->e ? b->count : b->next++;
		pthread_mutex_unlock(&b->lock);
		if (i >= b->count)
			break;
		tfs_err e = digest_with(b->t, b->inos[i], b->a, &w, hex);
		pthread_mutex_lock(&b->lock);
		if (e && !b->e) {
			b->e = e;
			b->failed = b->inos[i];
		}
		if (!e && b->progress)
			b->progress(b->ctx, tfs_node_size(b->t, &b->t->nodes[b->inos[i]]));
		pthread_mutex_unlock(&b->lock);
	}
	worker_free(&w);
	return NULL;
}

tfs_err tfs_digest_nodes(const struct tfs_tree *t, const uint32_t *inos, size_t count, enum tfs_digest_algo a,
			 unsigned threads, void (*progress)(void *ctx, uint64_t bytes), void *ctx,
			 struct tfs_diag *d)
{
	struct batch b = {.t = t, .inos = inos, .count = count, .a = a, .progress = progress, .ctx = ctx};
	pthread_mutex_init(&b.lock, NULL);
	if (threads < 1)
		threads = 1;
	if (threads > count)
		threads = count ? (unsigned)count : 1;
	pthread_t *tid = calloc(threads, sizeof *tid);
	unsigned started = 0;
	for (; tid && started + 1 < threads; started++)
		if (tfs_thread_start(&tid[started], NULL, batch_worker, &b) != 0)
			break;
	batch_worker(&b); /* this thread too */
	for (unsigned k = 0; k < started; k++)
		pthread_join(tid[k], NULL);
	free(tid);
	pthread_mutex_destroy(&b.lock);
	if (!b.e)
		return TFS_OK;
	if (b.e == TFS_ERR_NOMEM)
		return tfs_fail(d, b.e, "out of memory");
	const struct tfs_node *n = &t->nodes[b.failed];
	char q[160];
	tfs_quote(q, sizeof q, n->fname, n->fname_len);
	return tfs_fail(d, b.e, "%s: its bytes cannot be read", q);
}
