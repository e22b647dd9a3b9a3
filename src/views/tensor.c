/* A tensor's file: its stored bytes (raw), after an NPY header (.npy), or
 * decoded to float32 (convert=f32), as the tree's view flags say. */
#include "views/tree.h"
#include "views/view.h"

#include <string.h>

#include "views/convert.h"

/* Decoded float32 bytes [o, o + len) of a converted tensor: only the
 * elements the range touches are read (into scratch) and decoded. */
static tfs_err converted(const struct tfs_shard *sh, const struct tfs_tensor *t, uint64_t o, size_t len,
			 struct tfs_pieces *out)
{
	uint64_t first = o / 4, n = (o + len - 1) / 4 - first + 1, b, e;
	tfs_stored_range(t->dtype, first, n, &b, &e);
	size_t raw_len = (size_t)(e - b), dec_at = (raw_len + 7) & ~(size_t)7;
	unsigned char *raw = (unsigned char *)tfs_pieces_scratch(out, dec_at + (size_t)n * 4);
	if (!raw)
		return TFS_ERR_NOMEM;
	tfs_err err = tfs_source_serve(sh->src, raw, raw_len, t->begin + b, t->end);
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

static uint64_t size(const struct tfs_tree *t, const struct tfs_node *n)
{
	return n->first +
	       tfs_view_size(&t->m->shards[n->shard].h, tfs_node_tensor(t, n), t->view & TFS_VIEW_F32);
}

static tfs_err pieces(const struct tfs_tree *t, const struct tfs_node *n, uint64_t off, size_t len,
		      struct tfs_pieces *out)
{
	const struct tfs_shard *sh = &t->m->shards[n->shard];
	const struct tfs_tensor *ts = &sh->h.t[n->ref];
	uint64_t hl = n->first; /* NPY header length, 0 without one */
	if (off < hl) {
		/* The NPY header is made again on demand: keeping half a
		 * million of them would cost more than this. */
		size_t cap = tfs_npy_header_max(ts), k = hl - off < len ? (size_t)(hl - off) : len;
		char *hb = tfs_pieces_scratch(out, cap);
		if (!hb)
			return TFS_ERR_NOMEM;
		tfs_npy_header(&sh->h, ts, t->view & TFS_VIEW_F32, hb, cap);
		char *to = tfs_pieces_room(out, k);
		if (!to)
			return TFS_ERR_NOMEM;
		memcpy(to, hb + off, k);
		tfs_err e = tfs_pieces_mem(out, to, k);
		if (e)
			return e;
		off += k;
		len -= k;
	}
	if (!len)
		return TFS_OK;
	if ((t->view & TFS_VIEW_F32) && tfs_converts(ts->dtype))
		return converted(sh, ts, off - hl, len, out);
	return tfs_pieces_src(out, sh->src, ts->begin + (off - hl), len, ts->end);
}

const struct tfs_view_ops tfs_view_tensor = {
	.name = "tensor",
	.size = size,
	.pieces = pieces,
};
