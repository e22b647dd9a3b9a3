/* The file names of a tree being built (views/tree_i.h): the mapping
 * of every tensor's and directory's name, the generated files' names, the
 * lookup index, and the names that meet another. */
#include "views/tree_i.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/json.h"
#include "core/mem.h"
#include "core/names.h"
#include "views/view.h"

/* Keeps name[0..len) (NUL-terminated) in t->fnames as node i's. */
static tfs_err keep_name(struct build *b, uint32_t i, const char *name, size_t len)
{
	struct tfs_tree *t = b->t;
	b->foff[i] = b->flen;
	t->nodes[i].fname_len = (uint32_t)len;
	if (tfs_json_put(&t->fnames, &b->flen, &b->fcap, name, len) ||
	    tfs_json_put(&t->fnames, &b->flen, &b->fcap, "", 1))
		return TFS_ERR_NOMEM;
	return TFS_OK;
}

/* The suffix of a wanted view with a file beside each tensor's that the
 * name ends with, or NULL. */
static const char *beside_like(const struct build *b, const char *s, size_t n)
{
	for (unsigned k = 0; k < b->nbeside; k++) {
		size_t sl = strlen(b->beside[k]);
		if (n >= sl && memcmp(s + n - sl, b->beside[k], sl) == 0)
			return b->beside[k];
	}
	return NULL;
}

/* Flat layout, with -o stats or -o pictures: a tensor named "X.png" would
 * take the name of X's picture; the suffix's '.' is shown as %2E (which no
 * other name can produce: a '%' of a name is always %25). */
static tfs_err name_beside_like(struct build *b, uint32_t i)
{
	char buf[TFS_NAME_MAX + 1];
	int hashed;
	size_t len = tfs_name_map_max(b->raw[i], b->raw_len[i], buf, TFS_NAME_MAX - 2, &hashed);
	const char *suffix = hashed ? NULL : beside_like(b, buf, len);
	if (suffix) {
		size_t k = strlen(suffix);
		memmove(buf + len - k + 3, buf + len - k + 1, k - 1);
		memcpy(buf + len - k, "%2E", 3);
		len += 2;
	}
	buf[len] = 0;
	return keep_name(b, i, buf, len);
}

/* One tensor's or directory's file name (not yet named ones only). */
static tfs_err name_one(struct build *b, uint32_t i)
{
	struct tfs_tree *t = b->t;
	struct tfs_node *n = &t->nodes[i];
	const enum tfs_layout layout = b->o->layout;
	char buf[TFS_NAME_MAX + 1];
	int hashed;
	int file = n->kind == TFS_NODE_TENSOR;
	/* A generated file or directory of the root could meet a tensor of
	 * its name (model.safetensors, model.gguf in the flat layout;
	 * __shards__ in both), or a directory of the tree layout its name
	 * (__zarr__): the tensor's or directory's first '.' or '_' is
	 * escaped. */
	static const char *const root_names[] = {TFS_EXPORT_ROOT, TFS_GGUF_ROOT, TFS_RESHARD_DIR,
						 TFS_ZARR_DIR};
	int clash = file ? !b->npy_len && !b->conflict[i] : n->kind == TFS_NODE_DIR;
	for (unsigned k = 0; clash && n->parent == b->root && k < 4; k++) {
		const char *r = root_names[k];
		size_t rl = strlen(r);
		int on = k < 2   ? b->o->export && layout == TFS_LAYOUT_FLAT
			 : k < 3 ? b->o->max_shard_size != 0
				 : tfs_opts_get(b->o->opts, "zarr") != NULL;
		if (on && b->raw_len[i] == rl && memcmp(b->raw[i], r, rl) == 0) {
			size_t at = strcspn(r, "._");
			snprintf(buf, sizeof buf, "%.*s%%%02X%s", (int)at, r, (unsigned char)r[at],
				 r + at + 1);
			return keep_name(b, i, buf, strlen(buf));
		}
	}
	if (layout == TFS_LAYOUT_FLAT && file && !b->npy_len && beside_like(b, b->raw[i], b->raw_len[i]))
		return name_beside_like(b, i);
	if (layout == TFS_LAYOUT_FLAT && !(file && b->npy_len) &&
	    tfs_name_is_plain(b->raw[i], b->raw_len[i])) {
		n->fname = b->raw[i];
		n->fname_len = b->raw_len[i];
		return TFS_OK;
	}
	/* Leave room for the suffixes, so a long name is shortened by the
	 * usual rule rather than cut. A directory keeps room for its
	 * generated file's suffix whether or not -o export is given: a
	 * tensor's path must not depend on it. */
	size_t room = (file && b->conflict[i] ? strlen(TFS_CONFLICT_SUFFIX) : 0) + (file ? b->npy_len : 0) +
		      (!file ? strlen(TFS_EXPORT_CLASH_SUFFIX) : 0);
	size_t len = tfs_name_map_max(b->raw[i], b->raw_len[i], buf, TFS_NAME_MAX - room, &hashed);
	if (file && b->conflict[i]) {
		memcpy(buf + len, TFS_CONFLICT_SUFFIX, strlen(TFS_CONFLICT_SUFFIX));
		len += strlen(TFS_CONFLICT_SUFFIX);
	}
	if (file && b->npy_len) {
		memcpy(buf + len, TFS_NPY_SUFFIX, b->npy_len);
		len += b->npy_len;
	}
	buf[len] = 0;
	return keep_name(b, i, buf, len);
}

