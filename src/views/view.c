/* Collecting the pieces of a read (views/view.h). */
#include "views/view.h"

#include <string.h>

void *tfs_pieces_room(struct tfs_pieces *p, size_t len)
{
	if (len > p->cap - p->used)
		return NULL;
	void *r = p->out + p->used;
	p->used += len;
	return r;
}

char *tfs_pieces_scratch(struct tfs_pieces *p, size_t need)
{
	if (need > p->scratch_cap) {
		char *s = p->grow ? p->grow(need) : NULL;
		if (!s)
			return NULL;
		p->scratch = s;
		p->scratch_cap = need;
	}
	return p->scratch;
}

/* Appends a piece, joined to the last one when it goes on from it. */
static tfs_err add(struct tfs_pieces *p, const struct tfs_piece *x)
{
	if (x->len == 0)
		return TFS_OK;
	if (p->n) {
		struct tfs_piece *l = &p->v[p->n - 1];
		if (x->mem && l->mem && (const char *)l->mem + l->len == x->mem) {
			l->len += x->len;
			return TFS_OK;
		}
		if (!x->mem && !l->mem && l->src == x->src && l->off + l->len == x->off &&
		    l->limit == x->limit) {
			l->len += x->len;
			return TFS_OK;
		}
	}
	if (p->n + 1 < p->max) {
		p->v[p->n++] = *x;
		return TFS_OK;
	}
	/* The last place: from here on the bytes are copied into out, where
	 * each lands right after the one before, and the last piece grows. A
	 * read of a generated file over thousands of small tensors ends here. */
	char *to = tfs_pieces_room(p, x->len);
	if (!to)
		return TFS_ERR_NOMEM;
	if (x->mem) {
		if (to != x->mem)
			memmove(to, x->mem, x->len);
	} else {
		tfs_err e = tfs_source_serve(x->src, to, x->len, x->off, x->limit);
		if (e)
			return e;
	}
	struct tfs_piece *l = p->n == p->max ? &p->v[p->n - 1] : NULL;
	if (l && l->mem && (const char *)l->mem + l->len == to) {
		l->len += x->len;
		return TFS_OK;
	}
	if (p->n == p->max)
		return TFS_ERR_NOMEM; /* cannot happen: the last piece is out's */
	p->v[p->n++] = (struct tfs_piece){.mem = to, .len = x->len};
	return TFS_OK;
}

tfs_err tfs_pieces_mem(struct tfs_pieces *p, const void *mem, size_t len)
{
	struct tfs_piece x = {.mem = mem, .len = len};
	return add(p, &x);
}

tfs_err tfs_pieces_src(struct tfs_pieces *p, struct tfs_source *src, uint64_t off, size_t len, uint64_t limit)
{
	struct tfs_piece x = {.src = src, .off = off, .limit = limit, .len = len};
	return add(p, &x);
}
