/* tensorfs --stats (tools/stats.h). */
#include "tools/stats.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/json.h"
#include "core/utf8.h"
#include "compute/stats.h"

static void cell(FILE *f, double v, int have)
{
	if (have && isfinite(v))
		fprintf(f, "  %12.6g", v);
	else
		fprintf(f, "  %12s", "-");
}

/* The name column's width: the longest name as printed (quoted), as
 * --inspect pads its table, so long names keep the columns aligned. */
static size_t name_width(const struct tfs_model *m)
{
	size_t w = 4;
	char q[400];
	for (uint32_t s = 0; s < m->nshards; s++)
		for (uint32_t i = 0; i < m->shards[s].h.n; i++) {
			const struct tfs_table *h = &m->shards[s].h;
			tfs_quote(q, sizeof q, tfs_tensor_name(h, &h->t[i]), h->t[i].name_len);
			size_t dw = tfs_utf8_width(q);
			if (dw > w)
				w = dw;
		}
	return w;
}

static void put_padded(FILE *f, const char *s, size_t width)
{
	fputs(s, f);
	for (size_t w = tfs_utf8_width(s); w < width; w++)
		fputc(' ', f);
}

int tfs_stats_print(const struct tfs_model *m, const char *source, int json, FILE *out, uint64_t *measured)
{
	size_t rows = 0, nw = json ? 0 : name_width(m);
	uint64_t count = 0;
	if (json) {
		fputs("{\"source\": ", out);
		tfs_json_fstr(out, source, strlen(source));
		fputs(", \"tensors\": [", out);
	} else {
		put_padded(out, "name", nw);
		fprintf(out, "  %-7s  %10s  %12s  %12s  %12s  %12s  %12s  %8s  %6s  %6s\n", "dtype", "count",
			"min", "max", "mean", "std", "absmax", "zeros", "nan", "inf");
	}
	for (uint32_t s = 0; s < m->nshards; s++)
		for (uint32_t i = 0; i < m->shards[s].h.n; i++) {
			const struct tfs_shard *sh = &m->shards[s];
			const struct tfs_tensor *t = &sh->h.t[i];
			const char *name = tfs_tensor_name(&sh->h, t);
			size_t dl;
			const char *dt = tfs_tensor_dtype(&sh->h, t, &dl);
			struct tfs_stats st;
			tfs_err e = tfs_stats_tensor(sh, t, &st);
			count++;
			char q[400];
			tfs_quote(q, sizeof q, name, t->name_len);
			if (e && e != TFS_ERR_UNHANDLED) {
				char qs[TFS_QPATH_MAX];
				fprintf(stderr, "tensorfs: %s: tensor %s: %s\n",
					tfs_quote_path(qs, sizeof qs, source), q,
					e == TFS_ERR_NOMEM ? "out of memory" : "its bytes cannot be read");
				return -1;
			}
			if (json) {
				fputs(rows++ ? ",\n  {\"name\": " : "\n  {\"name\": ", out);
				tfs_json_fstr(out, name, t->name_len);
				fputs(", \"dtype\": ", out);
				tfs_json_fstr(out, dt, dl);
				if (e) {
					fputs(", \"stats\": null}", out); /* not numbers (complex) */
				} else {
					fputs(", \"stats\": ", out);
					tfs_stats_json(out, &st);
					fputc('}', out);
				}
				continue;
			}
			put_padded(out, q, nw);
			fprintf(out, "  %-7.*s", (int)dl, dt);
			if (e) {
				fputs("  (not plain numbers)\n", out);
				continue;
			}
			int h = st.finite > 0;
			fprintf(out, "  %10llu", (unsigned long long)st.count);
			cell(out, st.min, h);
			cell(out, st.max, h);
			cell(out, st.mean, h);
			cell(out, st.std, h);
			cell(out, st.absmax, h);
			fprintf(out, "  %8llu  %6llu  %6llu\n", (unsigned long long)st.zeros,
				(unsigned long long)st.nan, (unsigned long long)st.inf);
		}
	if (json)
		fprintf(out, "%s]}\n", rows ? "\n" : "");
	*measured = count;
	return 0;
}

static int run(const struct tfs_tool_args *a)
{
	struct tfs_tool_result res = {0};
	int rc = tfs_stats_print(&a->a->model, a->shown, a->json, a->out, &res.tensors) ? TFS_EXIT_SOURCE
											: TFS_EXIT_OK;
	if (a->result)
		*a->result = res;
	return rc;
}

const struct tfs_tool tfs_tool_stats = {
	.rank = 2,
	.name = "--stats",
	.usage = STATS_USAGE,
	.sources = 1,
	.args_max = 1,
	.run = run,
};
