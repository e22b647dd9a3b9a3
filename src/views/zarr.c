/* -o zarr: __zarr__/ at the root, every tensor as an array of a Zarr store
 * that format 2 readers (zarr-python 2) and format 3 readers (zarr-python
 * 3, TensorStore) read from the same files. Groups follow the dotted names
 * as the tree layout does, with its escaping. An array is cut in slabs of
 * whole rows along its first axis, so that every chunk file is one range
 * of the tensor's bytes, served as the tensor's file is (spliced, or the
 * remote cache's zero-copy path); both formats name a chunk the same file
 * ("3.0.0": v2's "." separator, v3's "v2" chunk key encoding). The last
 * slab's file is full size, its rows past the tensor's zeros from one
 * buffer of zeros: nothing of the tensor is copied.
 *
 * The groups and their documents are nodes, made at mount. An array is
 * one node, a generated directory (views/tree.h) added for its tensor:
 * its documents and chunks are named, found and read when
 * asked, so a header declaring petabytes costs no more than one of bytes.
 * What the arrays are made of is computed in compute/zarrdoc.c. */
#include "compute/zarrdoc.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/json.h"
#include "core/hash.h"
#include "core/mem.h"
#include "core/names.h"
#include "core/opts.h"
#include "compute/convert.h"
#include "views/tree.h"
#include "views/view.h"

#define TFS_ZARR_DIR "__zarr__"

/* A group's files (a node's ref: one of these, ROOT_GROUP for the root's). */
enum { F_ZGROUP, F_GROUP_ZATTRS, F_GROUP_JSON, ROOT_GROUP = 4 };
/* An array's entries: its documents (TFS_ZARR_ZARRAY...), then chunk
 * c as entry DOCS + c. */
#define DOCS 3
static const char *const doc_names[DOCS] = {".zarray", ".zattrs", "zarr.json"};

/* A long name is written in slices of about this many of its bytes; one
 * of more has the places of its slices kept (in[k] of the name, out[k]
 * of the text), so that a read of its documents makes only what it asks. */
#define SLICE (64u << 10)
struct slices {
	uint32_t tensor; /* its node */
	uint32_t n;
	uint64_t *in, *out; /* n + 1 each: [n] the name's length, the text's */
};

/* Names live as long as the tree: blocks that never move. */
struct zblock {
	struct zblock *next;
	size_t used, cap;
	char text[];
};

/* (parent, bytes) -> node, for the groups by their raw names and every
 * hashed name given (hashed names alone can meet another). */
struct zmap {
	uint32_t *parent, *node;
	const char **key;
	uint32_t *klen;
	size_t n, cap;
};

struct tfs_zarr {
	uint64_t target;
	const struct tfs_model *m;
	struct zblock *names;
	/* While the tree is built: the groups, and each tensor's (by shard,
	 * from base[shard] on). */
	struct zmap groups, hashed;
	uint32_t *leaf, *base;
	/* Tensors left out of the store, and the first one's line. */
	uint64_t left;
	char first_left[330];
	pthread_mutex_t lock;
	/* The root's attributes (the checkpoint's __metadata__), made when
	 * first asked for. */
	char *root_attrs, *root_json;
	size_t root_attrs_len, root_json_len;
	int root_ready;
	/* Long names' slices: at most a header's bytes over SLICE of them. */
	struct slices *long_names;
	size_t nlong, long_cap;
};

/* The option's value (check refuses a bad one before anything is opened). */
static int parse_target(const char *v, uint64_t *n)
{
	*n = TFS_ZARR_CHUNK_DEFAULT;
	return v && (tfs_opt_number(v, 1, 1ull << 40, n) || *n == 0) ? -1 : 0;
}

static void *state_new(const struct tfs_model *m, const struct tfs_tree_opts *o)
{
	struct tfs_zarr *z = calloc(1, sizeof *z);
	if (z) {
		pthread_mutex_init(&z->lock, NULL);
		z->m = m;
		parse_target(tfs_opts_get(o->opts, "zarr_chunk_size"), &z->target);
	}
	return z;
}

static void map_free(struct zmap *m)
{
	free(m->parent);
	free(m->node);
	free(m->key);
	free(m->klen);
	memset(m, 0, sizeof *m);
}

/* What only building needs. */
static void built(struct tfs_zarr *z)
{
	map_free(&z->groups);
	map_free(&z->hashed);
	free(z->leaf);
	free(z->base);
	z->leaf = z->base = NULL;
}

