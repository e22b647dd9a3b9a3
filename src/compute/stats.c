/* Statistics of a tensor's values (compute/stats.h). */
#include "compute/stats.h"

#include <math.h>
#include <string.h>

#include "compute/values.h"

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
	int half; /* hi - lo passes DBL_MAX (F64 near +-1e308): worked out halved */
};

static void bins_init(struct bins *b, double lo, double hi)
{
	if (lo == hi) {
		lo -= 0.5;
		hi += 0.5;
	}
	b->lo = lo;
	b->hi = hi;
	b->half = !isfinite(hi - lo);
	if (b->half) {
		double delta = hi * 0.5 - lo * 0.5, step = delta / TFS_STATS_BINS;
		b->norm = TFS_STATS_BINS / delta;
		for (int i = 0; i <= TFS_STATS_BINS; i++)
			b->edge[i] = ((double)i * step + lo * 0.5) * 2;
		b->edge[TFS_STATS_BINS] = hi;
		return;
	}
	b->norm = TFS_STATS_BINS / (hi - lo);
	double delta = hi - lo, step = delta / TFS_STATS_BINS;
	for (int i = 0; i <= TFS_STATS_BINS; i++)
		b->edge[i] = step != 0 ? (double)i * step + lo : (double)i / TFS_STATS_BINS * delta + lo;
	b->edge[TFS_STATS_BINS] = hi;
}

static int bin_of(const struct bins *b, double x)
{
	long k = (long)(b->half ? (x * 0.5 - b->lo * 0.5) * b->norm : (x - b->lo) * b->norm);
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

/* The squared deviations are of the values times 2^-scale, scale from
 * the largest magnitude: exact (a power of two), and no square of F64
 * values near 1e308 overflows. For every other tensor scale is 0. */
static void pass2(struct tfs_stats *s, const struct bins *b, const double *v, size_t n, double unscale,
		  double *ss)
{
	double mean = s->mean * unscale;
	for (size_t i = 0; i < n; i++) {
		double x = v[i];
		if (!isfinite(x))
			continue;
		double dx = x * unscale - mean;
		*ss += dx * dx;
		s->hist[bin_of(b, x)]++;
	}
}

/* The sum of the finite values times 2^-scale, for a sum that passed
 * DBL_MAX (a third pass, for such tensors only). */
static tfs_err scaled_sum(struct tfs_values *r, double unscale, double *sum)
{
	const double *v;
	size_t n;
	tfs_err e;
	*sum = 0;
	tfs_values_rewind(r);
	while (!(e = tfs_values_next(r, &v, &n)) && n)
		for (size_t i = 0; i < n; i++)
			if (isfinite(v[i]))
				*sum += v[i] * unscale;
	return e;
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
		out->absmax = fabs(out->min) > fabs(out->max) ? fabs(out->min) : fabs(out->max);
		/* 0 unless a value passes 2^480: then the values are taken
		 * times 2^-scale, so that no sum or square overflows. */
		int scale = 0;
		if (out->absmax > 0x1p480)
			frexp(out->absmax, &scale);
		double unscale = ldexp(1, -scale);
		if (!isfinite(sum)) {
			e = scaled_sum(&r, unscale, &sum);
			out->mean = sum / (double)out->finite / unscale;
		} else {
			out->mean = sum / (double)out->finite;
		}
		struct bins b;
		bins_init(&b, out->min, out->max);
		out->lo = b.lo;
		out->hi = b.hi;
		tfs_values_rewind(&r);
		while (!e && !(e = tfs_values_next(&r, &v, &n)) && n)
			pass2(out, &b, v, n, unscale, &ss);
		out->std = sqrt(ss / (double)out->finite) / unscale;
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