/* A generated file's name: D.safetensors, from D's name. */
static tfs_err name_export(struct build *b, uint32_t i)
{
	struct tfs_tree *t = b->t;
	struct tfs_node *n = &t->nodes[i];
	if (n->first == b->root) {
		n->fname = TFS_EXPORT_ROOT;
		n->fname_len = (uint32_t)strlen(TFS_EXPORT_ROOT);
		return TFS_OK;
	}
	const struct tfs_node *dn = &t->nodes[n->first];
	char buf[TFS_NAME_MAX + 1];
	memcpy(buf, t->fnames + b->foff[n->first], dn->fname_len);
	size_t len = dn->fname_len;
	const char *suffix = TFS_EXPORT_SUFFIX;
	if (dn->parent == b->root && len + strlen(TFS_EXPORT_SUFFIX) == strlen(TFS_EXPORT_ROOT) &&
	    memcmp(buf, TFS_EXPORT_ROOT, len) == 0)
		suffix = TFS_EXPORT_CLASH_SUFFIX;
	memcpy(buf + len, suffix, strlen(suffix));
	len += strlen(suffix);
	return keep_name(b, i, buf, len);
}

/* File names. Plain flat names are the tensor names themselves (they are
 * NUL-terminated in the header arena); the rest go to t->fnames. */
tfs_err tfs_tree_name_files(struct build *b)
{
	struct tfs_tree *t = b->t;
	b->foff = tfs_malloc_big(((size_t)t->nnodes + 1) * sizeof *b->foff);
	if (!b->foff)
		return TFS_ERR_NOMEM;
	for (uint32_t i = b->first_user; i < t->nnodes; i++) {
		const struct tfs_node *n = &t->nodes[i];
		b->foff[i] = UINT64_MAX;
		if (n->kind == TFS_NODE_TABLE || n->kind == TFS_NODE_EXPORT || tfs_tree_is_beside(t, i) ||
		    n->fname)
			continue; /* named already, or later */
		if (name_one(b, i))
			return TFS_ERR_NOMEM;
	}
	for (uint32_t i = b->first_user; i < t->nnodes && b->o->export; i++)
		if (t->nodes[i].kind == TFS_NODE_EXPORT && name_export(b, i))
			return TFS_ERR_NOMEM;
	for (uint32_t i = b->first_user; i < t->nnodes; i++)
		if (b->foff[i] != UINT64_MAX)
			t->nodes[i].fname = t->fnames + b->foff[i];
	return TFS_OK;
}

/* The lookup index by mapped name. A hashed name that meets another gets
 * "-N", N being its inode number: unique in the mount, so crafted hash
 * collisions cost one insert each and can never make this quadratic. */
