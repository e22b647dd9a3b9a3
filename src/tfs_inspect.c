/* tensorfs --inspect: what a checkpoint holds, without mounting. It prints
 * while it walks the tensors (no document is built), so a 500,000-tensor
 * checkpoint starts printing at once. */
#include "tfs_inspect.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tfs_convert.h"
#include "tfs_json.h"
#include "tfs_model.h"

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

static int dt_cmp(const void *a, const void *b)
{
	return strcmp(((const struct per_dtype *)a)->name, ((const struct per_dtype *)b)->name);
}

/* JSON string to a FILE, escaped as tfs_json_str does. */
static void jstr(FILE *f, const char *s, size_t n)
{
	char *b = NULL;
	size_t len = 0, cap = 0;
	if (tfs_json_str(&b, &len, &cap, s, n) == TFS_OK)
		fwrite(b, 1, len, f);
	free(b);
}

static void shape_str(FILE *f, const struct tfs_header *h, const struct tfs_tensor *t, int json)
{
	fputc('[', f);
	for (uint32_t i = 0; i < t->ndim; i++)
		fprintf(f, "%s%llu", i ? (json ? "," : ", ") : "",
			(unsigned long long)h->dims[t->dims_off + i]);
	fputc(']', f);
}

int tfs_inspect(const struct tfs_model *m, const char *source, int json, FILE *f)
{
	struct stats st = {0};
	int multi = m->nshards > 1 || m->kind != TFS_MODEL_FILE;
	size_t w = 4;

	if (json) {
		fputs("{\"source\": ", f);
		jstr(f, source, strlen(source));
		fputs(", \"tensors\": [", f);
	} else {
		/* Column width from the names (capped): one cheap pass. */
		for (uint32_t s = 0; s < m->nshards; s++)
			for (uint32_t i = 0; i < m->shards[s].h.n; i++)
				if (m->shards[s].h.t[i].name_len > w)
					w = m->shards[s].h.t[i].name_len;
		if (w > 60)
			w = 60;
		fprintf(f, "%-*s  %-11s  %-20s  %14s%s\n", (int)w, "name", "dtype", "shape", "bytes",
			multi ? "  shard" : "");
	}
	for (uint32_t s = 0; s < m->nshards; s++) {
		const struct tfs_shard *sh = &m->shards[s];
		const struct tfs_header *h = &sh->h;
		for (uint32_t i = 0; i < h->n; i++) {
			const struct tfs_tensor *t = &h->t[i];
			size_t dl;
			const char *dt = tfs_tensor_dtype(h, t, &dl);
			uint64_t params = tfs_tensor_elements(h, t), bytes = tfs_tensor_size(t);
			if (count(&st, dt, dl, params, bytes))
				return -1;
			if (json) {
				fputs(st.tensors > 1 ? ",\n  {\"name\": " : "\n  {\"name\": ", f);
				jstr(f, tfs_tensor_name(h, t), t->name_len);
				fputs(", \"dtype\": ", f);
				jstr(f, dt, dl);
				fputs(", \"shape\": ", f);
				shape_str(f, h, t, 1);
				fprintf(f, ", \"bytes\": %llu, \"offsets\": [%llu,%llu], \"shard\": ",
					(unsigned long long)bytes, (unsigned long long)(h->data_start + t->begin),
					(unsigned long long)(h->data_start + t->end));
				jstr(f, sh->name, strlen(sh->name));
				fputc('}', f);
			} else {
				char q[512], dq[80];
				/* Printable, one line, whatever the name holds. */
				tfs_quote(q, sizeof q, tfs_tensor_name(h, t), t->name_len);
				tfs_quote(dq, sizeof dq, dt, dl);
				q[strlen(q) - 1] = 0;
				dq[strlen(dq) - 1] = 0;
				fprintf(f, "%-*s  %-11s  ", (int)w, q + 1, dq + 1);
				char shp[64];
				FILE *sf = fmemopen(shp, sizeof shp, "w");
				if (sf) {
					shape_str(sf, h, t, 0);
					fclose(sf);
				}
				shp[sizeof shp - 1] = 0;
				fprintf(f, "%-20s  %14llu", shp, (unsigned long long)bytes);
				if (multi)
					fprintf(f, "  %s", sh->name);
				fputc('\n', f);
			}
		}
	}
	qsort(st.d, st.n, sizeof *st.d, dt_cmp);
	char *meta = NULL;
	size_t ml = 0;
	if (tfs_model_meta_json(m, &meta, &ml))
		return -1;
	while (ml && meta[ml - 1] == '\n')
		meta[--ml] = 0;
	if (json) {
		fprintf(f, "%s], \"tensor_count\": %llu, \"parameters_per_dtype\": {",
			st.tensors ? "\n" : "", (unsigned long long)st.tensors);
		for (size_t i = 0; i < st.n; i++) {
			fputs(i ? ", " : "", f);
			jstr(f, st.d[i].name, strlen(st.d[i].name));
			fprintf(f, ": %llu", (unsigned long long)st.d[i].params);
		}
		fputs("}, \"bytes_per_dtype\": {", f);
		for (size_t i = 0; i < st.n; i++) {
			fputs(i ? ", " : "", f);
			jstr(f, st.d[i].name, strlen(st.d[i].name));
			fprintf(f, ": %llu", (unsigned long long)st.d[i].bytes);
		}
		fprintf(f, "}, \"total_parameters\": %llu, \"total_bytes\": %llu, \"shards\": [",
			(unsigned long long)st.params, (unsigned long long)st.bytes);
		for (uint32_t s = 0; s < m->nshards; s++) {
			fputs(s ? ", " : "", f);
			jstr(f, m->shards[s].name, strlen(m->shards[s].name));
		}
		fprintf(f, "], \"metadata\": %s}\n", meta);
	} else {
		fprintf(f, "\n%llu tensors", (unsigned long long)st.tensors);
		if (multi)
			fprintf(f, " in %u shards", m->nshards);
		fprintf(f, ", %llu parameters, %llu bytes\n", (unsigned long long)st.params,
			(unsigned long long)st.bytes);
		fprintf(f, "%-11s  %9s  %16s  %16s\n", "dtype", "tensors", "parameters", "bytes");
		for (size_t i = 0; i < st.n; i++)
			fprintf(f, "%-11s  %9llu  %16llu  %16llu\n", st.d[i].name,
				(unsigned long long)st.d[i].tensors, (unsigned long long)st.d[i].params,
				(unsigned long long)st.d[i].bytes);
		fprintf(f, "__metadata__: %s\n", meta);
	}
	free(meta);
	free(st.d);
	return ferror(f) ? -1 : 0;
}
