/* Pictures of tensors (compute/picture.h). */
#include "compute/picture.h"

#include <math.h>
#include <png.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "compute/values.h"

/* The palette: LEVELS colours of a diverging scale, blue for negative
 * values, white at zero (MID), red for positive; then the colours of a
 * histogram's background and axes, and the mark of NaN and infinity (a
 * green that the scale never reaches). */
#define LEVELS 251
#define MID (LEVELS / 2)
#define BACKGROUND 251
#define AXIS 252
#define BAD 253
/* The text chunk's length: fixed, so the file's size is. */
#define COMMENT_LEN 240
/* Reads of a sample: runs of TFS_PICTURE_BUDGET / RUNS elements. */
#define RUNS 1024
#define BINS 128
#define BAND 8 /* a histogram's top rows, green when a value is not finite */

struct layout {
	int heat;
	uint64_t rows, cols; /* the tensor, as a matrix */
	uint32_t gh, gw;     /* the heatmap's cells */
	uint32_t fy, fx;     /* pixels a cell */
};

static void layout(const struct tfs_table *h, const struct tfs_tensor *t, struct layout *l)
{
	memset(l, 0, sizeof *l);
	const uint64_t *d = h->dims + t->dims_off;
	l->heat = t->ndim == 2 && d[0] && d[1] && tfs_values_ok(t->dtype);
	if (!l->heat)
		return;
	l->rows = d[0];
	l->cols = d[1];
	l->gh = (uint32_t)(d[0] < TFS_PICTURE_MAX ? d[0] : TFS_PICTURE_MAX);
	l->gw = (uint32_t)(d[1] < TFS_PICTURE_MAX ? d[1] : TFS_PICTURE_MAX);
	/* A small tensor is scaled up (a thumbnailer shrinks, it does not
	 * grow), and neither side is under 16 pixels. */
	uint32_t big = l->gh > l->gw ? l->gh : l->gw;
	uint32_t f = 256 / big;
	f = f < 1 ? 1 : f > 64 ? 64 : f;
	l->fy = l->fx = f;
	if (l->gh * l->fy < 16)
		l->fy = (16 + l->gh - 1) / l->gh;
	if (l->gw * l->fx < 16)
		l->fx = (16 + l->gw - 1) / l->gw;
	/* A long thin matrix (a LoRA factor, [16, 15360]) would be a strip
	 * that a thumbnail shrinks to a line: its short side is stretched,
	 * each row (or column) repeated, to at least a quarter of the long. */
	uint32_t w = l->gw * l->fx, ht = l->gh * l->fy;
	if (ht * 4 < w)
		l->fy = (w + 4 * l->gh - 1) / (4 * l->gh);
	else if (w * 4 < ht)
		l->fx = (ht + 4 * l->gw - 1) / (4 * l->gw);
}

void tfs_picture_dims(const struct tfs_table *h, const struct tfs_tensor *t, uint32_t *w, uint32_t *ht)
{
	struct layout l;
	layout(h, t, &l);
	*w = l.heat ? l.gw * l.fx : TFS_PICTURE_HIST_W;
	*ht = l.heat ? l.gh * l.fy : TFS_PICTURE_HIST_H;
}

/* ---- PNG ---- */

struct mem {
	unsigned char *p;
	size_t len, cap;
};

static void put(png_structp png, png_bytep data, size_t n)
{
	struct mem *m = png_get_io_ptr(png);
	if (n > m->cap - m->len) {
		size_t cap = m->cap ? m->cap : 1u << 16;
		while (n > cap - m->len)
			cap *= 2;
		unsigned char *p = realloc(m->p, cap);
		if (!p)
			png_error(png, "out of memory");
		m->p = p;
		m->cap = cap;
	}
	memcpy(m->p + m->len, data, n);
	m->len += n;
}

static void flush_none(png_structp png)
{
	(void)png;
}

static void on_error(png_structp png, png_const_charp msg)
{
	(void)msg;
	png_longjmp(png, 1);
}

static void on_warning(png_structp png, png_const_charp msg)
{
	(void)png;
	(void)msg;
}

/* Anchors of the scale, from -1 to 1 by halves. */
static const unsigned char anchors[5][3] = {
	{24, 56, 140}, {104, 150, 206}, {247, 247, 247}, {222, 122, 96}, {142, 20, 36},
};