tfs_err tfs_tree_index_names(struct build *b, struct tfs_diag *d)
{
	struct tfs_tree *t = b->t;
	t->nslots = 16;
	while (t->nslots < (size_t)t->nnodes * 2)
		t->nslots *= 2;
	t->slots = tfs_calloc_big(t->nslots, sizeof *t->slots);
	if (!t->slots)
		return TFS_ERR_NOMEM;
	for (uint32_t ni = 2; ni < t->nnodes; ni++) {
		if (tfs_tree_is_beside(t, ni))
			continue; /* named once the tensors are, in name_beside */
		uint32_t other = tfs_tree_slot_insert(t, ni);
		if (!other)
			continue;
		struct tfs_node *n = &t->nodes[ni];
		/* Only hashed long forms can meet another name. */
		if (!memmem(n->fname, n->fname_len, "%~", 2)) {
			char q1[120], q2[120];
			tfs_quote(q1, sizeof q1, n->fname, n->fname_len);
			tfs_quote(q2, sizeof q2, t->nodes[other].fname, t->nodes[other].fname_len);
			return tfs_fail(d, TFS_ERR_FORMAT, "file names %s and %s collide (a bug in tensorfs)",
					q1, q2);
		}
		if (!b->late && !(b->late = malloc((size_t)t->nnodes * sizeof *b->late)))
			return TFS_ERR_NOMEM;
		b->late[b->nlate++] = ni;
	}
	for (uint32_t k = 0; k < b->nlate; k++) {
		uint32_t i = b->late[k];
		char buf[TFS_NAME_MAX + 32];
		/* Read through the offset: an earlier append may have moved the
		 * arena under the node's fname. */
		int len = snprintf(buf, sizeof buf, "%.*s-%u", (int)t->nodes[i].fname_len,
				   t->fnames + b->foff[i], i);
		if (keep_name(b, i, buf, (size_t)len))
			return TFS_ERR_NOMEM;
	}
	if (!b->nlate)
		return TFS_OK;
	for (uint32_t i = b->first_user; i < t->nnodes; i++)
		if (b->foff[i] != UINT64_MAX)
			t->nodes[i].fname = t->fnames + b->foff[i];
	for (uint32_t k = 0; k < b->nlate; k++)
		if (tfs_tree_slot_insert(t, b->late[k]))
			return tfs_fail(d, TFS_ERR_FORMAT,
					"file name collision after hashing (a bug in tensorfs)");
	return TFS_OK;
}

int tfs_tree_is_beside(const struct tfs_tree *t, uint32_t ni)
{
	const struct tfs_view_ops *v = tfs_view_of_kind(t->nodes[ni].kind);
	return v && v->beside;
}

/* -o stats, -o pictures: NAME.stats.json, NAME.png from each tensor's
 * final file name, or the view's long form when NAME has no room. */
tfs_err tfs_tree_name_beside(struct build *b, struct tfs_diag *d)
{
	struct tfs_tree *t = b->t;
	int any = 0;
	for (uint32_t i = b->first_user; i < t->nnodes; i++) {
		struct tfs_node *n = &t->nodes[i];
		if (!tfs_tree_is_beside(t, i))
			continue;
		const struct tfs_view_ops *v = tfs_view_of_kind(n->kind);
		const struct tfs_node *tn = &t->nodes[n->first];
		/* Through the offset: an earlier append may have moved the arena. */
		const char *tname =
			b->foff[n->first] != UINT64_MAX ? t->fnames + b->foff[n->first] : tn->fname;
		char buf[TFS_NAME_MAX + 32];
		size_t k = strlen(v->beside);
		int len = tn->fname_len + k <= TFS_NAME_MAX
				  ? snprintf(buf, sizeof buf, "%.*s%s", (int)tn->fname_len, tname, v->beside)
				  : snprintf(buf, sizeof buf, v->beside_long, n->first);
		if (keep_name(b, i, buf, (size_t)len))
			return TFS_ERR_NOMEM;
		/* (keep_name may move the arena: the others' names are set below) */
		n->fname = NULL;
		any = 1;
	}
	if (!any)
		return TFS_OK;
	for (uint32_t i = b->first_user; i < t->nnodes; i++)
		if (b->foff[i] != UINT64_MAX)
			t->nodes[i].fname = t->fnames + b->foff[i];
	for (uint32_t i = b->first_user; i < t->nnodes; i++)
		if (tfs_tree_is_beside(t, i) && tfs_tree_slot_insert(t, i))
			return tfs_fail(
				d, TFS_ERR_FORMAT,
				"a file beside a tensor's has the name of another (a bug in tensorfs)");
	return TFS_OK;
}
