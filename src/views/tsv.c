/* The table in every directory (__tensors__.tsv): one line per entry, for
 * people (any viewer) and scripts (TSV). docs/views.md, "The table in every
 * directory", has the columns.
 *
 * Nothing is built at mount time and the text is never held whole: the
 * first time a table's size is asked for, its lines are formatted once to
 * count them, keeping only the byte offset of every 256th line; a read
 * formats the lines it covers again, from the nearest such offset. */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "core/json.h"
#include "core/mem.h"
#include "views/tree.h"
#include "views/view.h"

/* The table's size in bytes (0 when out of memory: an empty file). */
static uint64_t tfs_listing_size(const struct tfs_tree *t, const struct tfs_node *table);

/* Bytes [off, off + len) of the table into dst; *got is how many there
 * were (fewer at the end). */
static tfs_err tfs_listing_read(const struct tfs_tree *t, const struct tfs_node *table, uint64_t off,
				size_t len, char *dst, size_t *got);

/* Every directory's table of its entries (docs/views.md, "The table in every
 * directory"). Names of this shape are reserved by the name mapping. */
#define TABLE_NAME "__tensors__.tsv"

#define LINES_PER_MARK 256
#define HEADER_LINE "name\tdtype\tshape\tbytes\toffsets\n"

struct table {
	int ready; /* size and marks are set (read with acquire) */
	uint64_t size;
	uint64_t bytes;  /* of the tensors under the directory */
	uint64_t *marks; /* byte offset of line k * LINES_PER_MARK */
	uint32_t nmarks;
};

struct tfs_listing {
	struct tfs_dir_files f; /* of struct table */
	int sums_done;          /* every table's `bytes` is set */
};

static struct tfs_listing *listing_of(const struct tfs_tree *t, const struct tfs_node *table)
{
	return t->vstate[table->kind];
}

/* The table of directory `dir`, found through its TABLE_NAME entry. */
static struct table *table_of(const struct tfs_tree *t, uint32_t dir)
{
	uint32_t ti = tfs_tree_lookup(t, dir, TABLE_NAME, strlen(TABLE_NAME));
	return ti ? tfs_dir_file(&listing_of(t, &t->nodes[ti])->f, t->nodes[ti].ref) : NULL;
}

/* Every directory's tensor bytes in one pass: a child is always created
 * after its directory, so walking the nodes backwards adds each subtree
 * into its parent before the parent is added to its own. */
static tfs_err sum_dirs(const struct tfs_tree *t)
{
	uint64_t *acc = calloc(t->nnodes, sizeof *acc);
	if (!acc)
		return TFS_ERR_NOMEM;
	for (uint32_t i = t->nnodes - 1; i >= 2; i--) {
		const struct tfs_node *n = &t->nodes[i];
		if (n->kind == TFS_NODE_TENSOR)
			acc[i] = tfs_node_size(t, n);
		if (n->kind == TFS_NODE_TENSOR || n->kind == TFS_NODE_DIR)
			acc[n->parent] += acc[i];
	}
	for (uint32_t i = 1; i < t->nnodes; i++) {
		if (t->nodes[i].kind != TFS_NODE_DIR)
			continue;
		struct table *tb = table_of(t, i);
		if (tb)
			tb->bytes = acc[i];
	}
	free(acc);
	return TFS_OK;
}

/* Text with no tab, newline or other control character: the dtype of an
 * unknown type is free text. Escaped as file names are (%XX). */
static tfs_err put_field(char **b, size_t *len, size_t *cap, const char *s, size_t n)
{
	static const char hex[] = "0123456789ABCDEF";
	size_t run = 0;
	for (size_t i = 0; i < n; i++) {
		unsigned char c = (unsigned char)s[i];
		if (c >= 0x20 && c != 0x7f && c != '%') {
			run++;
			continue;
		}
		char esc[3] = {'%', hex[c >> 4], hex[c & 15]};
		if (tfs_json_put(b, len, cap, s + i - run, run) || tfs_json_put(b, len, cap, esc, 3))
			return TFS_ERR_NOMEM;
		run = 0;
	}
	return tfs_json_put(b, len, cap, s + n - run, run);
}

