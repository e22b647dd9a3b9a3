/* -o stats: NAME.stats.json beside every tensor file, the tensor's
 * statistics (compute/stats.h) as one JSON object, worked out when first
 * read. Its size must be known before (ls -l reads nothing): the object is
 * padded with spaces to a fixed size no object can pass, then a newline,
 * which every JSON reader takes as trailing whitespace. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "compute/stats.h"
#include "views/tree.h"
#include "views/view.h"

/* The longest object: 9 counts of 20 digits, 7 numbers of 24 characters
 * (-1.2345678901234567e-308), 64 histogram counts of 20 digits and their
 * separators, the keys: under 2,200 bytes. */
#define FILE_SIZE 2560

/* The texts of the last KEPT files read, not of every one ever read (each
 * is FILE_SIZE bytes; 100,000 read kept 250 MB): the bound on memory is
 * KEPT * FILE_SIZE (about 2.6 MB), plus 4 bytes per tensor. A file read
 * again after it left is worked out again (the kernel's page cache keeps
 * it too: keep_cache). */
#define KEPT 1024

struct kept {
	uint32_t ref; /* the file's slot */
	uint64_t used;
	char *text;
};

struct tfs_statsfiles {
	pthread_mutex_t lock;
	uint32_t n;
	uint64_t clock;
	unsigned nkept;
	struct kept kept[KEPT];
	uint32_t where[]; /* kept[] index + 1 by slot, 0: not kept */
};

/* A slot for every tensor's file. */
static void *state_new(const struct tfs_model *m, const struct tfs_tree_opts *o)
{
	(void)o;
	uint64_t n = 0;
	for (uint32_t k = 0; k < m->nshards; k++)
		n += m->shards[k].h.n;
	if (n > UINT32_MAX)
		return NULL;
	struct tfs_statsfiles *s = calloc(1, sizeof *s + (size_t)n * sizeof s->where[0]);
	if (s) {
		pthread_mutex_init(&s->lock, NULL);
		s->n = (uint32_t)n;
	}
	return s;
}

static void state_free(void *p)
{
	struct tfs_statsfiles *s = p;
	for (unsigned i = 0; i < s->nkept; i++)
		free(s->kept[i].text);
	pthread_mutex_destroy(&s->lock);
	free(s);
}

static uint64_t size(const struct tfs_tree *t, const struct tfs_node *n)
{
	(void)t;
	(void)n;
	return FILE_SIZE;
}

static tfs_err make(const struct tfs_tree *t, const struct tfs_node *n, char **out)
{
	const struct tfs_node *tn = &t->nodes[n->first];
	const struct tfs_shard *sh = &t->m->shards[tn->shard];
	struct tfs_stats st;
	tfs_err e = tfs_stats_tensor(sh, &sh->h.t[tn->ref], &st);
	if (e && e != TFS_ERR_UNHANDLED)
		return e;
	char *text = malloc(FILE_SIZE + 1);
	FILE *f = text ? fmemopen(text, FILE_SIZE + 1, "w") : NULL;
	if (!f) {
		free(text);
		return TFS_ERR_NOMEM;
	}
	if (e)
		fputs("{\"stats\": null}", f); /* complex: no plain numbers */
	else
		tfs_stats_json(f, &st);
	long len = ftell(f);
	fclose(f);
	if (len < 0 || len >= FILE_SIZE) {
		free(text);
		return TFS_ERR_NOMEM; /* cannot be: FILE_SIZE bounds every object */
	}
	memset(text + len, ' ', FILE_SIZE - 1 - (size_t)len);
	text[FILE_SIZE - 1] = '\n';
	*out = text;
	return TFS_OK;
}

/* Copies bytes [off, off + len) of slot ref's text into `to` if it is
 * kept; 1 if so. Called with the lock held. */
static int copy_kept(struct tfs_statsfiles *s, uint32_t ref, uint64_t off, size_t len, void *to)
{
	uint32_t w = s->where[ref];
	if (!w)
		return 0;
	struct kept *k = &s->kept[w - 1];
	k->used = ++s->clock;
	memcpy(to, k->text + off, len);
	return 1;
}

/* Keeps `text` as slot ref's, in place of the least recently read one
 * when KEPT are kept; frees it if another reader kept one first. */
static void keep(struct tfs_statsfiles *s, uint32_t ref, char *text)
{
	if (s->where[ref]) {
		free(text);
		return;
	}
	unsigned i = s->nkept;
	if (i == KEPT) {
		i = 0;
		for (unsigned k = 1; k < KEPT; k++)
			if (s->kept[k].used < s->kept[i].used)
				i = k;
		s->where[s->kept[i].ref] = 0;
		free(s->kept[i].text);
	} else {
		s->nkept++;
	}
	s->kept[i] = (struct kept){ref, ++s->clock, text};
	s->where[ref] = i + 1;
}

static tfs_err pieces(const struct tfs_tree *t, const struct tfs_node *n, uint64_t off, size_t len,
		      struct tfs_pieces *out)
{
	struct tfs_statsfiles *s = t->vstate[n->kind];
	void *to = tfs_pieces_room(out, len);
	if (!to)
		return TFS_ERR_IO; /* (the read's own room: cannot be) */
	pthread_mutex_lock(&s->lock);
	int have = copy_kept(s, n->ref, off, len, to);
	pthread_mutex_unlock(&s->lock);
	if (!have) {
		/* Worked out outside the lock (a tensor can take seconds);
		 * two first readers may both work, one result is kept. */
		char *mine = NULL;
		tfs_err e = make(t, n, &mine);
		if (e)
			return e;
		memcpy(to, mine + off, len);
		pthread_mutex_lock(&s->lock);
		keep(s, n->ref, mine);
		pthread_mutex_unlock(&s->lock);
	}
	return tfs_pieces_mem(out, to, len);
}

static const struct tfs_opt_spec opts[] = {
	{"stats", 0, "NAME.stats.json beside each tensor file (--stats's figures)", NULL, 0},
	{NULL, 0, NULL, NULL, 0},
};

static int wanted(const struct tfs_tree_opts *o)
{
	return tfs_opts_get(o->opts, "stats") != NULL;
}

const struct tfs_view_ops tfs_view_stats = {
	.name = "stats",
	/* In the flat layout a tensor whose name ends so is shown with that
	 * '.' as %2E (views/tree_names.c). */
	.beside = ".stats.json",
	.beside_long = "__stats_%u__.json",
	.wanted = wanted,
	.opts = opts,
	.size = size,
	.pieces = pieces,
	.state_new = state_new,
	.state_free = state_free,
};
