/* The file names of a tree being built (views/tree_i.h): the mapping
 * of every tensor's and directory's name, the views' files' names, the
 * lookup index, and the names that meet another. */
#include "views/tree_i.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/json.h"
#include "core/mem.h"
#include "core/names.h"
#include "views/view.h"

uint32_t tfs_tree_lookup(const struct tfs_tree *t, uint32_t parent, const char *name, size_t len)
{
	if (!t->nslots)
		return 0;
	size_t j = tfs_tree_key_hash(parent, name, len) & (t->nslots - 1);
	while (t->slots[j]) {
		const struct tfs_node *n = &t->nodes[t->slots[j]];
		if (n->parent == parent && n->fname_len == len && memcmp(n->fname, name, len) == 0)
			return t->slots[j];
		j = (j + 1) & (t->nslots - 1);
	}
	return 0;
}

uint64_t tfs_tree_find(const struct tfs_tree *t, uint32_t parent, const char *name, size_t len)
{
	const struct tfs_node *d = &t->nodes[parent];
	if (!d->gen)
		return tfs_tree_lookup(t, parent, name, len);
	const struct tfs_view_ops *v = tfs_view_of_kind(d->gen);
	uint32_t i;
	return v->entry_find(t, d, name, len, &i) && i < d->shard ? tfs_tree_gen_ino(parent, i) : 0;
}

int tfs_tree_entry(const struct tfs_tree *t, uint32_t dir, uint64_t i, char *buf, const char **name,
		   uint64_t *ino)
{
	const struct tfs_node *d = &t->nodes[dir];
	if (i >= tfs_tree_entries(t, dir))
		return 0;
	if (!d->gen) {
		*ino = t->children[d->first + i];
		*name = t->nodes[*ino].fname;
		return 1;
	}
	size_t n = tfs_view_of_kind(d->gen)->entry_name(t, d, (uint32_t)i, buf);
	buf[n] = 0;
	*name = buf;
	*ino = tfs_tree_gen_ino(dir, (uint32_t)i);
	return 1;
}

uint32_t tfs_tree_slot_insert(struct tfs_tree *t, uint32_t ni)
{
	const struct tfs_node *n = &t->nodes[ni];
	size_t j = tfs_tree_key_hash(n->parent, n->fname, n->fname_len) & (t->nslots - 1);
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

/* Whether node ni's kind is a view's with a file beside every tensor's. */
static int is_beside(const struct tfs_tree *t, uint32_t ni)
{
	const struct tfs_view_ops *v = tfs_view_of_kind(t->nodes[ni].kind);
	return v && v->beside;
}

/* Whether node ni is named after another by its view. */
static int named_after(const struct tfs_tree *t, uint32_t ni)
{
	const struct tfs_view_ops *v = tfs_view_of_kind(t->nodes[ni].kind);
	return v && v->name_after;
}

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
	/* A view's file or directory of the root could meet a tensor of its
	 * name (model.safetensors, model.gguf in the flat layout; __shards__
	 * in both), or a directory of the tree layout its name (__zarr__):
	 * the tensor's or directory's first '.' or '_' is escaped. */
	int clash = file ? !b->suffix_len && !(b->flags[i] & NODE_CONFLICT) : n->kind == TFS_NODE_DIR;
	for (unsigned k = 0; clash && n->parent == b->root && k < b->nreserved; k++) {
		const char *r = b->reserved[k];
		size_t rl = strlen(r);
		if (b->raw_len[i] == rl && memcmp(b->raw[i], r, rl) == 0) {
			size_t at = strcspn(r, "._");
			snprintf(buf, sizeof buf, "%.*s%%%02X%s", (int)at, r, (unsigned char)r[at],
				 r[at] ? r + at + 1 : "");
			return keep_name(b, i, buf, strlen(buf));
		}
	}
	if (layout == TFS_LAYOUT_FLAT && file && !b->suffix_len && beside_like(b, b->raw[i], b->raw_len[i]))
		return name_beside_like(b, i);
	if (layout == TFS_LAYOUT_FLAT && !(file && b->suffix_len) &&
	    tfs_name_is_plain(b->raw[i], b->raw_len[i])) {
		n->fname = b->raw[i];
		n->fname_len = b->raw_len[i];
		return TFS_OK;
	}
	/* Leave room for the suffixes, so a long name is shortened by the
	 * usual rule rather than cut. A directory keeps room for the name of
	 * a view's file named after it whether or not that view is wanted:
	 * a tensor's path must not depend on it. */
	int conflict = file && (b->flags[i] & NODE_CONFLICT);
	size_t room = (conflict ? strlen(TFS_CONFLICT_SUFFIX) : 0) + (file ? b->suffix_len : 0) +
		      (!file ? b->dir_room : 0);
	size_t len = tfs_name_map_max(b->raw[i], b->raw_len[i], buf, TFS_NAME_MAX - room, &hashed);
	if (conflict) {
		memcpy(buf + len, TFS_CONFLICT_SUFFIX, strlen(TFS_CONFLICT_SUFFIX));
		len += strlen(TFS_CONFLICT_SUFFIX);
	}
	if (file && b->suffix_len) {
		memcpy(buf + len, b->suffix, b->suffix_len);
		len += b->suffix_len;
	}
	buf[len] = 0;
	return keep_name(b, i, buf, len);
}

/* A view's file named after another node (D.safetensors, from D's name),
 * by the view. */
static tfs_err name_after(struct build *b, uint32_t i)
{
	struct tfs_tree *t = b->t;
	struct tfs_node *n = &t->nodes[i];
	const struct tfs_node *of = &t->nodes[n->first];
	/* Through the offset: an earlier append may have moved the arena. */
	const char *oname = b->foff[n->first] != UINT64_MAX ? t->fnames + b->foff[n->first] : of->fname;
	char buf[TFS_NAME_MAX + 1];
	size_t len = tfs_view_of_kind(n->kind)->name_after(t, n, oname, of->fname_len, buf);
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
	for (uint32_t i = 0; i < b->first_user; i++)
		b->foff[i] = UINT64_MAX;
	for (uint32_t i = b->first_user; i < t->nnodes; i++) {
		const struct tfs_node *n = &t->nodes[i];
		b->foff[i] = UINT64_MAX;
		if (n->fname || is_beside(t, i) || named_after(t, i))
			continue; /* named already, or later */
		if (name_one(b, i))
			return TFS_ERR_NOMEM;
	}
	for (uint32_t i = b->first_user; i < t->nnodes; i++)
		if (named_after(t, i) && name_after(b, i))
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
		if (is_beside(t, ni))
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

/* -o stats, -o pictures: NAME.stats.json, NAME.png from each tensor's
 * final file name, or the view's long form when NAME has no room. */
tfs_err tfs_tree_name_beside(struct build *b, struct tfs_diag *d)
{
	struct tfs_tree *t = b->t;
	int any = 0;
	for (uint32_t i = b->first_user; i < t->nnodes; i++) {
		struct tfs_node *n = &t->nodes[i];
		if (!is_beside(t, i))
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
		if (is_beside(t, i) && tfs_tree_slot_insert(t, i))
			return tfs_fail(
				d, TFS_ERR_FORMAT,
				"a file beside a tensor's has the name of another (a bug in tensorfs)");
	return TFS_OK;
}