static void state_free(void *state)
{
	struct tfs_zarr *z = state;
	built(z);
	for (struct zblock *b = z->names, *nx; b; b = nx) {
		nx = b->next;
		free(b);
	}
	for (size_t k = 0; k < z->nlong; k++) {
		free(z->long_names[k].in);
		free(z->long_names[k].out);
	}
	free(z->long_names);
	free(z->root_attrs);
	free(z->root_json);
	pthread_mutex_destroy(&z->lock);
	free(z);
}

static const char *keep(struct tfs_zarr *z, const char *s, size_t n)
{
	if (!z->names || z->names->cap - z->names->used < n + 1) {
		size_t cap = n + 1 > 65536 ? n + 1 : 65536;
		struct zblock *b = malloc(sizeof *b + cap);
		if (!b)
			return NULL;
		b->next = z->names;
		b->used = 0;
		b->cap = cap;
		z->names = b;
	}
	char *p = z->names->text + z->names->used;
	memcpy(p, s, n);
	p[n] = 0;
	z->names->used += n + 1;
	return p;
}

static size_t map_slot(const struct zmap *m, uint32_t parent, const char *k, size_t n)
{
	size_t j = tfs_hash(k, n, tfs_hash_seed ^ ((uint64_t)parent * 0x9e3779b97f4a7c15ull)) & (m->cap - 1);
	while (m->node[j] && !(m->parent[j] == parent && m->klen[j] == n && memcmp(m->key[j], k, n) == 0))
		j = (j + 1) & (m->cap - 1);
	return j;
}

static uint32_t map_get(const struct zmap *m, uint32_t parent, const char *k, size_t n)
{
	return m->cap ? m->node[map_slot(m, parent, k, n)] : 0;
}

/* k must live while the map does. */
static tfs_err map_put(struct zmap *m, uint32_t parent, const char *k, size_t n, uint32_t node)
{
	if ((m->n + 1) * 2 > m->cap) {
		struct zmap g = {0};
		g.cap = m->cap ? m->cap * 2 : 256;
		g.parent = calloc(g.cap, sizeof *g.parent);
		g.node = calloc(g.cap, sizeof *g.node);
		g.key = calloc(g.cap, sizeof *g.key);
		g.klen = calloc(g.cap, sizeof *g.klen);
		if (!g.parent || !g.node || !g.key || !g.klen) {
			map_free(&g);
			return TFS_ERR_NOMEM;
		}
		for (size_t i = 0; i < m->cap; i++)
			if (m->node[i]) {
				size_t j = map_slot(&g, m->parent[i], m->key[i], m->klen[i]);
				g.parent[j] = m->parent[i];
				g.node[j] = m->node[i];
				g.key[j] = m->key[i];
				g.klen[j] = m->klen[i];
			}
		g.n = m->n;
		map_free(m);
		*m = g;
	}
	size_t j = map_slot(m, parent, k, n);
	m->parent[j] = parent;
	m->node[j] = node;
	m->key[j] = k;
	m->klen[j] = (uint32_t)n;
	m->n++;
	return TFS_OK;
}

/* A group's three documents. */
static tfs_err add_docs(struct tfs_tree_add *a, uint32_t dir, uint32_t root)
{
	static const char *const names[] = {".zgroup", ".zattrs", "zarr.json"};
	tfs_err e = TFS_OK;
	for (uint32_t k = 0; !e && k < 3; k++)
		e = tfs_tree_add_node(a, dir, names[k], 0, k | root, NULL);
	return e;
}

/* A directory under `parent` named after raw[0..len) as the tree layout
 * names it: room kept for `room` more bytes, then `suffix`; a hashed
 * name that meets another gets "-N". */
static tfs_err add_dir(struct tfs_zarr *z, struct tfs_tree_add *a, uint32_t parent, const char *raw,
		       size_t len, size_t room, const char *suffix, uint32_t *out)
{
	char buf[TFS_NAME_MAX + 32];
	int hashed;
	size_t n = tfs_name_map_max(raw, len, buf, TFS_NAME_MAX - room, &hashed);
	memcpy(buf + n, suffix, strlen(suffix) + 1);
	n += strlen(suffix);
	if (hashed) {
		size_t base = n;
		for (unsigned k = 1; map_get(&z->hashed, parent, buf, n); k++)
			n = base + (size_t)snprintf(buf + base, sizeof buf - base, "-%u", k);
	}
	const char *name = keep(z, buf, n);
	if (!name)
		return TFS_ERR_NOMEM;
	tfs_err e = tfs_tree_add_node(a, parent, name, 1, 0, out);
	if (!e && hashed)
		e = map_put(&z->hashed, parent, name, n, *out);
	return e;
}

