/* -o max_shard_size=SIZE: the model re-sharded as transformers'
 * save_pretrained(max_shard_size=SIZE) shards it (huggingface_hub's
 * split_state_dict_into_shards_factory), in __shards__/:
 * model-0000K-of-0000N.safetensors and model.safetensors.index.json, or a
 * single model.safetensors when everything fits in one, as it does.
 *
 * The tensors go in the mount's order (the shards of the source in index
 * order, each in its header's order), the loaders' state-dict order; a
 * shard is closed when the next tensor would take it past SIZE; a tensor
 * larger than SIZE gets a shard of its own, placed where it is met, while
 * the shard being filled stays open (the factory's rule, so such a shard
 * can come before the one holding the tensors read before it). Each shard
 * is a safetensors file like -o export's (views/export.h), with the
 * tensors as stored, whatever convert= and format= show, and the model's
 * metadata. The plan is made at mount (sizes only); each file's header the
 * first time it is asked for, then kept. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "compute/stwrite.h"
#include "core/dtype.h"
#include "core/json.h"
#include "core/mem.h"
#include "core/utf8.h"
#include "views/tree.h"
#include "views/view.h"

/* The re-sharded set's directory, at the root. */
#define DIR_NAME "__shards__"

struct item {
	uint32_t shard, idx; /* the tensor in the model */
};

struct rfile {
	uint32_t first, count; /* its items: plan order */
	char name[64];
	int done;
	tfs_err err;
	char *hdr;
	size_t hdr_len;
	struct tfs_st_entry *ent; /* sorted into the file's order */
	uint64_t *start;          /* count + 1 */
};

struct tfs_reshard {
	pthread_mutex_t lock;
	const struct tfs_model *m;
	uint64_t max; /* -o max_shard_size */
	struct item *items;
	uint32_t n;
	struct rfile *files;
	uint32_t nfiles;
	uint64_t total;
	uint64_t left_out;
	char first_left[160];
	int meta_done;
	tfs_err meta_err;
	char *meta;
	size_t meta_len;
	char *index;
	size_t index_len;
};

static int includes(const struct tfs_table *h, const struct tfs_tensor *ts)
{
	const char *name = tfs_tensor_name(h, ts);
	return ts->dtype < TFS_DT_SAFETENSORS_END &&
	       !(ts->name_len == 12 && memcmp(name, "__metadata__", 12) == 0) &&
	       tfs_utf8_check((const unsigned char *)name, ts->name_len) == ts->name_len;
}

static const struct tfs_tensor *item_tensor(const struct tfs_reshard *r, const struct item *it,
					    const struct tfs_table **h)
{
	*h = &r->m->shards[it->shard].h;
	return &(*h)->t[it->idx];
}

/* The factory's rule (see the top); files[] in the order it appends them. */
static tfs_err plan(struct tfs_reshard *r, uint64_t max)
{
	const struct tfs_model *m = r->m;
	uint64_t n = 0;
	for (uint32_t s = 0; s < m->nshards; s++)
		n += m->shards[s].h.n;
	if (n > UINT32_MAX)
		return TFS_ERR_NOMEM;
	/* Items are regrouped by file: a tensor over the limit takes its
	 * own file at once, the open file's tensors stay together. */
	r->items = tfs_malloc_big((n ? n : 1) * sizeof *r->items);
	struct item *open_items = tfs_malloc_big((n ? n : 1) * sizeof *open_items);
	r->files = calloc(n + 1, sizeof *r->files);
	if (!r->items || !open_items || !r->files) {
		free(open_items);
		return TFS_ERR_NOMEM;
	}
	uint32_t nopen = 0;
	uint64_t open_size = 0;
	for (uint32_t s = 0; s < m->nshards; s++) {
		const struct tfs_table *h = &m->shards[s].h;
		for (uint32_t i = 0; i < h->n; i++) {
			const struct tfs_tensor *ts = &h->t[i];
			if (!includes(h, ts)) {
				if (!r->left_out++)
					tfs_quote(r->first_left, sizeof r->first_left, tfs_tensor_name(h, ts),
						  ts->name_len);
				continue;
			}
			uint64_t sz = tfs_tensor_size(ts);
			r->total += sz;
			struct item it = {s, i};
			if (sz > max) {
				r->files[r->nfiles++] = (struct rfile){.first = r->n, .count = 1};
				r->items[r->n++] = it;
				continue;
			}
			if (nopen && open_size + sz > max) {
				r->files[r->nfiles++] = (struct rfile){.first = r->n, .count = nopen};
				memcpy(r->items + r->n, open_items, nopen * sizeof *open_items);
				r->n += nopen;
				nopen = 0;
				open_size = 0;
			}
			open_items[nopen++] = it;
			open_size += sz;
		}
	}
	if (nopen) {
		r->files[r->nfiles++] = (struct rfile){.first = r->n, .count = nopen};
		memcpy(r->items + r->n, open_items, nopen * sizeof *open_items);
		r->n += nopen;
	}
	free(open_items);
	for (uint32_t k = 0; k < r->nfiles; k++) {
		if (r->nfiles == 1)
			snprintf(r->files[k].name, sizeof r->files[k].name, "model.safetensors");
		else
			snprintf(r->files[k].name, sizeof r->files[k].name, "model-%05u-of-%05u.safetensors",
				 k + 1, r->nfiles);
	}
	return TFS_OK;
}