static void palette(png_color *p)
{
	memset(p, 0, 256 * sizeof *p);
	for (int i = 0; i < LEVELS; i++) {
		double q = (double)i / MID * 2; /* 0 .. 4 */
		int a = q >= 4 ? 3 : (int)q;
		double f = q - a;
		unsigned char c[3];
		for (int k = 0; k < 3; k++)
			c[k] = (unsigned char)lround(anchors[a][k] + f * (anchors[a + 1][k] - anchors[a][k]));
		p[i] = (png_color){c[0], c[1], c[2]};
	}
	p[BACKGROUND] = (png_color){34, 34, 38};
	p[AXIS] = (png_color){140, 140, 140};
	p[BAD] = (png_color){0, 230, 0};
}

/* Gives row y of the picture, w palette indexes. */
typedef void (*row_fn)(const void *ctx, uint32_t y, unsigned char *out);

/* No compression and no filter: the size depends on w and ht only. */
static tfs_err encode(uint32_t w, uint32_t ht, const char *comment, row_fn row, const void *ctx,
		      unsigned char **out, size_t *len)
{
	struct mem *m = calloc(1, sizeof *m);
	unsigned char *line = malloc(w);
	png_color *pal = malloc(256 * sizeof *pal);
	png_structp png = m && line && pal
				  ? png_create_write_struct(PNG_LIBPNG_VER_STRING, NULL, on_error, on_warning)
				  : NULL;
	png_infop info = png ? png_create_info_struct(png) : NULL;
	tfs_err e = TFS_ERR_NOMEM;
	if (!info)
		goto done;
	if (setjmp(png_jmpbuf(png)))
		goto done; /* (only memory fails: the writer is ours) */
	char key[] = "Comment", text[COMMENT_LEN + 1];
	snprintf(text, sizeof text, "%-*.*s", COMMENT_LEN, COMMENT_LEN, comment);
	png_text t = {.compression = PNG_TEXT_COMPRESSION_NONE,
		      .key = key,
		      .text = text,
		      .text_length = COMMENT_LEN};
	palette(pal);
	png_set_write_fn(png, m, put, flush_none);
	png_set_IHDR(png, info, w, ht, 8, PNG_COLOR_TYPE_PALETTE, PNG_INTERLACE_NONE,
		     PNG_COMPRESSION_TYPE_DEFAULT, PNG_FILTER_TYPE_DEFAULT);
	png_set_PLTE(png, info, pal, 256);
	png_set_text(png, info, &t, 1);
	png_set_compression_level(png, 0);
	png_set_filter(png, 0, PNG_FILTER_NONE);
	png_write_info(png, info);
	for (uint32_t y = 0; y < ht; y++) {
		row(ctx, y, line);
		png_write_row(png, line);
	}
	png_write_end(png, info);
	*out = m->p;
	*len = m->len;
	m->p = NULL;
	e = TFS_OK;
done:
	png_destroy_write_struct(&png, &info);
	if (m)
		free(m->p);
	free(m);
	free(line);
	free(pal);
	return e;
}

static void blank_row(const void *ctx, uint32_t y, unsigned char *out)
{
	(void)y;
	memset(out, MID, *(const uint32_t *)ctx);
}

tfs_err tfs_picture_size(uint32_t w, uint32_t ht, size_t *len)
{
	unsigned char *png;
	tfs_err e = encode(w, ht, "", blank_row, &w, &png, len);
	if (!e)
		free(png);
	return e;
}

/* A value over the scale's limit to its colour. */
static unsigned char level(double v, double limit)
{
	if (!(limit > 0))
		return MID;
	double q = v / limit;
	if (isnan(q))
		return MID; /* an infinite mean over an infinite limit */
	q = q < -1 ? -1 : q > 1 ? 1 : q;
	return (unsigned char)lround((q + 1) * MID);
}

/* ---- heatmap ---- */

static uint64_t gcd(uint64_t a, uint64_t b)
{
	while (b) {
		uint64_t t = a % b;
		a = b;
		b = t;
	}
	return a;
}

struct heat {
	const struct layout *l;
	double *sum;
	uint32_t *cnt;
	unsigned char *bad, *grid;
};

