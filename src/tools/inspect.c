/* tensorfs --inspect: what a checkpoint holds, without mounting. It prints
 * while it walks the tensors (no document is built), so a 500,000-tensor
 * checkpoint starts printing at once. */
#include "tools/inspect.h"

#include <json.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "compute/convert.h"
#include "core/json.h"
#include "core/utf8.h"
#include "model/model.h"

struct per_dtype {
	char name[64];
	uint64_t tensors, params, bytes;
};

struct stats {
	struct per_dtype *d;
	size_t n, cap;
	uint64_t params, bytes, tensors;
};

static uint64_t sat_add(uint64_t a, uint64_t b)
{
	return a > UINT64_MAX - b ? UINT64_MAX : a + b;
}

static int count(struct stats *st, const char *dt, size_t dl, uint64_t params, uint64_t bytes)
{
	size_t i;
	if (dl >= sizeof st->d[0].name)
		dl = sizeof st->d[0].name - 1;
	for (i = 0; i < st->n; i++)
		if (strlen(st->d[i].name) == dl && memcmp(st->d[i].name, dt, dl) == 0)
			break;
	if (i == st->n) {
		if (st->n == st->cap) {
			st->cap = st->cap ? st->cap * 2 : 32;
			struct per_dtype *q = realloc(st->d, st->cap * sizeof *q);
			if (!q)
				return -1;
			st->d = q;
		}
		memset(&st->d[i], 0, sizeof st->d[i]);
		memcpy(st->d[i].name, dt, dl);
		st->n++;
	}
	st->d[i].tensors++;
	st->d[i].params = sat_add(st->d[i].params, params);
	st->d[i].bytes = sat_add(st->d[i].bytes, bytes);
	st->params = sat_add(st->params, params);
	st->bytes = sat_add(st->bytes, bytes);
	st->tensors++;
	return 0;
}

#define INSPECT_META_MAX (64u << 10)

/* The format's facts ("general.architecture: llama"). */
static void put_facts(FILE *f, const struct tfs_table *h, int json)
{
	int first = 1;
	for (size_t k = 0; k < h->facts_len;) {
		const char *key = h->facts + k, *val = key + strlen(key) + 1;
		if (json) {
			fputs(first ? "" : ", ", f);
			tfs_json_fstr(f, key, strlen(key));
			fputs(": ", f);
			tfs_json_fstr(f, val, strlen(val));
		} else {
			fprintf(f, "%s: %s\n", key, val);
		}
		first = 0;
		k = (size_t)(val - h->facts) + strlen(val) + 1;
	}
}

static int dt_cmp(const void *a, const void *b)
{
	return strcmp(((const struct per_dtype *)a)->name, ((const struct per_dtype *)b)->name);
}

/* A name as the table shows it: printable and on one line (tfs_quote's
 * escapes), without the quotes, except the empty name, which shows as ''
 * (a name that is really '' shows its quotes escaped). */
static void table_name(char *out, size_t sz, const char *name, size_t len)
{
	tfs_quote(out, sz, name, len);
	if (len == 0)
		return;
	size_t n = strlen(out);
	memmove(out, out + 1, n - 2);
	out[n - 2] = 0;
}

static void put_padded(FILE *f, const char *s, size_t width)
{
	size_t w = tfs_utf8_width(s);
	fputs(s, f);
	for (; w < width; w++)
		fputc(' ', f);
}

static void shape_str(FILE *f, const struct tfs_table *h, const struct tfs_tensor *t, int json)
{
	fputc('[', f);
	for (uint32_t i = 0; i < t->ndim; i++)
		fprintf(f, "%s%llu", i ? (json ? "," : ", ") : "",
			(unsigned long long)h->dims[t->dims_off + i]);
	fputc(']', f);
}

/* metadata.total_size of the index, when it is a whole number. */
static int total_size(const char *meta, unsigned long long *v)
{
	json_object *o = meta ? json_tokener_parse(meta) : NULL, *ts;
	int ok = o && json_object_is_type(o, json_type_object) &&
		 json_object_object_get_ex(o, "total_size", &ts) && json_object_is_type(ts, json_type_int) &&
		 json_object_get_int64(ts) >= 0;
	if (ok)
		*v = (unsigned long long)json_object_get_uint64(ts);
	json_object_put(o);
	return ok;
}