/* ---- the index ---- */

struct wm {
	const char *name;
	uint32_t len, file;
};

static int wm_cmp(const void *pa, const void *pb)
{
	const struct wm *a = pa, *b = pb;
	size_t n = a->len < b->len ? a->len : b->len;
	int c = memcmp(a->name, b->name, n);
	return c ? c : (a->len > b->len) - (a->len < b->len);
}

/* As transformers writes it: json.dumps(index, indent=2, sort_keys=True)
 * and a newline (names as UTF-8, where Python escapes them: the same JSON). */
static tfs_err make_index(struct tfs_reshard *r)
{
	struct wm *w = tfs_malloc_big(((size_t)r->n + 1) * sizeof *w);
	char *b = NULL;
	size_t n = 0, cap = 0;
	if (!w)
		return TFS_ERR_NOMEM;
	for (uint32_t f = 0; f < r->nfiles; f++)
		for (uint32_t k = 0; k < r->files[f].count; k++) {
			const struct tfs_table *h;
			const struct tfs_tensor *ts = item_tensor(r, &r->items[r->files[f].first + k], &h);
			w[r->files[f].first + k] = (struct wm){tfs_tensor_name(h, ts), ts->name_len, f};
		}
	qsort(w, r->n, sizeof *w, wm_cmp);
	tfs_err e = tfs_json_puts(&b, &n, &cap, "{\n  \"metadata\": {\n    \"total_size\": ");
	if (!e)
		e = tfs_json_u64(&b, &n, &cap, r->total);
	if (!e)
		e = tfs_json_puts(&b, &n, &cap, "\n  },\n  \"weight_map\": {");
	for (uint32_t i = 0; !e && i < r->n; i++) {
		e = tfs_json_puts(&b, &n, &cap, i ? ",\n    " : "\n    ");
		if (!e)
			e = tfs_json_str_std(&b, &n, &cap, w[i].name, w[i].len);
		if (!e)
			e = tfs_json_puts(&b, &n, &cap, ": \"");
		if (!e)
			e = tfs_json_puts(&b, &n, &cap, r->files[w[i].file].name);
		if (!e)
			e = tfs_json_puts(&b, &n, &cap, "\"");
	}
	if (!e)
		e = tfs_json_puts(&b, &n, &cap, r->n ? "\n  }\n}\n" : "}\n}\n");
	free(w);
	if (e) {
		free(b);
		return e;
	}
	r->index = b;
	r->index_len = n;
	return TFS_OK;
}

/* ---- a shard file ---- */

static tfs_err make_file(struct tfs_reshard *r, struct rfile *f)
{
	if (!r->meta_done) {
		r->meta_err = tfs_st_meta(r->m, &r->meta, &r->meta_len);
		r->meta_done = 1;
	}
	if (r->meta_err)
		return r->meta_err;
	f->ent = tfs_malloc_big(((size_t)f->count + 1) * sizeof *f->ent);
	f->start = tfs_malloc_big(((size_t)f->count + 1) * sizeof *f->start);
	if (!f->ent || !f->start)
		return TFS_ERR_NOMEM;
	for (uint32_t k = 0; k < f->count; k++) {
		const struct tfs_table *h;
		const struct tfs_tensor *ts = item_tensor(r, &r->items[f->first + k], &h);
		f->ent[k] = (struct tfs_st_entry){
			tfs_tensor_name(h, ts), ts->name_len, ts->dtype, h->dims + ts->dims_off, ts->ndim,
			tfs_tensor_size(ts),    f->first + k};
	}
	return tfs_st_header(f->ent, f->count, r->meta ? r->meta : "", r->meta_len, &f->hdr, &f->hdr_len,
			     f->start);
}