/* Elements [c0, c0 + k) of a row in cell row y go to their cells. */
static void add_run(struct heat *m, uint32_t y, uint64_t c0, const double *v, size_t k)
{
	const struct layout *l = m->l;
	size_t base = (size_t)y * l->gw;
	uint64_t x = c0 * l->gw / l->cols;
	/* the first column of cell x + 1 */
	uint64_t next = ((x + 1) * l->cols + l->gw - 1) / l->gw;
	for (size_t i = 0; i < k; i++) {
		if (c0 + i >= next) {
			x++;
			next = ((x + 1) * l->cols + l->gw - 1) / l->gw;
		}
		if (isfinite(v[i])) {
			m->sum[base + x] += v[i];
			m->cnt[base + x]++;
		} else {
			m->bad[base + x] = 1;
		}
	}
}

/* Every element, for a tensor within the budget. */
static tfs_err heat_all(struct heat *m, struct tfs_values *r)
{
	const struct layout *l = m->l;
	uint64_t row = 0, col = 0;
	const double *v;
	size_t n;
	tfs_err e;
	while (!(e = tfs_values_next(r, &v, &n)) && n) {
		for (size_t i = 0; i < n;) {
			size_t k = l->cols - col < n - i ? (size_t)(l->cols - col) : n - i;
			add_run(m, (uint32_t)(row * l->gh / l->rows), col, v + i, k);
			i += k;
			if ((col += k) == l->cols) {
				col = 0;
				row++;
			}
		}
	}
	return e;
}

/* The i-th of n sample reads, in an order that jumps about a third of
 * the way each time: a remote source takes reads that follow each other
 * within a few MiB for a reader going through, and would fetch all the
 * tensor ahead of a sample that goes forward in small steps. */
static uint64_t spread(uint64_t i, uint64_t n)
{
	uint64_t step = n * 38 / 100 | 1;
	while (step > 1 && gcd(step, n) != 1)
		step += 2;
	return step < n ? i * step % n : i;
}

/* A sample: each row of cells reads the middle row of its tensor rows,
 * whole when it is short, else a run at the start of each cell. */
static tfs_err heat_sample(struct heat *m, struct tfs_values *r)
{
	const struct layout *l = m->l;
	const uint64_t whole = TFS_PICTURE_BUDGET / RUNS;
	const uint64_t run = TFS_PICTURE_BUDGET / ((uint64_t)l->gh * l->gw);
	for (uint32_t i = 0; i < l->gh; i++) {
		uint32_t y = (uint32_t)spread(i, l->gh);
		uint64_t row = ((2 * (uint64_t)y + 1) * l->rows) / (2 * (uint64_t)l->gh);
		const double *v;
		tfs_err e;
		if (l->cols <= whole) {
			if ((e = tfs_values_at(r, row * l->cols, (size_t)l->cols, &v)))
				return e;
			add_run(m, y, 0, v, (size_t)l->cols);
			continue;
		}
		for (uint32_t j = 0; j < l->gw; j++) {
			uint32_t x = (uint32_t)spread(j, l->gw);
			uint64_t c0 = ((uint64_t)x * l->cols + l->gw - 1) / l->gw;
			uint64_t c1 = ((uint64_t)(x + 1) * l->cols + l->gw - 1) / l->gw;
			uint64_t k = c1 - c0 < run ? c1 - c0 : run;
			if ((e = tfs_values_at(r, row * l->cols + c0, (size_t)k, &v)))
				return e;
			add_run(m, y, c0, v, (size_t)k);
		}
	}
	return TFS_OK;
}

static int by_value(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return (x > y) - (x < y);
}

/* The scale's limit: the 99th percentile of the cells' absolute means,
 * from at most 65,536 of them (an outlier must not wash the rest out). */
static tfs_err heat_limit(const struct heat *m, size_t cells, double *limit)
{
	size_t good = 0;
	for (size_t i = 0; i < cells; i++)
		good += !m->bad[i] && m->cnt[i];
	*limit = 0;
	if (!good)
		return TFS_OK;
	size_t stride = (good + 65535) / 65536, n = 0, k = 0;
	double *a = malloc(((good + stride - 1) / stride) * sizeof *a);
	if (!a)
		return TFS_ERR_NOMEM;
	for (size_t i = 0; i < cells; i++) {
		if (m->bad[i] || !m->cnt[i])
			continue;
		if (k++ % stride == 0)
			a[n++] = fabs(m->sum[i] / m->cnt[i]);
	}
	qsort(a, n, sizeof *a, by_value);
	*limit = a[(size_t)(0.99 * (double)(n - 1))];
	free(a);
	return TFS_OK;
}