static tfs_err check(const struct tfs_opts *o, struct tfs_diag *d)
{
	const char *v = tfs_opts_get(o, "zarr_chunk_size");
	uint64_t n;
	if (parse_target(v, &n))
		return tfs_fail(d, TFS_ERR_INVAL,
				"-o zarr_chunk_size=%s: expected a size from 1 to 1T (64M, 256K...)", v);
	return TFS_OK;
}

static int wanted(const struct tfs_tree_opts *o)
{
	return tfs_opts_get(o->opts, "zarr") != NULL;
}

static const char *const *reserves(const struct tfs_tree_opts *o)
{
	static const char *const names[] = {TFS_ZARR_DIR, NULL};
	(void)o;
	return names;
}

/* __zarr__/ and its groups, from every tensor's name (the arrays come
 * after, once every group is known: tensors "a.b" and "a.b.c" make the
 * array "b.tensor" beside the group "b"); each tensor's group kept for
 * then. Names mostly come sorted: a name with the previous one's groups
 * takes them as they are. A group's name is as the tree layout would name
 * its directory, leaving the room every directory leaves. */
static tfs_err add_groups(struct tfs_zarr *z, struct tfs_tree_add *a, struct tfs_diag *d)
{
	const struct tfs_model *m = z->m;
	uint32_t root;
	tfs_err e = tfs_tree_add_node(a, TFS_TREE_ROOT, TFS_ZARR_DIR, 1, 0, &root);
	if (!e)
		e = add_docs(a, root, ROOT_GROUP);
	size_t total = 0;
	z->base = e ? NULL : malloc(((size_t)m->nshards + 1) * sizeof *z->base);
	for (uint32_t s = 0; z->base && s < m->nshards; s++) {
		z->base[s] = (uint32_t)total;
		total += m->shards[s].h.n;
	}
	z->leaf = z->base ? tfs_malloc_big((total + 1) * sizeof *z->leaf) : NULL;
	const char *prev = NULL;
	size_t prev_len = 0, at = 0;
	uint32_t prev_dir = root;
	if (!e && !z->leaf)
		e = TFS_ERR_NOMEM;
	for (uint32_t s = 0; !e && s < m->nshards; s++) {
		const struct tfs_table *h = &m->shards[s].h;
		for (uint32_t i = 0; !e && i < h->n; i++, at++) {
			const char *name = tfs_tensor_name(h, &h->t[i]);
			const char *dot = memrchr(name, '.', h->t[i].name_len);
			/* (the prefix with its last '.': "." is not "") */
			size_t plen = dot ? (size_t)(dot - name) + 1 : 0;
			uint32_t parent = root;
			if (prev && plen == prev_len && memcmp(name, prev, plen) == 0) {
				z->leaf[at] = prev_dir;
				continue;
			}
			size_t start = 0;
			for (size_t k = 0; !e && k < plen; k++) {
				if (name[k] != '.')
					continue;
				uint32_t dir = map_get(&z->groups, parent, name + start, k - start);
				if (!dir) {
					e = add_dir(z, a, parent, name + start, k - start,
						    tfs_tree_dir_room(), "", &dir);
					if (!e)
						e = map_put(&z->groups, parent, name + start, k - start, dir);
					if (!e)
						e = add_docs(a, dir, 0);
				}
				parent = dir;
				start = k + 1;
			}
			z->leaf[at] = parent;
			prev = name;
			prev_len = plen;
			prev_dir = parent;
		}
	}
	return e ? tfs_fail(d, e, "out of memory building -o zarr's store") : TFS_OK;
}

/* Why tensor t has no array (its geometry in g), or NULL. */
static const char *left_out(const struct tfs_zarr *z, const struct tfs_table *h, const struct tfs_tensor *t,
			    struct tfs_zarr_geom *g, char *why, size_t cap)
{
	if (tfs_zarr_geom(h, t, z->target, g))
		return "is too large to describe"; /* (no format lets one through) */
	if (g->ndim > TFS_ZARR_NDIM_MAX)
		snprintf(why, cap, "has %u dimensions, over the %d dimensions NumPy holds", (unsigned)g->ndim,
			 TFS_ZARR_NDIM_MAX);
	else if (g->nchunks > TFS_TREE_GENERATED_MAX - DOCS)
		snprintf(why, cap,
			 "would have %llu chunks, over the 1,000,000 files a directory may hold "
			 "(a larger -o zarr_chunk_size makes fewer)",
			 (unsigned long long)g->nchunks);
	else
		return NULL;
	return why;
}

