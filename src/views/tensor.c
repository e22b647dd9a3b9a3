/* The tensors' files' view: a tensor's stored bytes (raw), after an NPY
 * header (.npy), or decoded to float32 (convert=f32), in the form the
 * tree gives every tensor's file (views/tree.h: the form, what a file
 * is); their extended attributes (user.dtype, user.shape, user.hash.*...). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "compute/convert.h"
#include "compute/hashes.h"
#include "views/tree.h"
#include "views/tree_digest.h"
#include "views/view.h"

static unsigned view_of(const struct tfs_tree *t)
{
	return t->form;
}

static uint64_t size(const struct tfs_tree *t, const struct tfs_node *n)
{
	return n->first +
	       tfs_view_size(&t->m->shards[n->shard].h, tfs_node_tensor(t, n), view_of(t) & TFS_FORM_F32);
}

static tfs_err pieces(const struct tfs_tree *t, const struct tfs_node *n, uint64_t off, size_t len,
		      struct tfs_pieces *out)
{
	const struct tfs_shard *sh = &t->m->shards[n->shard];
	const struct tfs_tensor *ts = &sh->h.t[n->ref];
	const unsigned view = view_of(t);
	uint64_t hl = n->first; /* NPY header length, 0 without one */
	if (off < hl) {
		/* The NPY header is made again on demand: keeping half a
		 * million of them would cost more than this. */
		size_t cap = tfs_npy_header_max(ts), k = hl - off < len ? (size_t)(hl - off) : len;
		char *hb = tfs_pieces_scratch(out, cap);
		if (!hb)
			return TFS_ERR_NOMEM;
		tfs_npy_header(&sh->h, ts, view & TFS_FORM_F32, hb, cap);
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
	if ((view & TFS_FORM_F32) && tfs_converts(ts->dtype))
		return tfs_f32_pieces(sh->src, ts, off - hl, len, out);
	return tfs_pieces_src(out, sh->src, ts->begin + (off - hl), len, ts->end);
}

/* ---- extended attributes (docs/mounting.md, "Extended attributes") ---- */

enum {
	XA_DTYPE,
	XA_SHAPE,
	XA_NAME,
	XA_OFFSETS,
	XA_SOURCE,
	XA_SOURCE_DTYPE,
	XA_ETAG,
	XA_REVISION,
	XA_COMMENT,
	XA_COUNT
};
static const char *const xa_names[XA_COUNT] = {
	"user.dtype",
	"user.shape",
	"user.name",
	"user.offsets",
	"user.source",
	"user.source_dtype", /* only on tensors served converted */
	"user.etag",
	"user.revision", /* only where the source pins a version */
	/* freedesktop's comment attribute, which file managers can show in a
	 * column: "BF16 [4096, 4096], 32 MiB" */
	"user.xdg.comment",
};

/* user.hash.ALGO: the digest of the bytes the file serves, worked out when
 * asked for by name (a size query is answered from the length alone) and
 * kept; listed only once known, so that getfattr -d, file managers and
 * backup tools that copy every listed attribute never read a tensor. */
static const char *const hash_names[TFS_DIGEST_COUNT] = {"user.hash.sha256", "user.hash.xxh64"};

/* Whether a tensor has the attribute. */
static int xa_present(const struct tfs_tree *t, const struct tfs_node *n, int which)
{
	const struct tfs_source *src = t->m->shards[n->shard].src;
	switch (which) {
	case XA_SOURCE_DTYPE:
		return tfs_node_converted(t, n);
	case XA_ETAG:
		return src->etag != NULL;
	case XA_REVISION:
		return src->revision != NULL;
	default:
		return 1;
	}
}

/* user.xdg.comment's value: the dtype as served, the shape, the size. */
static size_t comment(const struct tfs_tree *t, const struct tfs_node *n, char *out, size_t cap)
{
	size_t dl;
	const char *dt = tfs_node_dtype(t, n, &dl);
	const struct tfs_table *h = &t->m->shards[n->shard].h;
	const struct tfs_tensor *ts = &h->t[n->ref];
	size_t o = (size_t)snprintf(out, cap, "%.*s [", (int)(dl < 64 ? dl : 64), dt);
	for (uint32_t i = 0; i < ts->ndim && o < cap - 40; i++)
		o += (size_t)snprintf(out + o, cap - o, "%s%llu", i ? ", " : "",
				      (unsigned long long)h->dims[ts->dims_off + i]);
	static const char *const units[] = {"bytes", "KiB", "MiB", "GiB", "TiB"};
	double v = (double)size(t, n);
	int u = 0;
	while (v >= 1024 && u < 4) {
		v /= 1024;
		u++;
	}
	o += (size_t)snprintf(out + o, cap - o, u ? (v < 10 ? "], %.1f %s" : "], %.0f %s") : "], %.0f %s", v,
			      units[u]);
	return o < cap ? o : cap - 1;
}

