/* tensorfs diff A B (tools/diff.h). */
#include "tools/diff.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "model/lookup.h"
#include "core/json.h"
#include "compute/hashes.h"
#include "compute/compare.h"
#include "compute/values.h"

/* Bytes compared at a time. */
#define CHUNK (4u << 20)

struct ref {
	const struct tfs_shard *sh;
	const struct tfs_tensor *t;
};

enum status { SAME_BYTES, SAME_VALUES, DIFFERS, SHAPE, DTYPE, ONLY_A, ONLY_B, NSTATUS };
static const char *const status_names[NSTATUS] = {"identical", "equal",  "differs", "shape",
						  "dtype",     "only_a", "only_b"};

struct run {
	const char *an, *bn;
	int json;
	FILE *out;
	uint64_t bytes_read;
	uint64_t count[NSTATUS];
	size_t rows;
	unsigned char *ba, *bb;
};

static int same_shape(const struct ref *a, const struct ref *b)
{
	if (a->t->ndim != b->t->ndim)
		return 0;
	for (uint32_t k = 0; k < a->t->ndim; k++)
		if (a->sh->h.dims[a->t->dims_off + k] != b->sh->h.dims[b->t->dims_off + k])
			return 0;
	return 1;
}

static int same_dtype(const struct ref *a, const struct ref *b)
{
	size_t la, lb;
	const char *da = tfs_tensor_dtype(&a->sh->h, a->t, &la), *db = tfs_tensor_dtype(&b->sh->h, b->t, &lb);
	return la == lb && memcmp(da, db, la) == 0;
}

/* Byte-identical without reading: the same range of the same file (the
 * same path and version, the same local file by device and inode however
 * it was named (a symlink, a hard link, "./"), or the same content hash
 * the server vouches for). */
static int known_same(const struct ref *a, const struct ref *b)
{
	const struct tfs_source *sa = a->sh->src, *sb = b->sh->src;
	if (a->t->begin != b->t->begin || a->t->end != b->t->end || !sa || !sb)
		return 0;
	if (sa->sha256[0] && strcmp(sa->sha256, sb->sha256) == 0)
		return 1;
	if (sa->id.ino && !sa->etag && !sb->etag && sa->id.ino == sb->id.ino && sa->id.dev == sb->id.dev &&
	    sa->id.size == sb->id.size && sa->id.mtime_sec == sb->id.mtime_sec &&
	    sa->id.mtime_nsec == sb->id.mtime_nsec)
		return 1;
	if (!sa->location || !sb->location || strcmp(sa->location, sb->location) != 0)
		return 0;
	if (sa->etag || sb->etag)
		return sa->etag && sb->etag && strcmp(sa->etag, sb->etag) == 0;
	return sa->id.size == sb->id.size && sa->id.mtime_sec == sb->id.mtime_sec &&
	       sa->id.mtime_nsec == sb->id.mtime_nsec && sa->id.ino == sb->id.ino && sa->id.dev == sb->id.dev;
}

/* The stored bytes' SHA-256 where the source's memo holds it (worked out by
 * an earlier mount or --verify with the same disk cache). */
static int memo_sha(const struct ref *x, char *hex)
{
	char key[128];
	unsigned char sha[32];
	uint64_t xxh;
	tfs_digest_memo_key(TFS_DIGEST_SHA256, 0, 0, x->t->begin, x->t->end, key, sizeof key);
	return tfs_source_memo_get(x->sh->src, key, hex, 80) &&
	       !tfs_digest_parse(TFS_DIGEST_SHA256, hex, sha, &xxh);
}