/* The tensor's array: a generated directory in its group (its documents,
 * then its chunks), or a line for the notice. */
static tfs_err add_array(struct tfs_zarr *z, struct tfs_tree_add *a, uint32_t tensor)
{
	const struct tfs_node *tn = &tfs_tree_add_tree(a)->nodes[tensor];
	const struct tfs_table *h = &z->m->shards[tn->shard].h;
	const struct tfs_tensor *t = &h->t[tn->ref];
	struct tfs_zarr_geom g;
	char buf[200], q[120];
	const char *name = tfs_tensor_name(h, t), *why = left_out(z, h, t, &g, buf, sizeof buf);
	if (why) {
		tfs_quote(q, sizeof q, name, t->name_len);
		if (!z->left++)
			snprintf(z->first_left, sizeof z->first_left, "%s %s", q, why);
		return TFS_OK;
	}
	uint32_t parent = z->leaf[z->base[tn->shard] + tn->ref], dir;
	const char *dot = memrchr(name, '.', t->name_len);
	size_t start = dot ? (size_t)(dot - name) + 1 : 0, len = t->name_len - start;
	int conflict = map_get(&z->groups, parent, name + start, len) != 0;
	tfs_err e = add_dir(z, a, parent, name + start, len, conflict ? strlen(TFS_CONFLICT_SUFFIX) : 0,
			    conflict ? TFS_CONFLICT_SUFFIX : "", &dir);
	return e ? e : tfs_tree_generate(a, dir, tensor, (uint32_t)(DOCS + g.nchunks));
}

/* The store: its groups, then an array for every tensor's node (all
 * there before any view's files), in the order of the nodes; then what
 * only building needed is let go. */
static tfs_err at_root(struct tfs_tree_add *a, void *state, struct tfs_diag *d)
{
	struct tfs_zarr *z = state;
	uint32_t end = tfs_tree_add_tree(a)->nnodes;
	tfs_err e = add_groups(z, a, d);
	for (uint32_t i = 1; !e && i < end; i++)
		if (tfs_tree_add_tree(a)->nodes[i].kind == TFS_NODE_TENSOR)
			e = add_array(z, a, i);
	built(z);
	return e;
}

static int notice(const struct tfs_tree *t, const void *state, char *buf, size_t cap)
{
	const struct tfs_zarr *z = state;
	(void)t;
	if (z->left)
		snprintf(buf, cap, "-o zarr leaves out %llu tensor%s: %s%s", (unsigned long long)z->left,
			 z->left == 1 ? "" : "s", z->first_left, z->left > 1 ? ", and more" : "");
	return z->left != 0;
}

/* ---- an array's entries ---- */

/* The tensor of an array whose directory's ref is the tensor's node, and
 * its geometry (it had one: the array is there). */
static void array_of(const struct tfs_tree *t, const struct tfs_zarr *z, uint32_t tensor,
		     const struct tfs_table **h, const struct tfs_tensor **ts, struct tfs_zarr_geom *g)
{
	const struct tfs_node *tn = &t->nodes[tensor];
	*h = &t->m->shards[tn->shard].h;
	*ts = &(*h)->t[tn->ref];
	tfs_zarr_geom(*h, *ts, z->target, g);
}

static size_t entry_name(const struct tfs_tree *t, const struct tfs_node *dir, uint32_t i, char *out)
{
	const struct tfs_table *h;
	const struct tfs_tensor *ts;
	struct tfs_zarr_geom g;
	if (i < DOCS) {
		strcpy(out, doc_names[i]);
		return strlen(out);
	}
	array_of(t, t->vstate[dir->gen], dir->ref, &h, &ts, &g);
	return tfs_zarr_chunk_key(&g, i - DOCS, out, TFS_ZARR_KEY_MAX);
}

