/* The tensors' files as the tree makes them (views/tree.h): how -o format
 * and -o convert show every tensor (its form), the NPY header's length
 * before its bytes, and what each file is (its dtype as shown, its shape
 * and offsets), which the tensors' view (views/tensor.c) and the tables
 * say and any view may ask. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "compute/convert.h"
#include "views/tree.h"

const struct tfs_opt_spec tfs_tree_tensor_opts[] = {
	{"format", 1, "npy: NAME.npy files that np.load reads", "raw|npy", 0},
	{"convert", 1, "f32: narrow float and quantized tensors as float32;\nnone (the default): as stored",
	 "f32|none", 0},
	{NULL, 0, NULL, NULL, 0},
};

tfs_err tfs_tree_tensor_check(const struct tfs_opts *o, struct tfs_diag *d)
{
	const char *f = tfs_opts_get(o, "format"), *c = tfs_opts_get(o, "convert");
	if (f && strcmp(f, "npy") != 0 && strcmp(f, "raw") != 0)
		return tfs_fail(d, TFS_ERR_INVAL, "-o format= takes raw or npy, not '%s'", f);
	if (c && strcmp(c, "f32") != 0 && strcmp(c, "none") != 0)
		return tfs_fail(d, TFS_ERR_INVAL, "-o convert= takes f32 or none, not '%s'", c);
	return TFS_OK;
}

unsigned tfs_tree_form(const struct tfs_opts *o)
{
	const char *f = tfs_opts_get(o, "format"), *c = tfs_opts_get(o, "convert");
	return (f && strcmp(f, "npy") == 0 ? TFS_FORM_NPY : 0) |
	       (c && strcmp(c, "f32") == 0 ? TFS_FORM_F32 : 0);
}

tfs_err tfs_tree_npy_len(unsigned form, const struct tfs_table *h, const struct tfs_tensor *ts,
			 uint32_t *first)
{
	*first = 0;
	if (!(form & TFS_FORM_NPY))
		return TFS_OK;
	char hb[4096], *hp = hb;
	size_t need = tfs_npy_header_max(ts);
	if (need > sizeof hb && !(hp = malloc(need)))
		return TFS_ERR_NOMEM;
	*first = (uint32_t)tfs_npy_header(h, ts, form & TFS_FORM_F32, hp, need);
	if (hp != hb)
		free(hp);
	return TFS_OK;
}

int tfs_node_converted(const struct tfs_tree *t, const struct tfs_node *n)
{
	return (t->form & TFS_FORM_F32) && tfs_converts(tfs_node_tensor(t, n)->dtype);
}

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
