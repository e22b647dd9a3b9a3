/* Shard indexes (model.safetensors.index.json, pytorch_model.bin.index.json):
 * read with the strict scanner, without building a document tree, so that
 * a million-entry weight_map is cheap. */
#include "model/index.h"

#include <json.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/hash.h"
#include "core/jscan.h"
#include "core/json.h"
#include "core/mem.h"
#include "model/model_i.h"
#include "core/table.h"

/* Indexes are read whole; none comes near this. */
#define INDEX_MAX ((size_t)1 << 31)

static int name_cmp(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

static tfs_err scan_weight_map(struct tfs_jscan *s, const struct tfs_index_cb *cb)
{
	tfs_err e;
	tfs_js_ws(s);
	if (tfs_js_peek(s) != '{')
		return tfs_fail(s->d, TFS_ERR_FORMAT,
				"not a safetensors index: \"weight_map\" is not an object");
	if ((e = tfs_js_enter(s)))
		return e;
	if (tfs_js_close_if_empty(s, '}'))
		return TFS_OK;
	/* The name is decoded into s->tmp, which the shard's decoding would
	 * overwrite: keep a copy when it had escapes. */
	char *keep = NULL;
	size_t keepcap = 0;
	int r;
	do {
		struct tfs_jstr name, shard;
		tfs_js_ws(s);
		if (tfs_js_peek(s) != '"') {
			e = tfs_js_err(s, "expected a string key");
			break;
		}
		if ((e = tfs_js_string(s, &name)))
			break;
		if (name.p == s->tmp) {
			if (tfs_grow((void **)&keep, &keepcap, name.len + 1, 1)) {
				e = tfs_js_nomem(s);
				break;
			}
			memcpy(keep, name.p, name.len);
			name.p = keep;
		}
		if ((e = tfs_js_expect(s, ':', "expected ':'")))
			break;
		tfs_js_ws(s);
		if (tfs_js_peek(s) != '"') {
			char q[160], msg[256];
			tfs_quote(q, sizeof q, name.p, name.len);
			snprintf(msg, sizeof msg, "weight_map entry %s is not a shard file name", q);
			e = tfs_fail(s->d, TFS_ERR_FORMAT, "%s", msg);
			break;
		}
		if ((e = tfs_js_string(s, &shard)) ||
		    (e = cb->entry(cb->ctx, name.p, name.len, shard.p, shard.len, s->d)))
			break;
	} while ((r = tfs_js_next(s, '}', &e)) > 0);
	free(keep);
	return e;
}

tfs_err tfs_index_scan(const char *text, size_t n, const struct tfs_index_cb *cb, struct tfs_diag *d)
{
	struct tfs_jscan s;
	tfs_err e = TFS_OK;
	int seen_wm = 0;
	size_t bad = tfs_utf8_check((const unsigned char *)text, n);
	if (bad != n)
		return tfs_fail(d, TFS_ERR_FORMAT, "the index is not valid UTF-8 (at byte %zu)", bad);
	tfs_js_init(&s, "index", text, n, TFS_INDEX_NESTING_MAX, d);
	tfs_js_ws(&s);
	if (tfs_js_peek(&s) != '{') {
		e = tfs_js_err(&s, "the index must be a JSON object");
		goto out;
	}
	if ((e = tfs_js_enter(&s)))
		goto out;
	int r = 0;
	if (!tfs_js_close_if_empty(&s, '}')) {
		do {
			struct tfs_jstr key;
			char *kcopy;
			tfs_js_ws(&s);
			if (tfs_js_peek(&s) != '"') {
				e = tfs_js_err(&s, "expected a string key");
				goto out;
			}
			if ((e = tfs_js_string(&s, &key)) || (e = tfs_js_expect(&s, ':', "expected ':'")))
				goto out;
			if (TFS_JS_IS(&key, "weight_map")) {
				if (seen_wm++) {
					e = tfs_fail(d, TFS_ERR_FORMAT,
						     "the index has two \"weight_map\" members");
					goto out;
				}
				if ((e = scan_weight_map(&s, cb)))
					goto out;
			} else {
				kcopy = malloc(key.len + 1);
				if (!kcopy) {
					e = tfs_js_nomem(&s);
					goto out;
				}
				memcpy(kcopy, key.p, key.len);
				kcopy[key.len] = 0;
				tfs_js_ws(&s);
				const unsigned char *v = s.p;
				e = tfs_js_skip(&s);
				if (!e)
					e = cb->other(cb->ctx, kcopy, key.len, (const char *)v,
						      (size_t)(s.p - v), d);
				free(kcopy);
				if (e)
					goto out;
			}
		} while ((r = tfs_js_next(&s, '}', &e)) > 0);
		if (r < 0)
			goto out;
	}
	tfs_js_ws(&s);
	if (s.p != s.end) {
		e = tfs_js_err(&s, "unexpected text after the object");
		goto out;
	}
	if (!seen_wm)
		e = tfs_fail(d, TFS_ERR_FORMAT, "not a safetensors index: no \"weight_map\" object");
out:
	tfs_js_done(&s);
	return e;
}

/* ---- the checkpoint an index describes ---- */

/* What the index says, gathered by the scanner's callbacks. */
struct ientry {
	uint64_t off; /* name in arena */
	uint32_t len;
	uint32_t shard; /* shard id (index into snames) */
};

struct iother {
	char *key;
	char *text;
	size_t len;
};

struct idx {
	char *arena;
	size_t alen, acap;
	struct ientry *e;
	size_t n, cap;
	char **snames;
	uint32_t nsn, csn;
	uint32_t *sslots; /* shard id + 1 keyed by name */
	size_t nss;
	struct iother *o;
	size_t no, co, wm_pos;
	const char *meta_text;
	size_t meta_len;
};

static uint32_t *sname_slot(struct idx *x, const char *s, size_t len)
{
	size_t j = tfs_hash(s, len, tfs_hash_seed) & (x->nss - 1);
	while (x->sslots[j]) {
		const char *o = x->snames[x->sslots[j] - 1];
		if (strlen(o) == len && memcmp(o, s, len) == 0)
			break;
		j = (j + 1) & (x->nss - 1);
	}
	return &x->sslots[j];
}

static tfs_err idx_entry(void *ctx, const char *name, size_t nlen, const char *shard, size_t slen,
			 struct tfs_diag *d)
{
	struct idx *x = ctx;
	if (slen == 0 || memchr(shard, '/', slen) || memchr(shard, 0, slen) ||
	    (slen == 1 && shard[0] == '.') || (slen == 2 && shard[0] == '.' && shard[1] == '.')) {
		char q[200], sq[200];
		tfs_quote(q, sizeof q, name, nlen);
		tfs_quote(sq, sizeof sq, shard, slen);
		return tfs_fail(
			d, TFS_ERR_FORMAT,
			"weight_map puts tensor %s in shard %s: a shard must be a plain file name in the index's directory",
			q, sq);
	}
	if ((x->nsn + 1) * 2 > x->nss) {
		size_t ns = x->nss ? x->nss * 2 : 64;
		free(x->sslots);
		x->sslots = calloc(ns, sizeof *x->sslots);
		if (!x->sslots)
			return TFS_ERR_NOMEM;
		x->nss = ns;
		for (uint32_t i = 0; i < x->nsn; i++)
			*sname_slot(x, x->snames[i], strlen(x->snames[i])) = i + 1;
	}
	uint32_t *slot = sname_slot(x, shard, slen);
	if (!*slot) {
		if (x->nsn == x->csn) {
			x->csn = x->csn ? x->csn * 2 : 16;
			char **q = realloc(x->snames, x->csn * sizeof *q);
			if (!q)
				return TFS_ERR_NOMEM;
			x->snames = q;
		}
		if (!(x->snames[x->nsn] = strndup(shard, slen)))
			return TFS_ERR_NOMEM;
		*slot = ++x->nsn;
	}
	if (x->n == x->cap) {
		x->cap = x->cap ? x->cap * 2 : 1024;
		struct ientry *q = realloc(x->e, x->cap * sizeof *q);
		if (!q)
			return TFS_ERR_NOMEM;
		x->e = q;
	}
	if (tfs_json_put(&x->arena, &x->alen, &x->acap, name, nlen))
		return TFS_ERR_NOMEM;
	x->e[x->n].off = x->alen - nlen;
	x->e[x->n].len = (uint32_t)nlen;
	x->e[x->n].shard = *slot - 1;
	x->n++;
	x->wm_pos = x->no;
	return TFS_OK;
}

static tfs_err idx_other(void *ctx, const char *key, size_t klen, const char *text, size_t tlen,
			 struct tfs_diag *d)
{
	struct idx *x = ctx;
	(void)d;
	if (x->no == x->co) {
		x->co = x->co ? x->co * 2 : 4;
		struct iother *q = realloc(x->o, x->co * sizeof *q);
		if (!q)
			return TFS_ERR_NOMEM;
		x->o = q;
	}
	struct iother *o = &x->o[x->no];
	o->key = strndup(key, klen);
	o->text = strndup(text, tlen);
	o->len = tlen;
	if (!o->key || !o->text) {
		free(o->key);
		free(o->text);
		return TFS_ERR_NOMEM;
	}
	x->no++;
	if (klen == 8 && memcmp(key, "metadata", 8) == 0) {
		x->meta_text = o->text;
		x->meta_len = tlen;
	}
	return TFS_OK;
}

static void idx_free(struct idx *x)
{
	for (uint32_t i = 0; i < x->nsn; i++)
		free(x->snames[i]);
	for (size_t i = 0; i < x->no; i++) {
		free(x->o[i].key);
		free(x->o[i].text);
	}
	free(x->snames);
	free(x->sslots);
	free(x->arena);
	free(x->e);
	free(x->o);
}

/* Every weight_map entry must be in the shard it names, and every tensor of
 * every shard must be listed for its shard. A name listed twice keeps its
 * last shard, as JSON readers do. first/last: per tensor (numbered across
 * shards), the first and last entry that lists it. */
static tfs_err check_index(struct tfs_model *m, const struct idx *x, const struct names *nt, uint32_t *first,
			   uint32_t *last, uint64_t *eg, const char *where, struct tfs_model_diag *md)
{
	uint64_t *base = malloc(((size_t)m->nshards + 1) * sizeof *base);
	if (!base)
		return tfs_mfail(md, where, TFS_ERR_NOMEM, "out of memory");
	base[0] = 0;
	for (uint32_t s = 0; s < m->nshards; s++)
		base[s + 1] = base[s] + m->shards[s].h.n;
	tfs_err e = TFS_OK;
	char q[200];
	for (size_t k = 0; k < x->n; k++) {
		const char *name = x->arena + x->e[k].off;
		struct where_t *w = tfs_model_names_find(m, nt, name, x->e[k].len);
		if (w->shard == UINT32_MAX) {
			tfs_quote(q, sizeof q, name, x->e[k].len);
			e = tfs_mfail(
				md, where, TFS_ERR_FORMAT,
				"weight_map puts tensor %s in shard '%s', which does not hold it (no shard does)",
				q, m->shards[x->e[k].shard].name);
			goto out;
		}
		uint64_t g = base[w->shard] + w->t;
		if (first[g] == UINT32_MAX)
			first[g] = (uint32_t)k;
		last[g] = (uint32_t)k;
		eg[k] = g;
	}
	for (uint32_t s = 0; s < m->nshards; s++) {
		const struct tfs_table *h = &m->shards[s].h;
		for (uint32_t i = 0; i < h->n; i++) {
			uint64_t g = base[s] + i;
			tfs_quote(q, sizeof q, tfs_tensor_name(h, &h->t[i]), h->t[i].name_len);
			if (last[g] == UINT32_MAX) {
				e = tfs_mfail(
					md, where, TFS_ERR_FORMAT,
					"shard '%s' holds tensor %s, which weight_map does not list for it",
					m->shards[s].name, q);
				goto out;
			}
			if (x->e[last[g]].shard != s) {
				e = tfs_mfail(
					md, where, TFS_ERR_FORMAT,
					"weight_map puts tensor %s in shard '%s', which does not hold it (shard '%s' does)",
					q, m->shards[x->e[last[g]].shard].name, m->shards[s].name);
				goto out;
			}
		}
	}
out:
	free(base);
	return e;
}

/* __index__.json: the index pretty-printed, two spaces a level. Members
 * other than weight_map (small) go through json-c; weight_map, which can
 * hold a million names, is written directly, each name once (first place,
 * last shard). */
static tfs_err index_json(struct tfs_model *m, const struct idx *x, const uint32_t *first,
			  const uint32_t *last, const uint64_t *eg)
{
	/* About the size of the index itself: start there. */
	size_t cap = x->alen + (size_t)x->n * 48 + 4096, n = 0;
	char *b = tfs_malloc_big(cap);
	if (!b)
		return TFS_ERR_NOMEM;
	tfs_err e = tfs_json_put(&b, &n, &cap, "{", 1);
	int members = 0;
	for (size_t i = 0; !e && i <= x->no; i++) {
		if (i == x->wm_pos) {
			e = tfs_json_puts(&b, &n, &cap,
					  members++ ? ",\n  \"weight_map\": {" : "\n  \"weight_map\": {");
			int any = 0;
			for (size_t k = 0; !e && k < x->n; k++) {
				const char *name = x->arena + x->e[k].off;
				uint64_t g = eg[k];
				if (first[g] != k)
					continue;
				e = tfs_json_puts(&b, &n, &cap, any++ ? ",\n    " : "\n    ");
				if (!e)
					e = tfs_json_str(&b, &n, &cap, name, x->e[k].len);
				if (!e)
					e = tfs_json_put(&b, &n, &cap, ": ", 2);
				const char *sh = m->shards[x->e[last[g]].shard].name;
				if (!e)
					e = tfs_json_str(&b, &n, &cap, sh, strlen(sh));
			}
			if (!e)
				e = tfs_json_puts(&b, &n, &cap, any ? "\n  }" : "}");
		}
		if (i == x->no || e)
			continue;
		json_object *v = json_tokener_parse(x->o[i].text);
		char *pretty = NULL;
		size_t pl = 0, pcap = 0;
		if (v)
			e = tfs_json_value(&pretty, &pl, &pcap, v,
					   JSON_C_TO_STRING_PRETTY | JSON_C_TO_STRING_SPACED);
		if (!e)
			e = tfs_json_puts(&b, &n, &cap, members++ ? ",\n  " : "\n  ");
		if (!e)
			e = tfs_json_str(&b, &n, &cap, x->o[i].key, strlen(x->o[i].key));
		if (!e)
			e = tfs_json_put(&b, &n, &cap, ": ", 2);
		if (!e)
			e = v ? tfs_json_nested(&b, &n, &cap, pretty, pl)
			      : tfs_json_nested(&b, &n, &cap, x->o[i].text, strlen(x->o[i].text));
		free(pretty);
		json_object_put(v);
	}
	if (!e)
		e = tfs_json_puts(&b, &n, &cap, members ? "\n}\n" : "}\n");
	if (e) {
		free(b);
		return e;
	}
	m->index_json = b;
	m->index_len = n;
	return TFS_OK;
}

/* The model as the index alone tells it: each name once (its last entry
 * wins, as when the index is read as JSON), counted for its shard. */
static tfs_err index_only(struct tfs_model *m, const struct idx *x, const char *where,
			  struct tfs_model_diag *md)
{
	size_t ns = 16;
	while (ns < x->n * 2)
		ns *= 2;
	uint64_t *slots = calloc(ns, sizeof *slots); /* entry + 1 */
	if (!slots)
		return tfs_mfail(md, where, TFS_ERR_NOMEM, "out of memory");
	m->ntensors = 0; /* the shards that were read do not count */
	for (size_t k = 0; k < x->n; k++) {
		const char *name = x->arena + x->e[k].off;
		size_t j = tfs_hash(name, x->e[k].len, tfs_hash_seed) & (ns - 1);
		while (slots[j]) {
			const struct ientry *o = &x->e[slots[j] - 1];
			if (o->len == x->e[k].len && memcmp(x->arena + o->off, name, o->len) == 0)
				break;
			j = (j + 1) & (ns - 1);
		}
		if (!slots[j])
			m->ntensors++;
		slots[j] = k + 1;
	}
	for (size_t j = 0; j < ns; j++)
		if (slots[j])
			m->shards[x->e[slots[j] - 1].shard].index_tensors++;
	free(slots);
	m->index_only = 1;
	if (x->meta_text && !(m->index_meta = strndup(x->meta_text, x->meta_len)))
		return tfs_mfail(md, where, TFS_ERR_NOMEM, "out of memory");
	return TFS_OK;
}

/* The entries of the index text into x. */
static tfs_err scan(struct idx *x, const char *text, size_t got, const char *path, struct tfs_model_diag *md)
{
	/* The entries' names and records cannot outgrow the index text. */
	x->acap = got + 1;
	x->cap = got / 8 + 16;
	x->arena = tfs_malloc_big(x->acap);
	x->e = tfs_malloc_big(x->cap * sizeof *x->e);
	if (!x->arena || !x->e)
		return tfs_mfail(md, path, TFS_ERR_NOMEM, "out of memory");
	struct tfs_index_cb cb = {.entry = idx_entry, .other = idx_other, .ctx = x};
	x->wm_pos = SIZE_MAX;
	tfs_err e = tfs_index_scan(text, got, &cb, &md->d);
	if (e) {
		tfs_quote_path(md->where, sizeof md->where, path);
		return e;
	}
	if (x->wm_pos == SIZE_MAX)
		x->wm_pos = x->no; /* an empty weight_map: keep it last */
	return TFS_OK;
}

/* Shards in name order (*sorted); entries renumbered to match. */
static tfs_err shards_in_name_order(struct idx *x, char ***sorted, const char *path,
				    struct tfs_model_diag *md)
{
	uint32_t *remap = malloc((x->nsn ? x->nsn : 1) * sizeof *remap);
	*sorted = malloc((x->nsn ? x->nsn : 1) * sizeof **sorted);
	if (!*sorted || !remap) {
		free(remap);
		return tfs_mfail(md, path, TFS_ERR_NOMEM, "out of memory");
	}
	memcpy(*sorted, x->snames, x->nsn * sizeof **sorted);
	qsort(*sorted, x->nsn, sizeof **sorted, name_cmp);
	for (uint32_t i = 0; i < x->nsn; i++)
		remap[*sname_slot(x, (*sorted)[i], strlen((*sorted)[i])) - 1] = i;
	for (size_t k = 0; k < x->n; k++)
		x->e[k].shard = remap[x->e[k].shard];
	free(remap);
	return TFS_OK;
}

/* metadata.total_size only informs (loaders go by weight_map): a wrong one
 * is worth a warning, not a refusal. */
static void warn_total_size(const struct tfs_model *m, const char *meta_text, const struct tfs_model_opts *o,
			    const char *path)
{
	json_object *meta = json_tokener_parse(meta_text), *ts;
	if (meta && json_object_is_type(meta, json_type_object) &&
	    json_object_object_get_ex(meta, "total_size", &ts) &&
	    (json_object_is_type(ts, json_type_int) || json_object_is_type(ts, json_type_double))) {
		uint64_t sum = 0;
		for (uint32_t s = 0; s < m->nshards; s++)
			for (uint32_t i = 0; i < m->shards[s].h.n; i++)
				sum += tfs_tensor_size(&m->shards[s].h.t[i]);
		uint64_t want = json_object_is_type(ts, json_type_int) ? (uint64_t)json_object_get_uint64(ts)
								       : (uint64_t)json_object_get_double(ts);
		if (want != sum) {
			char msg[256];
			snprintf(msg, sizeof msg,
				 "metadata.total_size is %llu but the shards' tensors hold %llu bytes",
				 (unsigned long long)want, (unsigned long long)sum);
			o->warn(o->warn_ctx, path, msg);
		}
	}
	json_object_put(meta);
}

tfs_err tfs_model_open_index(struct tfs_model *m, const char *name, const char *path,
			     const struct tfs_model_opts *o, struct tfs_model_diag *md)
{
	tfs_err e = TFS_OK;
	char *text = NULL, *dir = NULL, **sorted = NULL;
	uint32_t *first = NULL, *last = NULL;
	uint64_t *eg = NULL;
	struct names nt = {0};
	struct idx x;
	struct tfs_source *src = NULL;
	struct tfs_diag d;
	size_t got;

	memset(&x, 0, sizeof x);
	m->kind = TFS_MODEL_INDEX;
	m->index_path = strdup(path);
	if (!m->index_path)
		return tfs_mfail(md, path, TFS_ERR_NOMEM, "out of memory");
	if ((e = m->store->ops->open(m->store, name, &src, &d)) ||
	    (e = tfs_source_slurp(src, INDEX_MAX, &text, &got, &d))) {
		tfs_source_close(src);
		return tfs_mfail(md, path, e, "%s", d.msg);
	}
	tfs_source_close(src);
	if ((e = scan(&x, text, got, path, md)) || (e = shards_in_name_order(&x, &sorted, path, md)))
		goto out;

	/* Shards sit beside the index, in the store. */
	const char *slash = strrchr(name, '/');
	dir = strndup(name, slash ? (size_t)(slash - name) + 1 : 0);
	if (!dir) {
		e = tfs_mfail(md, path, TFS_ERR_NOMEM, "out of memory");
		goto out;
	}
	if ((e = tfs_model_add_shards(m, dir, sorted, x.nsn, path, md)))
		goto out;
	e = tfs_model_read_tables(m, 0, o, path, md);
	if (o && o->index_only_ok) {
		int missing = 0;
		for (uint32_t i = 0; i < m->nshards; i++)
			missing |= m->shards[i].missing || m->shards[i].lfs_pointer;
		if (missing) {
			e = index_only(m, &x, path, md);
			goto out;
		}
	}
	if (e || (e = tfs_model_check_unique(m, &nt, path, md)))
		goto out;
	first = tfs_malloc_big((m->ntensors ? m->ntensors : 1) * sizeof *first);
	last = tfs_malloc_big((m->ntensors ? m->ntensors : 1) * sizeof *last);
	eg = tfs_malloc_big((x.n ? x.n : 1) * sizeof *eg);
	if (!first || !last || !eg) {
		e = tfs_mfail(md, path, TFS_ERR_NOMEM, "out of memory");
		goto out;
	}
	memset(first, 0xff, m->ntensors * sizeof *first);
	memset(last, 0xff, m->ntensors * sizeof *last);
	if ((e = check_index(m, &x, &nt, first, last, eg, path, md)))
		goto out;

	if (x.meta_text && o && o->warn)
		warn_total_size(m, x.meta_text, o, path);
	if (index_json(m, &x, first, last, eg))
		e = tfs_mfail(md, path, TFS_ERR_NOMEM, "out of memory");
out:
	free(eg);
	free(first);
	free(last);
	free(nt.slots);
	free(sorted);
	free(dir);
	free(text);
	idx_free(&x);
	return e;
}