static int entry_find(const struct tfs_tree *t, const struct tfs_node *dir, const char *name, size_t len,
		      uint32_t *i)
{
	const struct tfs_table *h;
	const struct tfs_tensor *ts;
	struct tfs_zarr_geom g;
	uint64_t c;
	for (uint32_t k = 0; k < DOCS; k++)
		if (strlen(doc_names[k]) == len && memcmp(doc_names[k], name, len) == 0) {
			*i = k;
			return 1;
		}
	array_of(t, t->vstate[dir->gen], dir->ref, &h, &ts, &g);
	if (!tfs_zarr_chunk_find(&g, name, len, &c))
		return 0;
	*i = (uint32_t)(DOCS + c);
	return 1;
}

/* ---- an array's documents: the text around the name, the name in slices ---- */

/* The name's characters [from, to) as the documents write them, into
 * *buf from its start. */
static tfs_err slice_text(const char *name, size_t from, size_t to, char **buf, size_t *len, size_t *cap)
{
	*len = 0;
	return tfs_zarr_name_part(name, from, to, buf, len, cap);
}

/* Where a name's slices start, in the name and in its text: slice k is
 * in[k]..in[k + 1], written at out[k]; out[n] is the text's length. */
struct where {
	uint32_t n;
	const uint64_t *in, *out;
	uint64_t one_in[2], one_out[2];
};

/* The places of a long name's slices, made once and kept (under z->lock):
 * 16 bytes a slice. */
static tfs_err long_name(struct tfs_zarr *z, uint32_t tensor, const char *name, size_t n, struct where *w)
{
	const struct slices *found = NULL;
	for (size_t k = 0; k < z->nlong && !found; k++)
		if (z->long_names[k].tensor == tensor)
			found = &z->long_names[k];
	if (!found) {
		struct slices sl = {tensor, 0, NULL, NULL};
		size_t most = n / SLICE + 2, blen = 0, bcap = 0;
		char *buf = NULL;
		tfs_err e = TFS_OK;
		sl.in = malloc(most * sizeof *sl.in);
		sl.out = malloc(most * sizeof *sl.out);
		if (!sl.in || !sl.out ||
		    tfs_grow((void **)&z->long_names, &z->long_cap, z->nlong + 1, sizeof sl))
			e = TFS_ERR_NOMEM;
		for (uint64_t at = 0, text = 0; !e; sl.n++) {
			sl.in[sl.n] = at;
			sl.out[sl.n] = text;
			if (at == n)
				break;
			size_t to = tfs_zarr_name_cut(name, n, at + SLICE);
			e = slice_text(name, at, to, &buf, &blen, &bcap);
			text += blen;
			at = to;
		}
		free(buf);
		if (e) {
			free(sl.in);
			free(sl.out);
			return e;
		}
		z->long_names[z->nlong] = sl;
		found = &z->long_names[z->nlong++];
	}
	/* (the arrays stay where they are when long_names moves) */
	w->n = found->n;
	w->in = found->in;
	w->out = found->out;
	return TFS_OK;
}

static tfs_err name_slices(struct tfs_zarr *z, uint32_t tensor, const char *name, size_t n, struct where *w)
{
	if (n > SLICE) {
		pthread_mutex_lock(&z->lock);
		tfs_err e = long_name(z, tensor, name, n, w);
		pthread_mutex_unlock(&z->lock);
		return e;
	}
	/* A short name is one slice, its text's length made again. */
	char *buf = NULL;
	size_t blen = 0, bcap = 0;
	tfs_err e = slice_text(name, 0, n, &buf, &blen, &bcap);
	free(buf);
	w->n = 1;
	w->one_in[0] = w->one_out[0] = 0;
	w->one_in[1] = n;
	w->one_out[1] = blen;
	w->in = w->one_in;
	w->out = w->one_out;
	return e;
}

/* Bytes [off, off + len) of the quoted name (its text's length + 2) into
 * to: only the slices they fall in are made. */
