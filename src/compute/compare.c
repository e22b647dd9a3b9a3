/* Two tensors compared by value (compute/compare.h). */
#include "compute/compare.h"

#include <math.h>
#include <string.h>

struct ref {
	const struct tfs_shard *sh;
	const struct tfs_tensor *t;
};

#define LIMIT 0x1p480 /* squares up to 2^960: 2^63 of them stay finite */

void tfs_compare_init(struct tfs_compare *f)
{
	memset(f, 0, sizeof *f);
	f->unscale = 1;
	f->limit = LIMIT;
}

/* A larger scale for a value of magnitude m; the sums scaled down to it. */
static void rescale(struct tfs_compare *f, double m)
{
	int e;
	frexp(m, &e);
	int scale = e - 480 + 1;
	if (scale <= f->scale)
		return; /* (a value past 2^1022, whose scale is the largest) */
	double k = ldexp(1, -2 * (scale - f->scale));
	f->d2 *= k;
	f->a2 *= k;
	f->b2 *= k;
	f->ab *= k;
	f->scale = scale;
	f->unscale = ldexp(1, -scale);
	/* At most 2^1022, so that x - y of two values under it is finite. */
	f->limit = scale < 1022 - 480 ? ldexp(LIMIT, scale) : 0x1p1022;
}

static void add_pair(struct tfs_compare *f, double x, double y)
{
	int fx = isfinite(x), fy = isfinite(y);
	f->nan_a += isnan(x);
	f->nan_b += isnan(y);
	f->inf_a += isinf(x) != 0;
	f->inf_b += isinf(y) != 0;
	if (!fx || !fy) {
		/* NaN meets NaN, or the same infinity: equal; else not. */
		if (!((isnan(x) && isnan(y)) || (isinf(x) && x == y)))
			f->unmatched++;
		return;
	}
	double d = fabs(x - y);
	if (isinf(d)) { /* past DBL_MAX: kept halved */
		double h = fabs(x * 0.5 - y * 0.5);
		if (!f->max_over || h > f->max_abs)
			f->max_abs = h;
		f->max_over = 1;
	} else if (!f->max_over && d > f->max_abs) {
		f->max_abs = d;
	}
	if (fabs(x) > f->limit || fabs(y) > f->limit)
		rescale(f, fabs(x) > fabs(y) ? fabs(x) : fabs(y));
	double xs = x * f->unscale, ys = y * f->unscale, ds = xs - ys;
	f->d2 += ds * ds;
	f->a2 += xs * xs;
	f->b2 += ys * ys;
	f->ab += xs * ys;
}

/* A chunk of pairs: finite values under the scale's limit (nearly all) in
 * registers, the rest through add_pair. (max_abs needs no care: past
 * DBL_MAX it holds a half over 2^1022, more than any difference here.) */
void tfs_compare_pairs(struct tfs_compare *f, const double *x, const double *y, size_t n)
{
	double d2 = f->d2, a2 = f->a2, b2 = f->b2, ab = f->ab, mx = f->max_abs;
	double k = f->unscale, lim = f->limit;
	for (size_t i = 0; i < n; i++) {
		double xi = x[i], yi = y[i];
		if (!(fabs(xi) <= lim && fabs(yi) <= lim)) { /* NaN, infinite, or large */
			f->d2 = d2, f->a2 = a2, f->b2 = b2, f->ab = ab, f->max_abs = mx;
			add_pair(f, xi, yi);
			d2 = f->d2, a2 = f->a2, b2 = f->b2, ab = f->ab, mx = f->max_abs;
			k = f->unscale, lim = f->limit;
			continue;
		}
		double d = fabs(xi - yi);
		if (d > mx)
			mx = d;
		double xs = xi * k, ys = yi * k, ds = xs - ys;
		d2 += ds * ds;
		a2 += xs * xs;
		b2 += ys * ys;
		ab += xs * ys;
	}
	f->d2 = d2, f->a2 = a2, f->b2 = b2, f->ab = ab, f->max_abs = mx;
}

/* Both sides' value streams, or neither. */
static tfs_err open_pair(const struct ref *a, const struct ref *b, struct tfs_values *va,
			 struct tfs_values *vb)
{
	tfs_err e = tfs_values_open(va, a->sh, a->t);
	if (e)
		return e;
	if ((e = tfs_values_open(vb, b->sh, b->t)))
		tfs_values_close(va);
	return e;
}

static tfs_err by_value(const struct ref *a, const struct ref *b, struct tfs_compare *f)
{
	struct tfs_values va, vb;
	tfs_compare_init(f);
	tfs_err e = open_pair(a, b, &va, &vb);
	if (e)
		return e;
	const double *x, *y;
	size_t nx, ny;
	while (!(e = tfs_values_next(&va, &x, &nx)) && !(e = tfs_values_next(&vb, &y, &ny)) && nx)
		tfs_compare_pairs(f, x, y, nx < ny ? nx : ny);
	tfs_values_close(&va);
	tfs_values_close(&vb);
	return e;
}

/* Integers on both sides (any widths): compared exactly, and the largest
 * difference kept exactly (U64 against I64 needs 65 bits); the sums of
 * rel_l2 and cosine in doubles, which they are. */
static tfs_err by_int(const struct ref *a, const struct ref *b, struct tfs_compare *f)
{
	struct tfs_values va, vb;
	tfs_compare_init(f);
	f->exact = 1;
	tfs_err e = open_pair(a, b, &va, &vb);
	if (e)
		return e;
	const tfs_int128 *x, *y;
	size_t nx, ny;
	while (!(e = tfs_values_next_int(&va, &x, &nx)) && !(e = tfs_values_next_int(&vb, &y, &ny)) && nx) {
		for (size_t i = 0; i < nx && i < ny; i++) {
			tfs_int128 d = x[i] - y[i];
			unsigned __int128 ad = d < 0 ? (unsigned __int128)-d : (unsigned __int128)d;
			if (ad > f->max_int)
				f->max_int = ad;
			double xd = (double)x[i], yd = (double)y[i], dd = (double)d;
			f->d2 += dd * dd;
			f->a2 += xd * xd;
			f->b2 += yd * yd;
			f->ab += xd * yd;
		}
	}
	tfs_values_close(&va);
	tfs_values_close(&vb);
	return e;
}

tfs_err tfs_compare_values(const struct tfs_shard *sa, const struct tfs_tensor *a, const struct tfs_shard *sb,
			   const struct tfs_tensor *b, int ints, struct tfs_compare *f)
{
	struct ref ra = {sa, a}, rb = {sb, b};
	return ints ? by_int(&ra, &rb, f) : by_value(&ra, &rb, f);
}