/* 1 when the stored bytes are the same, 0 when not, -1 unreadable. */
static int same_bytes(struct run *r, const struct ref *a, const struct ref *b)
{
	uint64_t n = tfs_tensor_size(a->t);
	if (n != tfs_tensor_size(b->t))
		return 0;
	for (uint64_t off = 0; off < n; off += CHUNK) {
		size_t k = n - off < CHUNK ? (size_t)(n - off) : CHUNK;
		if (tfs_source_serve(a->sh->src, r->ba, k, a->t->begin + off, a->t->end) ||
		    tfs_source_serve(b->sh->src, r->bb, k, b->t->begin + off, b->t->end))
			return -1;
		r->bytes_read += 2 * k;
		if (memcmp(r->ba, r->bb, k) != 0)
			return 0;
	}
	return 1;
}

static tfs_err by_value(struct run *r, const struct ref *a, const struct ref *b, struct tfs_compare *f)
{
	r->bytes_read += tfs_tensor_size(a->t) + tfs_tensor_size(b->t);
	return tfs_compare_values(a->sh, a->t, b->sh, b->t, 0, f);
}

/* Integers on both sides (any widths): compared exactly. */
static tfs_err by_int(struct run *r, const struct ref *a, const struct ref *b, struct tfs_compare *f)
{
	r->bytes_read += tfs_tensor_size(a->t) + tfs_tensor_size(b->t);
	return tfs_compare_values(a->sh, a->t, b->sh, b->t, 1, f);
}

static void put_shape(FILE *f, const struct ref *x)
{
	fputc('[', f);
	for (uint32_t k = 0; k < x->t->ndim; k++)
		fprintf(f, "%s%llu", k ? "," : "", (unsigned long long)x->sh->h.dims[x->t->dims_off + k]);
	fputc(']', f);
}

/* In the table, six digits; nine for the cosine, which is near 1 when it
 * matters. */
static void put_num(FILE *f, const char *key, double v, int have, int json)
{
	if (!have || !isfinite(v))
		fprintf(f, json ? ", \"%s\": null" : "  %s -", key);
	else if (json)
		fprintf(f, ", \"%s\": %.17g", key, v);
	else
		fprintf(f, strcmp(key, "cosine") == 0 ? "  %s %.9g" : "  %s %.6g", key, v);
}

/* The largest difference: exact for integers; past DBL_MAX (F64 near
 * 1e308 on both sides) written from twice its half. */
static void put_max_abs(FILE *f, const struct tfs_compare *g, int json)
{
	if (g->exact) {
		char dig[48];
		size_t k = sizeof dig;
		unsigned __int128 v = g->max_int;
		dig[--k] = 0;
		do {
			dig[--k] = (char)('0' + (int)(v % 10));
			v /= 10;
		} while (v);
		fprintf(f, json ? ", \"max_abs\": %s" : "  max_abs %s", dig + k);
	} else if (g->max_over) {
		fprintf(f, json ? ", \"max_abs\": %.17Lg" : "  max_abs %.6Lg",
			2.0L * (long double)g->max_abs);
	} else {
		put_num(f, "max_abs", g->max_abs, 1, json);
	}
}

