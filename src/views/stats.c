/* Statistics of a tensor's values (views/stats.h). */
#include "views/stats.h"

#include <math.h>
#include <string.h>

#include "views/values.h"

/* Pass 1: counts, range and the sum; pass 2: the squared deviations from
 * the mean (exact where a one-pass formula cancels) and the histogram,
 * binned as numpy 1.24's np.histogram bins float64 values. */
static void pass1(struct tfs_stats *s, const double *v, size_t n, double *sum)
{
	for (size_t i = 0; i < n; i++) {
		double x = v[i];
		if (isnan(x)) {
			s->nan++;
			continue;
		}
		if (isinf(x)) {
			s->inf++;
			continue;
		}
		s->zeros += x == 0;
		if (!s->finite || x < s->min)
			s->min = x;
		if (!s->finite || x > s->max)
			s->max = x;
		s->finite++;
		*sum += x;
	}
}

struct bins {
	double lo, hi, norm, edge[TFS_STATS_BINS + 1];
};

static void bins_init(struct bins *b, double lo, double hi)
{
	if (lo == hi) {
		lo -= 0.5;
		hi += 0.5;
	}
	b->lo = lo;
	b->hi = hi;
	b->norm = TFS_STATS_BINS / (hi - lo);
	double delta = hi - lo, step = delta / TFS_STATS_BINS;
	for (int i = 0; i <= TFS_STATS_BINS; i++)
		b->edge[i] = step != 0 ? (double)i * step + lo : (double)i / TFS_STATS_BINS * delta + lo;
	b->edge[TFS_STATS_BINS] = hi;
}

static int bin_of(const struct bins *b, double x)
{
	long k = (long)((x - b->lo) * b->norm);
	if (k >= TFS_STATS_BINS)
		k = TFS_STATS_BINS - 1;
	if (k < 0)
		k = 0;
	if (x < b->edge[k] && k > 0)
		k--;
	if (k != TFS_STATS_BINS - 1 && x >= b->edge[k + 1])
		k++;
	return (int)k;
}

static void pass2(struct tfs_stats *s, const struct bins *b, const double *v, size_t n, double *ss)
{
	for (size_t i = 0; i < n; i++) {
		double x = v[i];
		if (!isfinite(x))
			continue;
		double dx = x - s->mean;
		*ss += dx * dx;
		s->hist[bin_of(b, x)]++;
	}
}

tfs_err tfs_stats_tensor(const struct tfs_shard *sh, const struct tfs_tensor *t, struct tfs_stats *out)
{
	struct tfs_values r;
	memset(out, 0, sizeof *out);
	tfs_err e = tfs_values_open(&r, sh, t);
	if (e)
		return e;
	out->count = r.count;
	double sum = 0, ss = 0;
	const double *v;
	size_t n;
	while (!(e = tfs_values_next(&r, &v, &n)) && n)
		pass1(out, v, n, &sum);
	if (!e && out->finite) {
		out->mean = sum / (double)out->finite;
		out->absmax = fabs(out->min) > fabs(out->max) ? fabs(out->min) : fabs(out->max);
		struct bins b;
		bins_init(&b, out->min, out->max);
		out->lo = b.lo;
		out->hi = b.hi;
		tfs_values_rewind(&r);
		while (!(e = tfs_values_next(&r, &v, &n)) && n)
			pass2(out, &b, v, n, &ss);
		out->std = sqrt(ss / (double)out->finite);
	}
	tfs_values_close(&r);
	return e;
}

static void num(FILE *f, const char *key, double x, int have)
{
	if (have && isfinite(x))
		fprintf(f, ", \"%s\": %.17g", key, x);
	else
		fprintf(f, ", \"%s\": null", key);
}

void tfs_stats_json(FILE *f, const struct tfs_stats *s)
{
	int h = s->finite > 0;
	fprintf(f, "{\"count\": %llu, \"finite\": %llu, \"nan\": %llu, \"inf\": %llu, \"zeros\": %llu",
		(unsigned long long)s->count, (unsigned long long)s->finite, (unsigned long long)s->nan,
		(unsigned long long)s->inf, (unsigned long long)s->zeros);
	num(f, "min", s->min, h);
	num(f, "max", s->max, h);
	num(f, "mean", s->mean, h);
	num(f, "std", s->std, h);
	num(f, "absmax", s->absmax, h);
	fprintf(f, ", \"histogram\": {\"bins\": %d", TFS_STATS_BINS);
	num(f, "lo", s->lo, h);
	num(f, "hi", s->hi, h);
	fputs(", \"counts\": [", f);
	for (int i = 0; h && i < TFS_STATS_BINS; i++)
		fprintf(f, "%s%llu", i ? ", " : "", (unsigned long long)s->hist[i]);
	fputs("]}}", f);
}