/* Appends the line of entry `ci` (a child of the directory). */
static tfs_err put_line(const struct tfs_tree *t, uint32_t ci, char **b, size_t *len, size_t *cap)
{
	const struct tfs_node *n = &t->nodes[ci];
	tfs_err e = tfs_json_put(b, len, cap, n->fname, n->fname_len);
	if (e)
		return e;
	if (n->kind == TFS_NODE_DIR) {
		const struct table *tb = table_of(t, ci);
		if ((e = tfs_json_puts(b, len, cap, "/\t-\t-\t")) ||
		    (e = tfs_json_u64(b, len, cap, tb ? tb->bytes : 0)))
			return e;
		return tfs_json_puts(b, len, cap, "\t-\n");
	}
	size_t dl;
	const char *dt = tfs_node_dtype(t, n, &dl);
	if ((e = tfs_json_put(b, len, cap, "\t", 1)) || (e = put_field(b, len, cap, dt, dl)) ||
	    (e = tfs_json_put(b, len, cap, "\t", 1)))
		return e;
	/* The shape is written in place, after making room for it. */
	size_t need = tfs_node_shape_max(t, n) + TFS_OFFSETS_MAX + 32;
	if (*len + need + 1 > *cap) {
		if ((e = tfs_json_put(b, len, cap, "", 0)))
			return e;
		size_t nc = *cap;
		while (nc < *len + need + 1)
			nc *= 2;
		char *q = realloc(*b, nc);
		if (!q)
			return TFS_ERR_NOMEM;
		*b = q;
		*cap = nc;
	}
	*len += tfs_node_shape(t, n, *b + *len);
	(*b)[(*len)++] = '\t';
	if ((e = tfs_json_u64(b, len, cap, tfs_node_size(t, n))) || (e = tfs_json_put(b, len, cap, "\t", 1)))
		return e;
	*len += tfs_node_offsets(t, n, *b + *len);
	return tfs_json_put(b, len, cap, "\n", 1);
}

/* Line k of the table: 0 is the header, then one per entry but the table. */
static uint32_t entries(const struct tfs_node *dir)
{
	return dir->count;
}

static tfs_err put_entry(const struct tfs_tree *t, const struct tfs_node *dir, uint32_t k, char **b,
			 size_t *len, size_t *cap)
{
	if (k == 0)
		return tfs_json_puts(b, len, cap, HEADER_LINE);
	uint32_t ci = t->children[dir->first + k - 1];
	if (t->nodes[ci].kind != TFS_NODE_TENSOR && t->nodes[ci].kind != TFS_NODE_DIR)
		return TFS_OK; /* the synthetic files have no line */
	return put_line(t, ci, b, len, cap);
}

static tfs_err work_out(const struct tfs_tree *t, const struct tfs_node *table, struct table *tb)
{
	const struct tfs_node *dir = &t->nodes[table->parent];
	uint32_t lines = entries(dir) + 1;
	char *b = NULL;
	size_t len = 0, cap = 0;
	uint64_t size = 0;
	tfs_err e = TFS_OK;
	if (!listing_of(t, table)->sums_done) {
		if ((e = sum_dirs(t)))
			return e;
		listing_of(t, table)->sums_done = 1;
	}
	tb->nmarks = (lines + LINES_PER_MARK - 1) / LINES_PER_MARK;
	tb->marks = malloc((size_t)tb->nmarks * sizeof *tb->marks);
	if (!tb->marks)
		return TFS_ERR_NOMEM;
	for (uint32_t k = 0; k < lines; k++) {
		if (k % LINES_PER_MARK == 0)
			tb->marks[k / LINES_PER_MARK] = size;
		len = 0;
		if ((e = put_entry(t, dir, k, &b, &len, &cap)))
			break;
		size += len;
	}
	free(b);
	if (e) {
		free(tb->marks);
		tb->marks = NULL;
		return e;
	}
	tb->size = size;
	__atomic_store_n(&tb->ready, 1, __ATOMIC_RELEASE);
	return TFS_OK;
}