static void row(struct run *r, enum status st, const struct ref *a, const struct ref *b,
		const struct tfs_compare *f)
{
	r->count[st]++;
	const struct ref *x = a ? a : b;
	size_t nl = x->t->name_len;
	const char *name = tfs_tensor_name(&x->sh->h, x->t);
	if (st == SAME_BYTES && !r->json)
		return; /* the table lists what differs */
	FILE *o = r->out;
	if (r->json) {
		fputs(r->rows++ ? ",\n  {\"name\": " : "\n  {\"name\": ", o);
		tfs_json_fstr(o, name, nl);
		fprintf(o, ", \"status\": \"%s\"", status_names[st]);
	} else {
		char q[400];
		tfs_quote(q, sizeof q, name, nl);
		fprintf(o, "%-9s %s", status_names[st], q);
	}
	for (int side = 0; side < 2; side++) {
		const struct ref *y = side ? b : a;
		if (!y)
			continue;
		size_t dl;
		const char *dt = tfs_tensor_dtype(&y->sh->h, y->t, &dl);
		if (r->json) {
			fprintf(o, ", \"dtype_%c\": ", side ? 'b' : 'a');
			tfs_json_fstr(o, dt, dl);
			fprintf(o, ", \"shape_%c\": ", side ? 'b' : 'a');
		} else {
			fputs(side && a ? " -> " : "  ", o);
			fprintf(o, "%.*s ", (int)dl, dt);
		}
		put_shape(o, y);
	}
	if (f) {
		double na = sqrt(f->a2), nb = sqrt(f->b2);
		put_max_abs(o, f, r->json);
		put_num(o, "rel_l2", na > 0 ? sqrt(f->d2) / na : 0, na > 0 || f->d2 == 0, r->json);
		put_num(o, "cosine", f->ab / (na * nb), na > 0 && nb > 0, r->json);
		if (r->json)
			fprintf(o,
				", \"nan_a\": %llu, \"nan_b\": %llu, \"inf_a\": %llu, \"inf_b\": %llu, \"nonfinite_unmatched\": %llu",
				(unsigned long long)f->nan_a, (unsigned long long)f->nan_b,
				(unsigned long long)f->inf_a, (unsigned long long)f->inf_b,
				(unsigned long long)f->unmatched);
		else
			fprintf(o, "  nan %llu/%llu  inf %llu/%llu", (unsigned long long)f->nan_a,
				(unsigned long long)f->nan_b, (unsigned long long)f->inf_a,
				(unsigned long long)f->inf_b);
	}
	fputs(r->json ? "}" : "\n", o);
}

/* One tensor of A against its namesake in B. */
static tfs_err compare(struct run *r, const struct ref *a, const struct ref *b)
{
	struct tfs_compare f;
	if (!same_shape(a, b)) {
		row(r, SHAPE, a, b, NULL);
		return TFS_OK;
	}
	int dt = same_dtype(a, b);
	if (dt) {
		char ha[80], hb[80];
		int s = known_same(a, b)                     ? 1
			: memo_sha(a, ha) && memo_sha(b, hb) ? strcmp(ha, hb) == 0
							     : same_bytes(r, a, b);
		if (s < 0)
			return TFS_ERR_IO;
		if (s) {
			row(r, SAME_BYTES, a, b, NULL);
			return TFS_OK;
		}
	}
	if (!tfs_values_ok(a->t->dtype) || !tfs_values_ok(b->t->dtype)) {
		row(r, dt ? DIFFERS : DTYPE, a, b, NULL);
		return TFS_OK;
	}
	int ints = tfs_values_is_int(a->t->dtype) && tfs_values_is_int(b->t->dtype);
	tfs_err e = ints ? by_int(r, a, b, &f) : by_value(r, a, b, &f);
	if (e)
		return e;
	int equal = ints ? f.max_int == 0 : f.max_abs == 0 && !f.max_over && f.unmatched == 0;
	row(r, equal ? SAME_VALUES : dt ? DIFFERS : DTYPE, a, b, &f);
	return TFS_OK;
}

/* The last line (or the JSON's end) and the counts; diff(1)'s status. */
static int summary(const struct run *r, struct tfs_tool_result *res)
{
	FILE *out = r->out;
	uint64_t all = 0;
	for (int st = 0; st < NSTATUS; st++)
		all += r->count[st];
	*res = (struct tfs_tool_result){.tensors = all,
					.differ = r->count[DIFFERS] + r->count[SHAPE] + r->count[DTYPE],
					.missing = r->count[ONLY_A] + r->count[ONLY_B]};
	int rc = res->differ + res->missing ? 1 : 0;
	if (r->json) {
		fprintf(out, "%s], \"summary\": {", r->rows ? "\n" : "");
		for (int st = 0; st < NSTATUS; st++)
			fprintf(out, "%s\"%s\": %llu", st ? ", " : "", status_names[st],
				(unsigned long long)r->count[st]);
		fprintf(out, "}, \"bytes_read\": %llu, \"same\": %s}\n", (unsigned long long)r->bytes_read,
			rc ? "false" : "true");
	} else {
		fprintf(out,
			"%llu identical, %llu equal by value, %llu differ, %llu shape changed, %llu dtype changed, %llu only in A, %llu only in B\n",
			(unsigned long long)r->count[SAME_BYTES], (unsigned long long)r->count[SAME_VALUES],
			(unsigned long long)r->count[DIFFERS], (unsigned long long)r->count[SHAPE],
			(unsigned long long)r->count[DTYPE], (unsigned long long)r->count[ONLY_A],
			(unsigned long long)r->count[ONLY_B]);
	}
	return rc;
}