/* The file's header made (once); NULL when it cannot be. */
static struct rfile *ready(const struct tfs_tree *t, const struct tfs_node *nd)
{
	struct tfs_reshard *r = t->vstate[nd->kind];
	if (nd->ref >= r->nfiles)
		return NULL;
	struct rfile *f = &r->files[nd->ref];
	pthread_mutex_lock(&r->lock);
	if (!f->done) {
		f->err = make_file(r, f);
		f->done = 1;
		if (f->err)
			tfs_log("%s/%s: cannot be made: %s", DIR_NAME, f->name,
				f->err == TFS_ERR_FORMAT ? "its header would be over safetensors' limit"
							 : "out of memory");
	}
	pthread_mutex_unlock(&r->lock);
	return f->err ? NULL : f;
}

static const char *index_of(const struct tfs_tree *t, const struct tfs_node *nd, size_t *len)
{
	struct tfs_reshard *r = t->vstate[nd->kind];
	pthread_mutex_lock(&r->lock);
	if (!r->index && make_index(r))
		tfs_log("%s/model.safetensors.index.json: cannot be made: out of memory", DIR_NAME);
	pthread_mutex_unlock(&r->lock);
	*len = r->index_len;
	return r->index;
}

static uint64_t size(const struct tfs_tree *t, const struct tfs_node *nd)
{
	struct tfs_reshard *r = t->vstate[nd->kind];
	size_t len;
	if (nd->ref == r->nfiles)
		return index_of(t, nd, &len) ? len : 0;
	struct rfile *f = ready(t, nd);
	return f ? f->start[f->count] : 0;
}

static tfs_err check(const struct tfs_tree *t, const struct tfs_node *nd)
{
	return size(t, nd) ? TFS_OK : TFS_ERR_NOMEM;
}

static tfs_err pieces(const struct tfs_tree *t, const struct tfs_node *nd, uint64_t off, size_t len,
		      struct tfs_pieces *out)
{
	struct tfs_reshard *r = t->vstate[nd->kind];
	if (nd->ref == r->nfiles) {
		size_t il;
		const char *ix = index_of(t, nd, &il);
		if (!ix || off > il || len > il - off)
			return TFS_ERR_NOMEM;
		return tfs_pieces_mem(out, ix + off, len);
	}
	struct rfile *f = ready(t, nd);
	if (!f)
		return TFS_ERR_NOMEM;
	uint64_t end = off + len;
	tfs_err e = TFS_OK;
	if (off < f->hdr_len) {
		uint64_t stop = end < f->hdr_len ? end : f->hdr_len;
		e = tfs_pieces_mem(out, f->hdr + off, (size_t)(stop - off));
		off = stop;
	}
	uint32_t lo = 0, hi = f->count;
	while (hi - lo > 1) {
		uint32_t mid = lo + (hi - lo) / 2;
		if (f->start[mid] <= off)
			lo = mid;
		else
			hi = mid;
	}
	for (uint32_t k = lo; !e && k < f->count && off < end; k++) {
		if (f->start[k + 1] <= off)
			continue;
		const struct item *it = &r->items[f->ent[k].id];
		const struct tfs_table *h;
		const struct tfs_tensor *ts = item_tensor(r, it, &h);
		uint64_t stop = end < f->start[k + 1] ? end : f->start[k + 1];
		e = tfs_pieces_src(out, r->m->shards[it->shard].src, ts->begin + (off - f->start[k]),
				   (size_t)(stop - off), ts->end);
		off = stop;
	}
	return e;
}

/* A size as transformers' max_shard_size takes it ("5GB" is 5 x 10^9,
 * "5GiB" 5 x 2^30; KB, MB, TB alike), or as our other options do (a
 * number, or with K, M, G or T: powers of 2). 0, or -1. */
