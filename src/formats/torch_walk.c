/* PyTorch checkpoints (formats/torch_i.h): the unpickled object tree to
 * tensor names and metadata. A name is the path of dict keys and list or
 * tuple indexes joined by '.'; the walk is bounded in depth and in visits
 * (shared objects), and a tensor must lie inside its storage's record. */
#include "formats/torch_i.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/jscan.h"
#include "core/json.h"

static void warn(struct walk *w, const char *msg)
{
	if (w->o && w->o->warn)
		w->o->warn(w->o->warn_ctx, msg);
}

/* Whether every element the size and strides reach from the storage
 * offset lies in the storage: only those bytes must be there. A tensor
 * made by expand() has stride 0 and more elements than its storage holds
 * (BERT's position_ids); a view may reach backwards or overlap itself.
 * Each step is checked against the storage alone, so the sums fit. */
static int reach_inside(const struct tensor *t, const struct storage *s, uint64_t esz)
{
	uint64_t selem = s->nbytes / esz, lo = t->offset, hi = t->offset;
	if (t->offset >= selem)
		return 0;
	for (uint32_t i = 0; i < t->ndim; i++) {
		uint64_t span = DIM(t->size, i) - 1; /* no dim is 0 here */
		int64_t st = t->stride->u.v[i]->u.i;
		uint64_t mag = st < 0 ? (uint64_t)0 - (uint64_t)st : (uint64_t)st;
		if (!span || !mag)
			continue;
		if (mag >= selem || span > (selem - 1) / mag)
			return 0;
		uint64_t step = span * mag; /* < selem */
		if (st < 0) {
			if (step > lo)
				return 0;
			lo -= step;
		} else {
			if (step >= selem - hi)
				return 0;
			hi += step;
		}
	}
	return 1;
}

static tfs_err put_tensor(struct walk *w, const struct tensor *t)
{
	char q[160];
#define Q (tfs_quote(q, sizeof q, w->path, w->plen), q)
	if (!w->plen)
		return tfs_fail(w->d, TFS_ERR_FORMAT, "a tensor with an empty name (a dict key \"\")");
	uint64_t numel = 1, esz = tfs_dtype_bytes(t->dt, 1);
	int zero = 0;
	for (uint32_t i = 0; i < t->ndim; i++)
		if (!DIM(t->size, i))
			zero = 1;
	for (uint32_t i = 0; i < t->ndim && !zero; i++) {
		if (numel > UINT64_MAX / DIM(t->size, i))
			return tfs_fail(w->d, TFS_ERR_FORMAT, "tensor %s: its element count overflows", Q);
		numel *= DIM(t->size, i);
	}
	if (zero)
		numel = 0;
	const struct storage *s = t->st;
	uint64_t off = 0, len = 0;
	if (numel && !reach_inside(t, s, esz)) {
		/* The key is pickle bytes: not NUL-terminated, maybe hostile. */
		char qk[60];
		tfs_quote(qk, sizeof qk, s->key, s->klen);
		return tfs_fail(
			w->d, TFS_ERR_FORMAT,
			"tensor %s: the elements its size, strides and storage offset %llu reach run past its storage %s (%llu bytes)",
			Q, (unsigned long long)t->offset, qk, (unsigned long long)s->nbytes);
	}
	if (numel) {
		/* C-contiguous: strides are the running products, size-1 dims aside */
		uint64_t expect = 1;
		for (uint32_t i = t->ndim; i-- > 0;) {
			if (DIM(t->size, i) != 1 && DIM(t->stride, i) != expect) {
				(void)Q;
				if (w->hidden++ < HIDDEN_NAMED && w->hlen < sizeof w->hidden_names - 1)
					w->hlen += (size_t)snprintf(w->hidden_names + w->hlen,
								    sizeof w->hidden_names - w->hlen, "%s%s",
								    w->hlen ? ", " : "", q);
				if (w->hlen >= sizeof w->hidden_names)
					w->hlen = sizeof w->hidden_names - 1;
				char msg[TFS_DIAG_MAX];
				snprintf(
					msg, sizeof msg,
					"tensor %s is not contiguous in its storage (a saved view, e.g. a transpose); hidden: a file maps one byte range",
					q);
				warn(w, msg);
				return TFS_OK;
			}
			expect *= DIM(t->size, i);
		}
		off = t->offset * esz;
		len = numel * esz;
	}
	struct tfs_tensor x = {0};
	x.begin = s->data + (off < s->nbytes ? off : s->nbytes);
	x.end = x.begin + len;
	x.dtype = t->dt;
	x.ndim = t->ndim;
	x.dims_off = (uint32_t)w->t->ndims;
	for (uint32_t i = 0; i < t->ndim; i++)
		if (tfs_table_dim(&w->b, DIM(t->size, i)))
			return tfs_fail(w->d, TFS_ERR_NOMEM, "out of memory");
	int dup;
	x.name_len = (uint32_t)w->plen;
	if (tfs_table_text(&w->b, w->path, w->plen, &x.name_off) || tfs_table_put(&w->b, &x, 0, &dup))
		return tfs_fail(w->d, TFS_ERR_NOMEM, "out of memory");
	if (dup)
		return tfs_fail(
			w->d, TFS_ERR_FORMAT,
			"two tensors are both named %s (nested keys that join to the same dotted name)", Q);
	return TFS_OK;
}
#undef Q

/* A plain value beside the tensors (an epoch, a config string) goes to
 * the metadata under its dotted name, as Python would print it. */