/* The index's metadata on one line (it was checked as JSON when read). */
static void put_compact(FILE *f, const char *text)
{
	json_object *o = text ? json_tokener_parse(text) : NULL;
	char *b = NULL;
	size_t len = 0, cap = 0;
	if (o && tfs_json_value(&b, &len, &cap, o, JSON_C_TO_STRING_SPACED) == TFS_OK)
		fwrite(b, 1, len, f);
	else
		fputs("null", f);
	free(b);
	json_object_put(o);
}

/* Shards are missing: what the index alone tells. */
static int inspect_index_only(const struct tfs_model *m, const char *source, int json, FILE *f)
{
	unsigned long long ts = 0;
	int has_ts = total_size(m->index_meta, &ts);
	uint32_t missing = 0, pointers = 0;
	for (uint32_t s = 0; s < m->nshards; s++) {
		missing += (uint32_t)m->shards[s].missing;
		pointers += (uint32_t)m->shards[s].lfs_pointer;
	}
	if (json) {
		fputs("{\"source\": ", f);
		tfs_json_fstr(f, source, strlen(source));
		fputs(", \"index_only\": true, \"shards\": [", f);
		for (uint32_t s = 0; s < m->nshards; s++) {
			fputs(s ? ",\n  {\"name\": " : "\n  {\"name\": ", f);
			tfs_json_fstr(f, m->shards[s].name, strlen(m->shards[s].name));
			fprintf(f, ", \"tensors\": %llu, \"present\": %s, \"lfs_pointer\": %s}",
				(unsigned long long)m->shards[s].index_tensors,
				m->shards[s].missing || m->shards[s].lfs_pointer ? "false" : "true",
				m->shards[s].lfs_pointer ? "true" : "false");
		}
		fputs(m->nshards ? "\n], \"missing_shards\": [" : "], \"missing_shards\": [", f);
		for (uint32_t s = 0, k = 0; s < m->nshards; s++) {
			if (!m->shards[s].missing)
				continue;
			fputs(k++ ? ", " : "", f);
			tfs_json_fstr(f, m->shards[s].name, strlen(m->shards[s].name));
		}
		fprintf(f, "], \"tensor_count\": %llu, \"total_size\": ", (unsigned long long)m->ntensors);
		if (has_ts)
			fprintf(f, "%llu", ts);
		else
			fputs("null", f);
		fputs(", \"index_metadata\": ", f);
		put_compact(f, m->index_meta);
		fputs("}\n", f);
		return ferror(f) ? -1 : 0;
	}
	if (pointers)
		fprintf(f,
			"%s: %u of %u shards missing and %u Git LFS pointers (git lfs pull fetches them); what the index alone tells:\n",
			source, missing, m->nshards, pointers);
	else
		fprintf(f, "%s: %u of %u shards missing; what the index alone tells:\n", source, missing,
			m->nshards);
	size_t w = 5;
	for (uint32_t s = 0; s < m->nshards; s++)
		if (tfs_utf8_width(m->shards[s].name) > w)
			w = tfs_utf8_width(m->shards[s].name);
	put_padded(f, "shard", w);
	fprintf(f, "  %9s  %s\n", "tensors", "file");
	for (uint32_t s = 0; s < m->nshards; s++) {
		put_padded(f, m->shards[s].name, w);
		fprintf(f, "  %9llu  %s\n", (unsigned long long)m->shards[s].index_tensors,
			m->shards[s].missing       ? "missing"
			: m->shards[s].lfs_pointer ? "LFS pointer"
						   : "present");
	}
	fprintf(f, "\n%llu tensors in %u shards", (unsigned long long)m->ntensors, m->nshards);
	if (has_ts)
		fprintf(f, ", metadata.total_size %llu bytes", ts);
	fputs("\nindex metadata: ", f);
	put_compact(f, m->index_meta);
	fputc('\n', f);
	return ferror(f) ? -1 : 0;
}

/* Column width for the names as shown (capped at 60). */
static size_t name_width(const struct tfs_model *m)
{
	size_t w = 4;
	char q[512];
	for (uint32_t s = 0; s < m->nshards; s++) {
		const struct tfs_table *h = &m->shards[s].h;
		for (uint32_t i = 0; i < h->n && w < 60; i++) {
			table_name(q, sizeof q, tfs_tensor_name(h, &h->t[i]), h->t[i].name_len);
			size_t dw = tfs_utf8_width(q);
			if (dw > w)
				w = dw;
		}
	}
	return w > 60 ? 60 : w;
}