static size_t xattr_list(const struct tfs_tree *t, const struct tfs_node *n, char *out, size_t cap)
{
	size_t len = 0;
	char hex[80];
	for (int i = 0; i < XA_COUNT + TFS_DIGEST_COUNT; i++) {
		const char *name = i < XA_COUNT ? xa_names[i] : hash_names[i - XA_COUNT];
		if (i < XA_COUNT ? !xa_present(t, n, i)
				 : !tfs_digest_known(t, (uint32_t)(n - t->nodes),
						     (enum tfs_digest_algo)(i - XA_COUNT), hex))
			continue;
		size_t l = strlen(name) + 1;
		if (len + l > cap)
			break;
		memcpy(out + len, name, l);
		len += l;
	}
	return len;
}

/* value[0..len) into buf, or only its length. */
static tfs_err give(const char *value, size_t len, char *buf, size_t cap, size_t *out)
{
	*out = len;
	if (buf && len > cap)
		return TFS_ERR_TOOBIG;
	if (buf)
		memcpy(buf, value, len);
	return TFS_OK;
}

static tfs_err xattr_hash(const struct tfs_tree *t, const struct tfs_node *n, int a, char *buf, size_t cap,
			  size_t *len)
{
	char hex[80];
	struct tfs_diag d;
	*len = tfs_digest_hex_len((enum tfs_digest_algo)a);
	if (!buf)
		return TFS_OK;
	tfs_err e = tfs_digest_node(t, (uint32_t)(n - t->nodes), (enum tfs_digest_algo)a, hex, &d);
	return e ? e : give(hex, *len, buf, cap, len);
}

static tfs_err xattr_get(const struct tfs_tree *t, const struct tfs_node *n, const char *name, char *buf,
			 size_t cap, size_t *len)
{
	for (int a = 0; a < TFS_DIGEST_COUNT; a++)
		if (strcmp(name, hash_names[a]) == 0)
			return xattr_hash(t, n, a, buf, cap, len);
	int which = -1;
	for (int i = 0; i < XA_COUNT; i++)
		if (strcmp(name, xa_names[i]) == 0)
			which = i;
	if (which < 0 || !xa_present(t, n, which))
		return TFS_ERR_NODATA;
	const struct tfs_shard *sh = &t->m->shards[n->shard];
	const struct tfs_tensor *ts = &sh->h.t[n->ref];
	size_t l;
	const char *v;
	char small[400];
	switch (which) {
	case XA_DTYPE:
		v = tfs_node_dtype(t, n, &l);
		return give(v, l, buf, cap, len);
	case XA_SOURCE_DTYPE:
		v = tfs_tensor_dtype(&sh->h, ts, &l);
		return give(v, l, buf, cap, len);
	case XA_NAME:
		return give(tfs_tensor_name(&sh->h, ts), ts->name_len, buf, cap, len);
	case XA_SOURCE:
		return give(sh->location, strlen(sh->location), buf, cap, len);
	case XA_ETAG:
		return give(sh->src->etag, strlen(sh->src->etag), buf, cap, len);
	case XA_REVISION:
		return give(sh->src->revision, strlen(sh->src->revision), buf, cap, len);
	case XA_OFFSETS:
		return give(small, tfs_node_offsets(t, n, small), buf, cap, len);
	case XA_COMMENT:
		return give(small, comment(t, n, small, sizeof small), buf, cap, len);
	default: {
		/* user.shape: small but not bounded by the format. */
		char *b = malloc(tfs_node_shape_max(t, n));
		if (!b)
			return TFS_ERR_NOMEM;
		tfs_err e = give(b, tfs_node_shape(t, n, b), buf, cap, len);
		free(b);
		return e;
	}
	}
}

const struct tfs_view_ops tfs_view_tensor = {
	.name = "tensor",
	.opts = tfs_tree_tensor_opts,
	.check = tfs_tree_tensor_check,
	.size = size,
	.pieces = pieces,
	.xattr_list = xattr_list,
	.xattr_get = xattr_get,
};