int tfs_diff(const struct tfs_model *a, const char *an, const struct tfs_model *b, const char *bn, int json,
	     FILE *out, struct tfs_tool_result *res)
{
	struct tfs_model_names *nm = NULL;
	struct run r = {.an = an, .bn = bn, .json = json, .out = out};
	r.ba = malloc(CHUNK);
	r.bb = malloc(CHUNK);
	/* B's tensors that a tensor of A matched */
	uint8_t *matched = calloc(b->ntensors ? b->ntensors : 1, 1);
	if (!r.ba || !r.bb || !matched || tfs_model_names_new(b, &nm)) {
		fprintf(stderr, "tensorfs: diff: out of memory\n");
		free(r.ba);
		free(r.bb);
		free(matched);
		return 2;
	}
	if (json) {
		fputs("{\"a\": ", out);
		tfs_json_fstr(out, an, strlen(an));
		fputs(", \"b\": ", out);
		tfs_json_fstr(out, bn, strlen(bn));
		fputs(", \"tensors\": [", out);
	}
	tfs_err e = TFS_OK;
	const char *bad = NULL;
	size_t badl = 0;
	for (uint32_t s = 0; !e && s < a->nshards; s++)
		for (uint32_t i = 0; !e && i < a->shards[s].h.n; i++) {
			struct ref ra = {&a->shards[s], &a->shards[s].h.t[i]};
			const char *name = tfs_tensor_name(&ra.sh->h, ra.t);
			struct tfs_model_pos at;
			if (!tfs_model_find(nm, name, ra.t->name_len, &at)) {
				row(&r, ONLY_A, &ra, NULL, NULL);
				continue;
			}
			matched[at.n] = 1;
			struct ref rb = {&b->shards[at.shard], &b->shards[at.shard].h.t[at.idx]};
			if ((e = compare(&r, &ra, &rb))) {
				bad = name;
				badl = ra.t->name_len;
			}
		}
	/* B's own tensors, in B's order. */
	uint64_t k = 0;
	for (uint32_t s = 0; !e && s < b->nshards; s++)
		for (uint32_t i = 0; i < b->shards[s].h.n; i++, k++)
			if (!matched[k]) {
				struct ref rb = {&b->shards[s], &b->shards[s].h.t[i]};
				row(&r, ONLY_B, NULL, &rb, NULL);
			}
	int rc = 0;
	if (e) {
		char q[400];
		tfs_quote(q, sizeof q, bad, badl);
		fprintf(stderr, "tensorfs: diff: tensor %s: %s\n", q,
			e == TFS_ERR_NOMEM ? "out of memory" : "its bytes cannot be read");
		rc = 2;
	} else {
		rc = summary(&r, res);
	}
	free(r.ba);
	free(r.bb);
	free(matched);
	tfs_model_names_free(nm);
	return rc;
}

static int run(const struct tfs_tool_args *a)
{
	struct tfs_tool_result res = {0};
	int rc = tfs_diff(&a->a->model, a->shown, &a->b->model, a->shown_b, a->json, a->out, &res);
	if (a->result)
		*a->result = res;
	return rc;
}

const struct tfs_tool tfs_tool_diff = {
	.rank = 4,
	.name = "diff",
	.usage = DIFF_USAGE,
	.sources = 2,
	.args_max = 2,
	.trouble = 2, /* diff(1): 2 is trouble */
	.run = run,
};