static void heat_row(const void *ctx, uint32_t y, unsigned char *out)
{
	const struct heat *m = ctx;
	const struct layout *l = m->l;
	const unsigned char *g = m->grid + (size_t)(y / l->fy) * l->gw;
	for (uint32_t x = 0, w = l->gw * l->fx; x < w; x++)
		out[x] = g[x / l->fx];
}

static tfs_err heatmap(const struct layout *l, struct tfs_values *r, unsigned char **png, size_t *len)
{
	size_t cells = (size_t)l->gh * l->gw;
	struct heat m = {l, calloc(cells, sizeof *m.sum), calloc(cells, sizeof *m.cnt), calloc(cells, 1),
			 malloc(cells)};
	tfs_err e = TFS_ERR_NOMEM;
	double limit = 0;
	if (!m.sum || !m.cnt || !m.bad || !m.grid)
		goto done;
	int sampled = l->rows * l->cols > TFS_PICTURE_BUDGET;
	e = sampled ? heat_sample(&m, r) : heat_all(&m, r);
	if (!e)
		e = heat_limit(&m, cells, &limit);
	if (e)
		goto done;
	for (size_t i = 0; i < cells; i++)
		m.grid[i] = m.bad[i] ? BAD : m.cnt[i] ? level(m.sum[i] / m.cnt[i], limit) : MID;
	char text[COMMENT_LEN + 1];
	snprintf(text, sizeof text,
		 "tensorfs: heatmap, %llu x %llu elements in %u x %u cells, each their mean%s; "
		 "blue -L, white 0, red +L; L = %.6g, the 99th percentile of |cell|; green: NaN or inf",
		 (unsigned long long)l->rows, (unsigned long long)l->cols, l->gh, l->gw,
		 sampled ? ", sampled" : "", limit);
	e = encode(l->gw * l->fx, l->gh * l->fy, text, heat_row, &m, png, len);
done:
	free(m.sum);
	free(m.cnt);
	free(m.bad);
	free(m.grid);
	return e;
}

/* ---- histogram ---- */

struct hist {
	uint64_t count, read, bad, finite;
	double lo, hi;
	uint64_t bins[BINS];
	unsigned char *pix;
};

/* The elements a histogram reads: all of them within the budget, else
 * RUNS runs spread evenly; f sees each chunk. */
static tfs_err sample(struct tfs_values *r, struct hist *h, void (*f)(struct hist *, const double *, size_t))
{
	const double *v;
	size_t n;
	tfs_err e = TFS_OK;
	if (r->count <= TFS_PICTURE_BUDGET) {
		tfs_values_rewind(r);
		while (!(e = tfs_values_next(r, &v, &n)) && n)
			f(h, v, n);
		return e;
	}
	const uint64_t run = TFS_PICTURE_BUDGET / RUNS;
	for (uint64_t i = 0; !e && i < RUNS; i++) {
		uint64_t at = spread(i, RUNS) * (r->count - run) / (RUNS - 1);
		if (!(e = tfs_values_at(r, at, (size_t)run, &v)))
			f(h, v, (size_t)run);
	}
	return e;
}

static void range_of(struct hist *h, const double *v, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		h->read++;
		if (!isfinite(v[i])) {
			h->bad++;
			continue;
		}
		if (!h->finite || v[i] < h->lo)
			h->lo = v[i];
		if (!h->finite || v[i] > h->hi)
			h->hi = v[i];
		h->finite++;
	}
}

/* A value's bin as np.histogram finds it; where the range is too wide
 * for a double (hi - lo overflows) or too narrow (lo - 0.5 == lo at 1e18),
 * from halves, or the first bin, never an undefined conversion. */
static int bin_at(const struct hist *h, double norm, double x)
{
	double t = isfinite(norm) && norm > 0 ? (x - h->lo) * norm
					      : (x / 2 - h->lo / 2) / (h->hi / 2 - h->lo / 2) * BINS;
	return !(t >= 0) ? 0 : t >= BINS ? BINS - 1 : (int)t;
}

static void bin_of(struct hist *h, const double *v, size_t n)
{
	double norm = BINS / (h->hi - h->lo);
	for (size_t i = 0; i < n; i++)
		if (isfinite(v[i]))
			h->bins[bin_at(h, norm, v[i])]++;
}

