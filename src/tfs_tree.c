#include "tfs_tree.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tfs_hash.h"
#include "tfs_names.h"

static tfs_err buf_put(char **buf, size_t *len, size_t *cap, const char *s, size_t n)
{
	if (*len + n + 1 > *cap) {
		size_t nc = *cap ? *cap : 256;
		while (nc < *len + n + 1)
			nc *= 2;
		char *q = realloc(*buf, nc);
		if (!q)
			return TFS_ERR_NOMEM;
		*buf = q;
		*cap = nc;
	}
	memcpy(*buf + *len, s, n);
	*len += n;
	(*buf)[*len] = 0;
	return TFS_OK;
}

tfs_err tfs_json_str(char **buf, size_t *len, size_t *cap, const char *s, size_t n)
{
	static const char hex[] = "0123456789abcdef";
	size_t i = 0, run = 0;
	if (buf_put(buf, len, cap, "\"", 1))
		return TFS_ERR_NOMEM;
	for (i = 0; i < n; i++) {
		unsigned char c = (unsigned char)s[i];
		char esc[7];
		size_t el = 0;
		if (c == '"' || c == '\\') {
			esc[0] = '\\';
			esc[1] = (char)c;
			el = 2;
		} else if (c < 0x20 || c == 0x7f) {
			const char *named = c == '\n' ? "\\n" : c == '\t' ? "\\t" : c == '\r' ? "\\r" :
					    c == '\b' ? "\\b" : c == '\f' ? "\\f" : NULL;
			if (named) {
				memcpy(esc, named, 2);
				el = 2;
			} else {
				memcpy(esc, "\\u00", 4);
				esc[4] = hex[c >> 4];
				esc[5] = hex[c & 15];
				el = 6;
			}
		} else {
			run++;
			continue;
		}
		if (buf_put(buf, len, cap, s + i - run, run) || buf_put(buf, len, cap, esc, el))
			return TFS_ERR_NOMEM;
		run = 0;
	}
	if (buf_put(buf, len, cap, s + n - run, run) || buf_put(buf, len, cap, "\"", 1))
		return TFS_ERR_NOMEM;
	return TFS_OK;
}

tfs_err tfs_meta_json(const struct tfs_header *h, char **out, size_t *outlen)
{
	char *b = NULL;
	size_t len = 0, cap = 0;
	tfs_err e = TFS_OK;
	if (!h->has_metadata || h->nmeta == 0) {
		e = buf_put(&b, &len, &cap, "{}\n", 3);
	} else {
		e = buf_put(&b, &len, &cap, "{\n", 2);
		for (uint32_t i = 0; !e && i < h->nmeta; i++) {
			const struct tfs_meta_pair *m = &h->meta[i];
			e = buf_put(&b, &len, &cap, "  ", 2);
			if (!e)
				e = tfs_json_str(&b, &len, &cap, h->arena + m->key_off, m->key_len);
			if (!e)
				e = buf_put(&b, &len, &cap, ": ", 2);
			if (!e)
				e = tfs_json_str(&b, &len, &cap, h->arena + m->val_off, m->val_len);
			if (!e)
				e = buf_put(&b, &len, &cap, i + 1 < h->nmeta ? ",\n" : "\n", i + 1 < h->nmeta ? 2 : 1);
		}
		if (!e)
			e = buf_put(&b, &len, &cap, "}\n", 2);
	}
	if (e) {
		free(b);
		return e;
	}
	*out = b;
	*outlen = len;
	return TFS_OK;
}

static inline uint64_t key_hash(uint32_t parent, const char *name, size_t len)
{
	return tfs_hash(name, len, tfs_hash_seed ^ ((uint64_t)parent * 0x9e3779b97f4a7c15ull));
}

uint32_t tfs_tree_lookup(const struct tfs_tree *t, uint32_t parent,
			 const char *name, size_t len)
{
	if (!t->nslots)
		return 0;
	size_t j = key_hash(parent, name, len) & (t->nslots - 1);
	while (t->slots[j]) {
		const struct tfs_node *n = &t->nodes[t->slots[j]];
		if (n->parent == parent && n->fname_len == len && memcmp(n->fname, name, len) == 0)
			return t->slots[j];
		j = (j + 1) & (t->nslots - 1);
	}
	return 0;
}

/* Inserts node `ni`; returns 0, or the node that already has its name. */
static uint32_t slot_insert(struct tfs_tree *t, uint32_t ni)
{
	const struct tfs_node *n = &t->nodes[ni];
	size_t j = key_hash(n->parent, n->fname, n->fname_len) & (t->nslots - 1);
	while (t->slots[j]) {
		const struct tfs_node *o = &t->nodes[t->slots[j]];
		if (o->parent == n->parent && o->fname_len == n->fname_len &&
		    memcmp(o->fname, n->fname, n->fname_len) == 0)
			return t->slots[j];
		j = (j + 1) & (t->nslots - 1);
	}
	t->slots[j] = ni;
	return 0;
}

uint64_t tfs_node_size(const struct tfs_tree *t, const struct tfs_node *n)
{
	switch (n->kind) {
	case TFS_NODE_TENSOR:
		return tfs_tensor_size(&t->h->t[n->ref]);
	case TFS_NODE_BLOB:
		return t->blobs[n->ref].len;
	default:
		return 0;
	}
}

void tfs_tree_free(struct tfs_tree *t)
{
	if (!t)
		return;
	free(t->nodes);
	free(t->children);
	free(t->fnames);
	free(t->slots);
	for (uint32_t i = 0; i < t->nblobs; i++)
		free(t->blobs[i].data);
	memset(t, 0, sizeof *t);
}

