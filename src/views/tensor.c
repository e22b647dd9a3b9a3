/* A tensor's file: its stored bytes (raw), after an NPY header (.npy), or
 * decoded to float32 (convert=f32), as the mount's options say
 * (views/tensor.h). */
#include "views/tensor.h"
#include "views/view.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "views/tree_digest.h"
#include "compute/hashes.h"

static unsigned view_of(const struct tfs_tree *t)
{
	return tfs_tensor_files(t)->view;
}

static uint64_t size(const struct tfs_tree *t, const struct tfs_node *n)
{
	return n->first +
	       tfs_view_size(&t->m->shards[n->shard].h, tfs_node_tensor(t, n), view_of(t) & TFS_VIEW_F32);
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
		tfs_npy_header(&sh->h, ts, view & TFS_VIEW_F32, hb, cap);
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
	if ((view & TFS_VIEW_F32) && tfs_converts(ts->dtype))
		return tfs_f32_pieces(sh->src, ts, off - hl, len, out);
	return tfs_pieces_src(out, sh->src, ts->begin + (off - hl), len, ts->end);
}

/* ---- what a tensor's file is ---- */

const char *tfs_node_dtype(const struct tfs_tree *t, const struct tfs_node *n, size_t *len)
{
	if (tfs_node_converted(t, n)) {
		*len = 3;
		return "F32";
	}
	return tfs_tensor_dtype(&t->m->shards[n->shard].h, tfs_node_tensor(t, n), len);
}

size_t tfs_node_shape_max(const struct tfs_tree *t, const struct tfs_node *n)
{
	/* 20 digits and a comma per dimension, and the brackets. */
	return 2 + (size_t)tfs_node_tensor(t, n)->ndim * 21;
}

size_t tfs_node_shape(const struct tfs_tree *t, const struct tfs_node *n, char *out)
{
	const struct tfs_table *h = &t->m->shards[n->shard].h;
	const struct tfs_tensor *ts = tfs_node_tensor(t, n);
	size_t o = 0;
	char num[24];
	out[o++] = '[';
	for (uint32_t i = 0; i < ts->ndim; i++) {
		int k = snprintf(num, sizeof num, "%s%llu", i ? "," : "",
				 (unsigned long long)h->dims[ts->dims_off + i]);
		memcpy(out + o, num, (size_t)k);
		o += (size_t)k;
	}
	out[o++] = ']';
	return o;
}

size_t tfs_node_offsets(const struct tfs_tree *t, const struct tfs_node *n, char *out)
{
	const struct tfs_tensor *ts = tfs_node_tensor(t, n);
	return (size_t)snprintf(out, TFS_OFFSETS_MAX, "[%llu,%llu]", (unsigned long long)ts->begin,
				(unsigned long long)ts->end);
}

/* ---- extended attributes (README: Extended attributes) ---- */

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

/* ---- options, state, names ---- */

static const struct tfs_opt_spec opts[] = {
	{"format", 1, "npy: NAME.npy files that np.load reads", "raw|npy", 0},
	{"convert", 1, "f32: narrow float and quantized tensors as float32;\nnone (the default): as stored",
	 "f32|none", 0},
	{NULL, 0, NULL, NULL, 0},
};

static tfs_err check(const struct tfs_opts *o, struct tfs_diag *d)
{
	const char *f = tfs_opts_get(o, "format"), *c = tfs_opts_get(o, "convert");
	if (f && strcmp(f, "npy") != 0 && strcmp(f, "raw") != 0)
		return tfs_fail(d, TFS_ERR_INVAL, "-o format= takes raw or npy, not '%s'", f);
	if (c && strcmp(c, "f32") != 0 && strcmp(c, "none") != 0)
		return tfs_fail(d, TFS_ERR_INVAL, "-o convert= takes f32 or none, not '%s'", c);
	return TFS_OK;
}

static void *state_new(const struct tfs_model *m, const struct tfs_tree_opts *o)
{
	(void)m;
	struct tfs_tensor_files *s = calloc(1, sizeof *s);
	const char *f = tfs_opts_get(o->opts, "format"), *c = tfs_opts_get(o->opts, "convert");
	if (s)
		s->view = (f && strcmp(f, "npy") == 0 ? TFS_VIEW_NPY : 0) |
			  (c && strcmp(c, "f32") == 0 ? TFS_VIEW_F32 : 0);
	return s;
}

static void state_free(void *state)
{
	struct tfs_tensor_files *s = state;
	tfs_digests_free(s->digests);
	free(s);
}

/* The hashes are kept by node: made once the nodes are all there. */
static tfs_err built(const struct tfs_tree *t, void *state)
{
	struct tfs_tensor_files *s = state;
	return (s->digests = tfs_digests_new(t->nnodes)) ? TFS_OK : TFS_ERR_NOMEM;
}

static const char *tensor_suffix(const void *state)
{
	return (((const struct tfs_tensor_files *)state)->view & TFS_VIEW_NPY) ? TFS_NPY_SUFFIX : "";
}

static tfs_err tensor_first(const void *state, const struct tfs_table *h, const struct tfs_tensor *ts,
			    uint32_t *first)
{
	const unsigned view = ((const struct tfs_tensor_files *)state)->view;
	*first = 0;
	if (!(view & TFS_VIEW_NPY))
		return TFS_OK;
	char hb[4096], *hp = hb;
	size_t need = tfs_npy_header_max(ts);
	if (need > sizeof hb && !(hp = malloc(need)))
		return TFS_ERR_NOMEM;
	*first = (uint32_t)tfs_npy_header(h, ts, view & TFS_VIEW_F32, hp, need);
	if (hp != hb)
		free(hp);
	return TFS_OK;
}

const struct tfs_view_ops tfs_view_tensor = {
	.name = "tensor",
	.opts = opts,
	.check = check,
	.state_new = state_new,
	.state_free = state_free,
	.built = built,
	.tensor_suffix = tensor_suffix,
	.tensor_first = tensor_first,
	.size = size,
	.pieces = pieces,
	.xattr_list = xattr_list,
	.xattr_get = xattr_get,
};
