/* The root's own files, whose bytes the view holds in memory:
 * __metadata__.json (made the first time it is looked at: a GGUF
 * vocabulary of 150,000 strings must not cost the mount) and, for a
 * sharded checkpoint, __index__.json. */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "views/tree.h"
#include "views/view.h"

#define META_NAME "__metadata__.json"
#define INDEX_NAME "__index__.json"

struct blob {
	char *data;
	size_t len;
	int ready;
};

struct blobs {
	const struct tfs_model *m;
	/* The tree is shared read-only by the reading threads; the one
	 * lazily made file is guarded by this lock. */
	pthread_mutex_t lock;
	struct blob b[2];
};

/* A blob's bytes, made on first use; TFS_ERR_NOMEM when they cannot be. */
static tfs_err blob_of(const struct tfs_tree *t, const struct tfs_node *n, const char **data, size_t *len)
{
	struct blobs *s = t->vstate[n->kind];
	struct blob *b = &s->b[n->ref];
	tfs_err e = TFS_OK;
	pthread_mutex_lock(&s->lock);
	if (!b->ready) {
		char *json;
		size_t jl;
		if (!tfs_model_meta_json(s->m, &json, &jl)) {
			b->data = json;
			b->len = jl;
			b->ready = 1;
		}
	}
	if (b->ready) {
		*data = b->data;
		*len = b->len;
	} else {
		e = TFS_ERR_NOMEM;
	}
	pthread_mutex_unlock(&s->lock);
	return e;
}

static uint64_t size(const struct tfs_tree *t, const struct tfs_node *n)
{
	const char *data;
	size_t len;
	return blob_of(t, n, &data, &len) ? 0 : len;
}

static tfs_err pieces(const struct tfs_tree *t, const struct tfs_node *n, uint64_t off, size_t len,
		      struct tfs_pieces *out)
{
	const char *data;
	size_t dl;
	tfs_err e = blob_of(t, n, &data, &dl);
	if (e)
		return e;
	if (off > dl || len > dl - off)
		return TFS_ERR_NOMEM; /* could not be made when its size was asked for */
	return tfs_pieces_mem(out, data + off, len);
}

static void *state_new(const struct tfs_model *m, const struct tfs_tree_opts *o)
{
	(void)o;
	struct blobs *s = calloc(1, sizeof *s);
	if (s) {
		s->m = m;
		pthread_mutex_init(&s->lock, NULL);
	}
	return s;
}

static void state_free(void *state)
{
	struct blobs *s = state;
	for (int i = 0; i < 2; i++)
		free(s->b[i].data);
	pthread_mutex_destroy(&s->lock);
	free(s);
}

static tfs_err at_root(struct tfs_tree_add *a, void *state, struct tfs_diag *d)
{
	struct blobs *s = state;
	(void)d;
	tfs_err e = tfs_tree_add_node(a, TFS_TREE_ROOT, META_NAME, 0, 0, NULL);
	if (e || !s->m->index_json)
		return e;
	char *copy = malloc(s->m->index_len + 1);
	if (!copy)
		return TFS_ERR_NOMEM;
	memcpy(copy, s->m->index_json, s->m->index_len + 1);
	s->b[1] = (struct blob){copy, s->m->index_len, 1};
	tfs_tree_add_bytes(a, s->m->index_len);
	return tfs_tree_add_node(a, TFS_TREE_ROOT, INDEX_NAME, 0, 1, NULL);
}

const struct tfs_view_ops tfs_view_blob = {
	.name = "blob",
	.flags = TFS_VIEWF_FIRST | TFS_VIEWF_LEAD,
	.state_new = state_new,
	.state_free = state_free,
	.at_root = at_root,
	.size = size,
	.pieces = pieces,
};