static int parse_size(const char *s, uint64_t *v)
{
	size_t n = strlen(s);
	char num[32];
	uint64_t mul = 0;
	static const char units[] = "KMGT";
	if (n >= 3 && (s[n - 1] | 0x20) == 'b' && (s[n - 2] | 0x20) == 'i' &&
	    strchr(units, s[n - 3] & ~0x20) && s[n - 3] != 0) {
		mul = 1ull << (10 * (strchr(units, s[n - 3] & ~0x20) - units + 1));
		n -= 3;
	} else if (n >= 2 && (s[n - 1] | 0x20) == 'b' && s[n - 2] != 0 && strchr(units, s[n - 2] & ~0x20)) {
		mul = 1;
		for (long k = strchr(units, s[n - 2] & ~0x20) - units + 1; k > 0; k--)
			mul *= 1000;
		n -= 2;
	}
	if (!mul)
		return tfs_opt_number(s, 1, UINT64_MAX, v);
	if (n == 0 || n >= sizeof num)
		return -1;
	memcpy(num, s, n);
	num[n] = 0;
	uint64_t x;
	if (tfs_opt_number(num, 0, UINT64_MAX / mul, &x))
		return -1;
	*v = x * mul;
	return 0;
}

static const struct tfs_opt_spec opts[] = {
	{"max_shard_size", 1,
	 "the model re-sharded as save_pretrained does it, in\n"
	 "__shards__/ (5GB: 10^9 bytes; 4GiB, 4G: 2^30)",
	 "SIZE", 0},
	{NULL, 0, NULL, NULL, 0},
};

static tfs_err check_opts(const struct tfs_opts *o, struct tfs_diag *d)
{
	const char *v = tfs_opts_get(o, "max_shard_size");
	uint64_t max;
	if (v && (parse_size(v, &max) || max == 0))
		return tfs_fail(d, TFS_ERR_INVAL,
				"-o max_shard_size= takes a size above 0 such as 5GB (10^9 bytes), "
				"4GiB or 4G (2^30), or a number of bytes, not '%s'",
				v);
	return TFS_OK;
}

static int wanted(const struct tfs_tree_opts *o)
{
	uint64_t max;
	const char *v = tfs_opts_get(o->opts, "max_shard_size");
	return v && !parse_size(v, &max) && max;
}

static const char *const *reserves(const struct tfs_tree_opts *o)
{
	static const char *const names[] = {DIR_NAME, NULL};
	(void)o;
	return names;
}

static tfs_err at_root(struct tfs_tree_add *a, void *state, struct tfs_diag *d)
{
	struct tfs_reshard *r = state;
	uint32_t dir;
	tfs_err e = plan(r, r->max);
	if (!e)
		e = tfs_tree_add_node(a, TFS_TREE_ROOT, DIR_NAME, 1, 0, &dir);
	for (uint32_t k = 0; !e && k < r->nfiles; k++)
		e = tfs_tree_add_node(a, dir, r->files[k].name, 0, k, NULL);
	if (!e && r->nfiles > 1)
		e = tfs_tree_add_node(a, dir, "model.safetensors.index.json", 0, r->nfiles, NULL);
	return e ? tfs_fail(d, e, "out of memory planning -o max_shard_size's files") : TFS_OK;
}

static int notice(const struct tfs_tree *t, const void *state, char *buf, size_t cap)
{
	const struct tfs_reshard *r = state;
	(void)t;
	if (!r->left_out)
		return 0;
	snprintf(buf, cap, "-o max_shard_size leaves out %llu tensor%s that safetensors cannot hold (%s%s)",
		 (unsigned long long)r->left_out, r->left_out == 1 ? "" : "s", r->first_left,
		 r->left_out > 1 ? " and more" : "");
	return 1;
}

static void *state_new(const struct tfs_model *m, const struct tfs_tree_opts *o)
{
	struct tfs_reshard *r = calloc(1, sizeof *r);
	if (r) {
		pthread_mutex_init(&r->lock, NULL);
		r->m = m;
		if (parse_size(tfs_opts_get(o->opts, "max_shard_size"), &r->max))
			r->max = UINT64_MAX; /* (wanted() parsed it already) */
	}
	return r;
}

static void state_free(void *state)
{
	struct tfs_reshard *r = state;
	if (!r)
		return;
	for (uint32_t k = 0; r->files && k < r->nfiles; k++) {
		free(r->files[k].hdr);
		free(r->files[k].ent);
		free(r->files[k].start);
	}
	free(r->files);
	free(r->items);
	free(r->meta);
	free(r->index);
	pthread_mutex_destroy(&r->lock);
	free(r);
}

const struct tfs_view_ops tfs_view_reshard = {
	.name = "reshard",
	.flags = TFS_VIEWF_GENERATED,
	.opts = opts,
	.check = check_opts,
	.wanted = wanted,
	.reserves = reserves,
	.state_new = state_new,
	.state_free = state_free,
	.at_root = at_root,
	.notice = notice,
	.size = size,
	.pieces = pieces,
	.open = check,
};