static tfs_err name_bytes(const struct where *w, const char *name, uint64_t off, size_t len, char *to)
{
	uint64_t text = w->out[w->n];
	char *buf = NULL;
	size_t blen = 0, bcap = 0;
	tfs_err e = TFS_OK;
	while (!e && len) {
		if (off == 0 || off == text + 1) {
			*to++ = '"';
			off++;
			len--;
			continue;
		}
		uint64_t at = off - 1; /* in the text */
		uint32_t lo = 0, hi = w->n - 1;
		while (lo < hi) { /* the last slice starting at or before `at` */
			uint32_t mid = lo + (hi - lo + 1) / 2;
			if (w->out[mid] <= at)
				lo = mid;
			else
				hi = mid - 1;
		}
		if ((e = slice_text(name, w->in[lo], w->in[lo + 1], &buf, &blen, &bcap)))
			break;
		if (blen != w->out[lo + 1] - w->out[lo]) {
			e = TFS_ERR_IO; /* (the same bytes make the same text) */
			break;
		}
		size_t k = (size_t)(w->out[lo + 1] - at) < len ? (size_t)(w->out[lo + 1] - at) : len;
		memcpy(to, buf + (at - w->out[lo]), k);
		to += k;
		off += k;
		len -= k;
	}
	free(buf);
	return e;
}

/* Copies what [off, off + len) holds of text[0..n) placed at `at`. */
static void part(const char *text, uint64_t n, uint64_t at, uint64_t off, size_t len, char *to)
{
	uint64_t a = off > at ? off : at, b = off + len < at + n ? off + len : at + n;
	if (a < b)
		memcpy(to + (a - off), text + (a - at), b - a);
}

/* An array document's size, and with to its bytes [off, off + len). */
static tfs_err array_doc(const struct tfs_tree *t, struct tfs_zarr *z, const struct tfs_node *n, uint64_t off,
			 size_t len, char *to, uint64_t *size)
{
	const struct tfs_table *h;
	const struct tfs_tensor *ts;
	struct tfs_zarr_geom g;
	struct tfs_zarr_doc x;
	struct where w;
	const struct tfs_node *dir = &t->nodes[n->parent];
	array_of(t, z, n->first, &h, &ts, &g);
	tfs_err e = tfs_zarr_doc((int)n->ref, &g, h, ts, dir->fname, dir->fname_len, &x);
	if (e)
		return e;
	const char *name = tfs_tensor_name(h, ts);
	uint64_t nl = 0;
	if (x.named && !(e = name_slices(z, n->first, name, ts->name_len, &w)))
		nl = w.out[w.n] + 2;
	*size = x.head_len + nl + x.tail_len;
	if (!e && to && (off > *size || len > *size - off))
		e = TFS_ERR_IO; /* (its size was asked for before: it cannot change) */
	if (!e && to) {
		part(x.head, x.head_len, 0, off, len, to);
		part(x.tail, x.tail_len, x.head_len + nl, off, len, to);
		uint64_t a = off > x.head_len ? off : x.head_len;
		uint64_t b = off + len < x.head_len + nl ? off + len : x.head_len + nl;
		if (a < b)
			e = name_bytes(&w, name, a - x.head_len, (size_t)(b - a), to + (a - off));
	}
	tfs_zarr_doc_free(&x);
	return e;
}

/* ---- the groups' documents ---- */

static tfs_err root_docs(const struct tfs_tree *t, struct tfs_zarr *z)
{
	tfs_err e = TFS_OK;
	pthread_mutex_lock(&z->lock);
	if (!z->root_ready) {
		size_t cap = 0;
		e = tfs_model_meta_json(t->m, &z->root_attrs, &z->root_attrs_len);
		if (!e)
			e = tfs_zarr_ascii(&z->root_attrs, &z->root_attrs_len, &cap, 0);
		cap = 0;
		if (!e)
			e = tfs_zarr_group_json(z->root_attrs, z->root_attrs_len, &z->root_json,
						&z->root_json_len, &cap);
		z->root_ready = !e;
	}
	pthread_mutex_unlock(&z->lock);
	return e;
}

/* A group document's text: into *buf (malloc'd, the caller frees it), or
 * the root's kept one (*buf NULL). */
static tfs_err group_doc(const struct tfs_tree *t, struct tfs_zarr *z, const struct tfs_node *n,
			 const char **text, size_t *len, char **buf)
{
	size_t cap = 0;
	uint32_t what = n->ref & ~(uint32_t)ROOT_GROUP;
	tfs_err e = TFS_OK;
	*text = *buf = NULL;
	*len = 0;
	if (what != F_ZGROUP && (n->ref & ROOT_GROUP)) {
		if ((e = root_docs(t, z)))
			return e;
		*text = what == F_GROUP_ZATTRS ? z->root_attrs : z->root_json;
		*len = what == F_GROUP_ZATTRS ? z->root_attrs_len : z->root_json_len;
		return TFS_OK;
	}
	if (what == F_ZGROUP)
		e = tfs_zarr_zgroup(buf, len, &cap);
	else if (what == F_GROUP_ZATTRS)
		e = tfs_json_puts(buf, len, &cap, "{}\n");
	else
		e = tfs_zarr_group_json("{}", 2, buf, len, &cap);
	*text = *buf;
	return e;
}