static void hist_row(const void *ctx, uint32_t y, unsigned char *out)
{
	memcpy(out, ((const struct hist *)ctx)->pix + (size_t)y * TFS_PICTURE_HIST_W, TFS_PICTURE_HIST_W);
}

/* Bars coloured by the scale at their middle (the limit being the larger
 * end), a grey line beside zero's bar and along the bottom. */
static void hist_draw(struct hist *h)
{
	const uint32_t W = TFS_PICTURE_HIST_W, H = TFS_PICTURE_HIST_H, bw = W / BINS;
	memset(h->pix, BACKGROUND, (size_t)W * H);
	if (h->bad)
		memset(h->pix, BAD, (size_t)W * BAND);
	memset(h->pix + (size_t)(H - 1) * W, AXIS, W);
	if (!h->finite)
		return;
	if (h->lo < 0 && h->hi > 0) {
		/* in the gap after the bar of zero's bin */
		int x0 = bin_at(h, BINS / (h->hi - h->lo), 0) * (int)bw + (int)bw - 1;
		for (uint32_t y = BAND; y < H; y++)
			h->pix[(size_t)y * W + (uint32_t)x0] = AXIS;
	}
	uint64_t top = 0;
	for (int b = 0; b < BINS; b++)
		top = h->bins[b] > top ? h->bins[b] : top;
	double limit = fabs(h->lo) > fabs(h->hi) ? fabs(h->lo) : fabs(h->hi);
	const uint32_t room = H - 1 - BAND - 2;
	for (uint32_t b = 0; b < BINS; b++) {
		if (!h->bins[b])
			continue;
		uint32_t tall = (uint32_t)lround((double)h->bins[b] / (double)top * room);
		tall = tall ? tall : 1;
		/* (in halves, which overflow where hi - lo would not) */
		unsigned char c = level(2 * (h->lo / 2 + (b + 0.5) * (h->hi / 2 - h->lo / 2) / BINS), limit);
		for (uint32_t y = H - 1 - tall; y < H - 1; y++)
			memset(h->pix + (size_t)y * W + b * bw, c, bw - 1);
	}
}

static tfs_err histogram(const struct tfs_table *tb, const struct tfs_tensor *t, struct tfs_values *r,
			 int have, unsigned char **png, size_t *len)
{
	struct hist h = {0};
	h.pix = malloc((size_t)TFS_PICTURE_HIST_W * TFS_PICTURE_HIST_H);
	if (!h.pix)
		return TFS_ERR_NOMEM;
	tfs_err e = have ? sample(r, &h, range_of) : TFS_OK;
	if (!e && h.finite) {
		if (h.lo == h.hi) {
			h.lo -= 0.5;
			h.hi += 0.5;
		}
		e = sample(r, &h, bin_of);
	}
	if (e) {
		free(h.pix);
		return e;
	}
	hist_draw(&h);
	char text[COMMENT_LEN + 1];
	size_t dl;
	const char *dt = tfs_tensor_dtype(tb, t, &dl);
	if (!have)
		snprintf(text, sizeof text, "tensorfs: no picture, %.*s holds no plain numbers", (int)dl, dt);
	else
		snprintf(
			text, sizeof text,
			"tensorfs: histogram, %d bins from %.6g to %.6g, linear heights; %llu of %llu elements "
			"read, %llu NaN or inf (green band at the top)",
			BINS, h.finite ? h.lo : 0, h.finite ? h.hi : 0, (unsigned long long)h.read,
			(unsigned long long)(r->count), (unsigned long long)h.bad);
	e = encode(TFS_PICTURE_HIST_W, TFS_PICTURE_HIST_H, text, hist_row, &h, png, len);
	free(h.pix);
	return e;
}

tfs_err tfs_picture_png(const struct tfs_shard *sh, const struct tfs_tensor *t, unsigned char **png,
			size_t *len)
{
	struct layout l;
	layout(&sh->h, t, &l);
	struct tfs_values r;
	tfs_err e = tfs_values_open(&r, sh, t);
	if (e && e != TFS_ERR_UNHANDLED)
		return e;
	int have = !e;
	e = l.heat ? heatmap(&l, &r, png, len) : histogram(&sh->h, t, &r, have, png, len);
	if (have)
		tfs_values_close(&r);
	return e;
}