static void tensor_json(FILE *f, const struct tfs_shard *sh, const struct tfs_tensor *t, int first)
{
	const struct tfs_table *h = &sh->h;
	size_t dl;
	const char *dt = tfs_tensor_dtype(h, t, &dl);
	fputs(first ? "\n  {\"name\": " : ",\n  {\"name\": ", f);
	tfs_json_fstr(f, tfs_tensor_name(h, t), t->name_len);
	fputs(", \"dtype\": ", f);
	tfs_json_fstr(f, dt, dl);
	fputs(", \"shape\": ", f);
	shape_str(f, h, t, 1);
	fprintf(f, ", \"bytes\": %llu, \"offsets\": [%llu,%llu], \"shard\": ",
		(unsigned long long)tfs_tensor_size(t), (unsigned long long)t->begin,
		(unsigned long long)t->end);
	tfs_json_fstr(f, sh->name, strlen(sh->name));
	fputc('}', f);
}

/* One row: printable, one line, whatever the name holds. */
static void tensor_row(FILE *f, const struct tfs_shard *sh, const struct tfs_tensor *t, size_t w, int multi)
{
	const struct tfs_table *h = &sh->h;
	size_t dl;
	const char *dt = tfs_tensor_dtype(h, t, &dl);
	char q[512], dq[80], shp[64];
	table_name(q, sizeof q, tfs_tensor_name(h, t), t->name_len);
	table_name(dq, sizeof dq, dt, dl);
	put_padded(f, q, w);
	fputs("  ", f);
	put_padded(f, dq, 11);
	fputs("  ", f);
	FILE *sf = fmemopen(shp, sizeof shp, "w");
	if (sf) {
		shape_str(sf, h, t, 0);
		fclose(sf);
	}
	shp[sizeof shp - 1] = 0;
	fprintf(f, "%-20s  %14llu", shp, (unsigned long long)tfs_tensor_size(t));
	if (multi) {
		char sq[300];
		table_name(sq, sizeof sq, sh->name, strlen(sh->name));
		fprintf(f, "  %s", sq);
	}
	fputc('\n', f);
}

static void totals_json(FILE *f, const struct tfs_model *m, const struct stats *st, const char *meta)
{
	fprintf(f, "%s], \"tensor_count\": %llu, \"parameters_per_dtype\": {", st->tensors ? "\n" : "",
		(unsigned long long)st->tensors);
	for (size_t i = 0; i < st->n; i++) {
		fputs(i ? ", " : "", f);
		tfs_json_fstr(f, st->d[i].name, strlen(st->d[i].name));
		fprintf(f, ": %llu", (unsigned long long)st->d[i].params);
	}
	fputs("}, \"bytes_per_dtype\": {", f);
	for (size_t i = 0; i < st->n; i++) {
		fputs(i ? ", " : "", f);
		tfs_json_fstr(f, st->d[i].name, strlen(st->d[i].name));
		fprintf(f, ": %llu", (unsigned long long)st->d[i].bytes);
	}
	fprintf(f, "}, \"total_parameters\": %llu, \"total_bytes\": %llu, \"shards\": [",
		(unsigned long long)st->params, (unsigned long long)st->bytes);
	for (uint32_t s = 0; s < m->nshards; s++) {
		fputs(s ? ", " : "", f);
		tfs_json_fstr(f, m->shards[s].name, strlen(m->shards[s].name));
	}
	fputs("], \"format\": ", f);
	tfs_json_fstr(f, m->shards[0].h.format, strlen(m->shards[0].h.format));
	fputs(", \"facts\": {", f);
	put_facts(f, &m->shards[0].h, 1);
	fprintf(f, "}, \"metadata\": %s}\n", meta);
}

static void totals_text(FILE *f, const struct tfs_model *m, const struct stats *st, const char *meta,
			size_t ml, int multi)
{
	fprintf(f, "\n%llu tensors", (unsigned long long)st->tensors);
	if (multi)
		fprintf(f, " in %u shards", m->nshards);
	fprintf(f, ", %llu parameters, %llu bytes\n", (unsigned long long)st->params,
		(unsigned long long)st->bytes);
	fprintf(f, "%-11s  %9s  %16s  %16s\n", "dtype", "tensors", "parameters", "bytes");
	for (size_t i = 0; i < st->n; i++)
		fprintf(f, "%-11s  %9llu  %16llu  %16llu\n", st->d[i].name,
			(unsigned long long)st->d[i].tensors, (unsigned long long)st->d[i].params,
			(unsigned long long)st->d[i].bytes);
	fprintf(f, "format: %s\n", m->shards[0].h.format);
	put_facts(f, &m->shards[0].h, 0);
	/* A tokenizer's vocabulary is no reading for a terminal. */
	if (ml > INSPECT_META_MAX)
		fprintf(f, "__metadata__: %zu bytes of JSON (in __metadata__.json of a mount, or --json)\n",
			ml + 1);
	else
		fprintf(f, "__metadata__: %s\n", meta);
}