/* ---- the view: reading ---- */

static int is_entry(const struct tfs_tree *t, const struct tfs_node *n)
{
	return t->nodes[n->parent].gen != 0;
}

static uint64_t size(const struct tfs_tree *t, const struct tfs_node *n)
{
	struct tfs_zarr *z = t->vstate[n->kind];
	uint64_t len = 0;
	if (is_entry(t, n) && n->ref >= DOCS) {
		const struct tfs_table *h;
		const struct tfs_tensor *ts;
		struct tfs_zarr_geom g;
		array_of(t, z, n->first, &h, &ts, &g);
		return g.chunk_bytes;
	}
	if (is_entry(t, n))
		return array_doc(t, z, n, 0, 0, NULL, &len) ? 0 : len;
	const char *text;
	char *buf;
	size_t tl;
	tfs_err e = group_doc(t, z, n, &text, &tl, &buf);
	free(buf);
	return e ? 0 : tl;
}

/* Never written: the zeros after a last slab's rows. */
static char zeros[256 << 10];

static tfs_err chunk_pieces(const struct tfs_tree *t, struct tfs_zarr *z, const struct tfs_node *n,
			    uint64_t off, size_t len, struct tfs_pieces *out)
{
	const struct tfs_table *h;
	const struct tfs_tensor *ts;
	struct tfs_zarr_geom g;
	uint64_t from, data, nzero;
	array_of(t, z, n->first, &h, &ts, &g);
	struct tfs_source *src = t->m->shards[t->nodes[n->first].shard].src;
	/* A shard changed since the mount: EIO, as its tensors' files give
	 * (whose check is at open; a chunk is spliced from it too). */
	if (tfs_source_changed(src))
		return TFS_ERR_IO;
	tfs_zarr_chunk_span(&g, n->ref - DOCS, off, len, &from, &data, &nzero);
	tfs_err e = TFS_OK;
	if (data && g.converted)
		e = tfs_f32_pieces(src, ts, from, (size_t)data, out);
	else if (data)
		e = tfs_pieces_src(out, src, ts->begin + from, (size_t)data, ts->end);
	while (!e && nzero) {
		size_t k = nzero < sizeof zeros ? (size_t)nzero : sizeof zeros;
		e = tfs_pieces_mem(out, zeros, k);
		nzero -= k;
	}
	return e;
}

static tfs_err pieces(const struct tfs_tree *t, const struct tfs_node *n, uint64_t off, size_t len,
		      struct tfs_pieces *out)
{
	struct tfs_zarr *z = t->vstate[n->kind];
	if (is_entry(t, n) && n->ref >= DOCS)
		return chunk_pieces(t, z, n, off, len, out);
	char *to = tfs_pieces_room(out, len);
	if (!to)
		return TFS_ERR_NOMEM;
	uint64_t whole;
	tfs_err e = TFS_OK;
	if (is_entry(t, n)) {
		e = array_doc(t, z, n, off, len, to, &whole);
	} else {
		const char *text;
		char *buf;
		size_t tl;
		e = group_doc(t, z, n, &text, &tl, &buf);
		if (!e && (off > tl || len > tl - off))
			e = TFS_ERR_IO; /* (its size was asked for before: it cannot change) */
		else if (!e)
			memcpy(to, text + off, len);
		free(buf);
	}
	return e ? e : tfs_pieces_mem(out, to, len);
}

static const struct tfs_opt_spec opts[] = {
	{"zarr", 0, "__zarr__/: every tensor as an array of a Zarr store (v2 and v3)", NULL, 0},
	{"zarr_chunk_size", 1, "-o zarr's chunks: slabs of rows this size (64M)", "SIZE", 0},
	{NULL, 0, NULL, NULL, 0},
};

const struct tfs_view_ops tfs_view_zarr = {
	.name = "zarr",
	.size = size,
	.pieces = pieces,
	.state_new = state_new,
	.state_free = state_free,
	.at_root = at_root,
	.entry_name = entry_name,
	.entry_find = entry_find,
	.notice = notice,
	.opts = opts,
	.check = check,
	.wanted = wanted,
	.reserves = reserves,
};