tfs_err tfs_tree_build(const struct tfs_header *h, struct tfs_tree *t,
		       struct tfs_diag *d)
{
	tfs_err e;
	size_t fcap = 0, flen = 0;
	/* Offsets into t->fnames until it stops moving; then pointers. */
	uint64_t *foff = NULL;
	const uint32_t first_tensor = 3;

	memset(t, 0, sizeof *t);
	t->h = h;
	if ((uint64_t)h->n + first_tensor > UINT32_MAX)
		return tfs_fail(d, TFS_ERR_NOMEM, "too many tensors");
	t->nnodes = h->n + first_tensor;
	t->nodes = calloc(t->nnodes, sizeof *t->nodes);
	t->children = malloc(((size_t)h->n + 1) * sizeof *t->children);
	foff = malloc(((size_t)h->n + 1) * sizeof *foff);
	t->nslots = 16;
	while (t->nslots < (size_t)t->nnodes * 2)
		t->nslots *= 2;
	t->slots = calloc(t->nslots, sizeof *t->slots);
	if (!t->nodes || !t->children || !foff || !t->slots)
		goto nomem;

	if (tfs_meta_json(h, &t->blobs[0].data, &t->blobs[0].len))
		goto nomem;
	t->nblobs = 1;

	struct tfs_node *root = &t->nodes[1];
	root->kind = TFS_NODE_DIR;
	root->fname = "";
	root->parent = 1;
	root->first = 0;
	root->count = h->n + 1;

	struct tfs_node *meta = &t->nodes[2];
	meta->kind = TFS_NODE_BLOB;
	meta->fname = TFS_META_NAME;
	meta->fname_len = (uint32_t)strlen(TFS_META_NAME);
	meta->parent = 1;
	meta->ref = 0;
	t->children[0] = 2;
	t->total_bytes = t->blobs[0].len;

	for (uint32_t i = 0; i < h->n; i++) {
		const struct tfs_tensor *ts = &h->t[i];
		struct tfs_node *n = &t->nodes[first_tensor + i];
		const char *name = tfs_tensor_name(h, ts);
		n->kind = TFS_NODE_TENSOR;
		n->parent = 1;
		n->ref = i;
		t->children[i + 1] = first_tensor + i;
		t->total_bytes += tfs_tensor_size(ts);
		if (tfs_name_is_plain(name, ts->name_len)) {
			n->fname = name;
			n->fname_len = ts->name_len;
			foff[i] = UINT64_MAX;
			continue;
		}
		char buf[TFS_NAME_MAX + 1];
		int hashed;
		size_t len = tfs_name_map(name, ts->name_len, buf, &hashed);
		foff[i] = flen;
		n->fname_len = (uint32_t)len;
		if (buf_put(&t->fnames, &flen, &fcap, buf, len + 1))
			goto nomem;
	}
	for (uint32_t i = 0; i < h->n; i++)
		if (foff[i] != UINT64_MAX)
			t->nodes[first_tensor + i].fname = t->fnames + foff[i];

	uint32_t *late = NULL, nlate = 0;
	for (uint32_t ni = 2; ni < t->nnodes; ni++) {
		uint32_t other = slot_insert(t, ni);
		if (!other)
			continue;
		struct tfs_node *n = &t->nodes[ni];
		/* Only the hashed long form can meet another name. */
		if (n->fname_len < 18 || memcmp(n->fname + n->fname_len - 18, "%~", 2) != 0) {
			char q1[120], q2[120];
			tfs_quote(q1, sizeof q1, n->fname, n->fname_len);
			tfs_quote(q2, sizeof q2, t->nodes[other].fname, t->nodes[other].fname_len);
			e = tfs_fail(d, TFS_ERR_FORMAT, "file names %s and %s collide (a bug in tensorfs)", q1, q2);
			free(late);
			goto fail;
		}
		if (!late && !(late = malloc((size_t)h->n * sizeof *late)))
			goto nomem;
		late[nlate++] = ni;
	}
	/* A hashed name that meets another gets "-N", N being its place in the
	 * header: unique in the mount, so crafted hash collisions cost one
	 * insert each and can never make this quadratic. */
	for (uint32_t k = 0; k < nlate; k++) {
		struct tfs_node *n = &t->nodes[late[k]];
		char buf[TFS_NAME_MAX + 16];
		/* Read through the offset: an earlier append may have moved
		 * the arena under n->fname. */
		int len = snprintf(buf, sizeof buf, "%.*s-%u", (int)n->fname_len,
				   t->fnames + foff[late[k] - first_tensor],
				   late[k] - first_tensor);
		foff[late[k] - first_tensor] = flen;
		n->fname_len = (uint32_t)len;
		if (buf_put(&t->fnames, &flen, &fcap, buf, (size_t)len + 1)) {
			free(late);
			goto nomem;
		}
	}
	if (nlate) {
		for (uint32_t i = 0; i < h->n; i++)
			if (foff[i] != UINT64_MAX)
				t->nodes[first_tensor + i].fname = t->fnames + foff[i];
		for (uint32_t k = 0; k < nlate; k++) {
			if (slot_insert(t, late[k])) {
				free(late);
				e = tfs_fail(d, TFS_ERR_FORMAT, "file name collision after hashing (a bug in tensorfs)");
				goto fail;
			}
		}
	}
	free(late);
	free(foff);
	return TFS_OK;
nomem:
	e = tfs_fail(d, TFS_ERR_NOMEM, "out of memory building the file table");
fail:
	free(foff);
	tfs_tree_free(t);
	return e;
}
