/* Collecting the pieces of a read (views/view.h), and a tensor's bytes
 * as float32 among them. */
#include "views/view.h"

#include <string.h>

#include "compute/convert.h"

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

tfs_err tfs_f32_pieces(struct tfs_source *src, const struct tfs_tensor *t, uint64_t o, size_t len,
		       struct tfs_pieces *out)
{
	uint64_t first = o / 4, n = (o + len - 1) / 4 - first + 1, b, e;
	tfs_stored_range(t->dtype, first, n, &b, &e);
	size_t raw_len = (size_t)(e - b), dec_at = (raw_len + 7) & ~(size_t)7;
	unsigned char *raw = (unsigned char *)tfs_pieces_scratch(out, dec_at + (size_t)n * 4);
	if (!raw)
		return TFS_ERR_NOMEM;
	tfs_err err = tfs_source_serve(src, raw, raw_len, t->begin + b, t->end);
	if (err)
		return err;
	uint32_t *dec = (uint32_t *)(void *)(raw + dec_at);
	tfs_decode_f32(t->dtype, raw, first, (size_t)n, dec);
	char *to = tfs_pieces_room(out, len);
	if (!to)
		return TFS_ERR_NOMEM;
	memcpy(to, (char *)dec + (o - first * 4), len);
	return tfs_pieces_mem(out, to, len);
}