static struct table *ready(const struct tfs_tree *t, const struct tfs_node *table)
{
	struct tfs_listing *l = listing_of(t, table);
	struct table *tb = tfs_dir_file(&l->f, table->ref);
	if (__atomic_load_n(&tb->ready, __ATOMIC_ACQUIRE))
		return tb;
	pthread_mutex_lock(&l->f.lock);
	tfs_err e = tb->ready ? TFS_OK : work_out(t, table, tb);
	pthread_mutex_unlock(&l->f.lock);
	return e ? NULL : tb;
}

static uint64_t tfs_listing_size(const struct tfs_tree *t, const struct tfs_node *table)
{
	const struct table *tb = ready(t, table);
	return tb ? tb->size : 0;
}

static tfs_err tfs_listing_read(const struct tfs_tree *t, const struct tfs_node *table, uint64_t off,
				size_t len, char *dst, size_t *got)
{
	const struct table *tb = ready(t, table);
	*got = 0;
	if (!tb)
		return TFS_ERR_NOMEM;
	if (off >= tb->size)
		return TFS_OK;
	/* The last mark at or before off. */
	uint32_t lo = 0, hi = tb->nmarks;
	while (hi - lo > 1) {
		uint32_t mid = lo + (hi - lo) / 2;
		if (tb->marks[mid] <= off)
			lo = mid;
		else
			hi = mid;
	}
	const struct tfs_node *dir = &t->nodes[table->parent];
	uint32_t lines = entries(dir) + 1;
	uint64_t at = tb->marks[lo];
	char *b = NULL;
	size_t bl = 0, cap = 0;
	tfs_err e = TFS_OK;
	for (uint32_t k = lo * LINES_PER_MARK; k < lines && *got < len; k++) {
		bl = 0;
		if ((e = put_entry(t, dir, k, &b, &bl, &cap)))
			break;
		if (at + bl > off) {
			size_t skip = off > at ? (size_t)(off - at) : 0;
			size_t n = bl - skip < len - *got ? bl - skip : len - *got;
			memcpy(dst + *got, b + skip, n);
			*got += n;
		}
		at += bl;
	}
	free(b);
	return e;
}

static tfs_err table_pieces(const struct tfs_tree *t, const struct tfs_node *n, uint64_t off, size_t len,
			    struct tfs_pieces *out)
{
	char *to = tfs_pieces_room(out, len);
	size_t got;
	if (!to)
		return TFS_ERR_NOMEM;
	tfs_err e = tfs_listing_read(t, n, off, len, to, &got);
	return e ? e : tfs_pieces_mem(out, to, got);
}

static const struct tfs_opt_spec opts[] = {
	{"notsv", 0, "no __tensors__.tsv table in each directory", NULL, 0},
	{NULL, 0, NULL, NULL, 0},
};

/* On unless -o notsv; the tools' own tree (no options) has none. */
static int wanted(const struct tfs_tree_opts *o)
{
	return o->opts && !tfs_opts_get(o->opts, "notsv");
}

static void *state_new(const struct tfs_model *m, const struct tfs_tree_opts *o)
{
	(void)m;
	(void)o;
	return tfs_dir_files_new(sizeof(struct tfs_listing), sizeof(struct table));
}

static void free_marks(void *slot)
{
	free(((struct table *)slot)->marks);
}

static void state_free(void *state)
{
	tfs_dir_files_free(state, free_marks);
}

/* A table in every directory, none of them worked out yet. */
static tfs_err per_dir(struct tfs_tree_add *a, void *state, uint32_t dir)
{
	return tfs_dir_files_add(state, a, dir, TABLE_NAME, NULL);
}

const struct tfs_view_ops tfs_view_tsv = {
	.name = "tsv",
	.flags = TFS_VIEWF_LEAD,
	.opts = opts,
	.wanted = wanted,
	.state_new = state_new,
	.state_free = state_free,
	.per_dir = per_dir,
	.size = tfs_listing_size,
	.pieces = table_pieces,
};