int tfs_inspect(const struct tfs_model *m, const char *source, int json, FILE *f)
{
	struct stats st = {0};
	if (m->index_only)
		return inspect_index_only(m, source, json, f);
	int multi = m->nshards > 1 || m->kind != TFS_MODEL_FILE;
	size_t w = 4;

	if (json) {
		fputs("{\"source\": ", f);
		tfs_json_fstr(f, source, strlen(source));
		fputs(", \"tensors\": [", f);
	} else {
		w = name_width(m);
		put_padded(f, "name", w);
		fprintf(f, "  %-11s  %-20s  %14s%s\n", "dtype", "shape", "bytes", multi ? "  shard" : "");
	}
	for (uint32_t s = 0; s < m->nshards; s++) {
		const struct tfs_shard *sh = &m->shards[s];
		const struct tfs_table *h = &sh->h;
		for (uint32_t i = 0; i < h->n; i++) {
			const struct tfs_tensor *t = &h->t[i];
			size_t dl;
			const char *dt = tfs_tensor_dtype(h, t, &dl);
			if (count(&st, dt, dl, tfs_tensor_elements(h, t), tfs_tensor_size(t))) {
				free(st.d);
				return -1;
			}
			if (json)
				tensor_json(f, sh, t, st.tensors == 1);
			else
				tensor_row(f, sh, t, w, multi);
		}
	}
	if (st.n)
		qsort(st.d, st.n, sizeof *st.d, dt_cmp);
	char *meta = NULL;
	size_t ml = 0;
	if (tfs_model_meta_json(m, &meta, &ml)) {
		free(st.d);
		return -1;
	}
	while (ml && meta[ml - 1] == '\n')
		meta[--ml] = 0;
	if (json)
		totals_json(f, m, &st, meta);
	else
		totals_text(f, m, &st, meta, ml, multi);
	free(meta);
	free(st.d);
	return ferror(f) ? -1 : 0;
}

/* An index whose shards are missing (or Git LFS pointers): said once. */
static void say_index_only(const struct tfs_model *model)
{
	char list[512] = "";
	size_t o = 0;
	uint32_t k = 0, ptrs = 0;
	for (uint32_t s = 0; s < model->nshards; s++) {
		ptrs += (uint32_t)model->shards[s].lfs_pointer;
		if (!model->shards[s].missing && !model->shards[s].lfs_pointer)
			continue;
		char q[TFS_QPATH_MAX];
		tfs_quote_path(q, sizeof q, model->shards[s].name);
		if (k++ < 4 && o < sizeof list)
			o += (size_t)snprintf(list + o, sizeof list - o, "%s%s", k > 1 ? ", " : "", q);
	}
	char qp[TFS_QPATH_MAX];
	fprintf(stderr,
		"tensorfs: %s: warning: %u of %u shards missing%s (%s%s): showing what the index alone tells\n",
		tfs_quote_path(qp, sizeof qp, model->index_path), k, model->nshards,
		ptrs ? " or Git LFS pointers" : "", list, k > 4 ? ", ..." : "");
}

static int run(const struct tfs_tool_args *a)
{
	const struct tfs_model *model = &a->a->model;
	if (model->index_only)
		say_index_only(model);
	int r = tfs_inspect(model, a->shown, a->json, a->out);
	if (a->result)
		*a->result = (struct tfs_tool_result){.tensors = model->ntensors};
	if (fflush(a->out) != 0)
		r = -1;
	if (r) {
		char q[TFS_QPATH_MAX];
		fprintf(stderr, "tensorfs: %s: cannot write the listing\n",
			tfs_quote_path(q, sizeof q, a->shown));
		return TFS_EXIT_INTERNAL;
	}
	return TFS_EXIT_OK;
}

const struct tfs_tool tfs_tool_inspect = {
	.rank = 1,
	.name = "--inspect",
	.usage = INSPECT_USAGE,
	.sources = 1,
	.args_max = 1,
	.index_only_ok = 1,
	.run = run,
};