static tfs_err put_meta(struct walk *w, const struct tfs_pk_obj *v)
{
	char buf[64];
	const char *s = buf;
	size_t len, cut = 0;
	switch (v->kind) {
	case TFS_PK_NONE:
		s = "None";
		len = 4;
		break;
	case TFS_PK_BOOL:
		s = v->u.i ? "True" : "False";
		len = strlen(s);
		break;
	case TFS_PK_INT:
		len = (size_t)snprintf(buf, sizeof buf, "%lld", (long long)v->u.i);
		break;
	case TFS_PK_FLOAT:
		len = tfs_float_repr(buf, sizeof buf, v->u.f);
		break;
	case TFS_PK_STR:
		s = v->u.str.s;
		len = v->u.str.len;
		if (len > META_VAL_MAX) {
			len = META_VAL_MAX;
			while (len && (s[len] & 0xc0) == 0x80)
				len--; /* never cut inside a UTF-8 sequence */
			cut = v->u.str.len;
		}
		break;
	default:
		return TFS_OK; /* bytes, sets, storages and globals are not shown */
	}
	if (!w->plen)
		return TFS_OK;
	if (w->t->nmeta >= META_MAX) {
		w->meta_dropped++;
		return TFS_OK;
	}
	struct tfs_meta_pair m;
	char mark[96];
	size_t ml = 0;
	if (cut) {
		char q[160], msg[TFS_DIAG_MAX];
		ml = (size_t)snprintf(mark, sizeof mark, " [... cut by tensorfs: %zu bytes in all]", cut);
		tfs_quote(q, sizeof q, w->path, w->plen);
		snprintf(
			msg, sizeof msg,
			"metadata value %s has %zu bytes: __metadata__.json shows its first %zu, marked as cut",
			q, cut, len);
		warn(w, msg);
	}
	if (tfs_table_text(&w->b, w->path, w->plen, &m.key_off) ||
	    tfs_table_text2(&w->b, s, len, mark, ml, &m.val_off))
		return tfs_fail(w->d, TFS_ERR_NOMEM, "out of memory");
	m.key_len = (uint32_t)w->plen;
	m.val_len = (uint32_t)(len + ml);
	w->t->has_metadata = true;
	return tfs_table_meta(&w->b, &m) ? tfs_fail(w->d, TFS_ERR_NOMEM, "out of memory") : TFS_OK;
}

static tfs_err walk(struct walk *w, const struct tfs_pk_obj *o, int depth);

static tfs_err child(struct walk *w, const char *k, size_t kl, const struct tfs_pk_obj *v, int depth)
{
	size_t save = w->plen;
	if (w->plen + kl + 1 >= sizeof w->path)
		return tfs_fail(w->d, TFS_ERR_FORMAT, "a tensor name over %zu bytes", sizeof w->path);
	if (w->plen)
		w->path[w->plen++] = '.';
	memcpy(w->path + w->plen, k, kl);
	w->plen += kl;
	tfs_err e = walk(w, v, depth + 1);
	w->plen = save;
	return e;
}

static tfs_err walk(struct walk *w, const struct tfs_pk_obj *o, int depth)
{
	if (depth > DEPTH_MAX)
		return tfs_fail(w->d, TFS_ERR_FORMAT,
				"the checkpoint nests containers more than %d deep (or refers to itself)",
				DEPTH_MAX);
	/* A tree visits each object once; tied weights add a few paths. More
	 * visits than objects and pickle bytes together is shared structure
	 * that would never be walked to its end (2^60 paths from 60 memo
	 * references of x = (x, x)). */
	if (++w->visits > w->visit_max)
		return tfs_fail(
			w->d, TFS_ERR_FORMAT,
			"the checkpoint's objects are shared so often that walking them would not end (over %llu paths through %llu objects): refused",
			(unsigned long long)w->visit_max, (unsigned long long)w->objects);
	char num[24];
	tfs_err e = TFS_OK;
	switch (o->kind) {
	case TFS_PK_DICT:
		for (uint32_t i = 0; i + 1 < o->n && !e; i += 2) {
			const struct tfs_pk_obj *k = o->u.v[i];
			if (k->kind == TFS_PK_STR) {
				e = child(w, k->u.str.s, k->u.str.len, o->u.v[i + 1], depth);
			} else if (k->kind == TFS_PK_INT) {
				int nl = snprintf(num, sizeof num, "%lld", (long long)k->u.i);
				e = child(w, num, (size_t)nl, o->u.v[i + 1], depth);
			}
			/* other keys (tuples, None...) name nothing a path can hold */
		}
		return e;
	case TFS_PK_LIST:
	case TFS_PK_TUPLE:
		for (uint32_t i = 0; i < o->n && !e; i++) {
			int nl = snprintf(num, sizeof num, "%u", i);
			e = child(w, num, (size_t)nl, o->u.v[i], depth);
		}
		return e;
	case TFS_PK_USER:
		if (o->ukind == U_TENSOR) {
			if (!w->plen) {
				/* torch.save(tensor): one tensor, no key */
				memcpy(w->path, "tensor", 6);
				w->plen = 6;
				e = put_tensor(w, o->u.user);
				w->plen = 0;
				return e;
			}
			return put_tensor(w, o->u.user);
		}
		return TFS_OK;
	default:
		return put_meta(w, o);
	}
}

tfs_err tfs_torch_walk(struct walk *w, const struct tfs_pk_obj *o, int depth)
{
	return walk(w, o, depth);
}
