/* The registry of format drivers: the one place that names them. */
#include "core/format.h"

#include <stdio.h>
#include <string.h>

extern const struct tfs_format tfs_format_safetensors;
extern const struct tfs_format tfs_format_gguf;
extern const struct tfs_format tfs_format_bintensors;
extern const struct tfs_format tfs_format_tensorsafe;
extern const struct tfs_format tfs_format_torch;
extern const struct tfs_format tfs_format_npz;

const struct tfs_format *const tfs_formats[] = {
	&tfs_format_safetensors,
	&tfs_format_gguf,
	&tfs_format_bintensors,
	&tfs_format_tensorsafe,
	&tfs_format_torch,
	&tfs_format_npz,
	NULL,
};

const struct tfs_format *tfs_format_find(const char *name)
{
	for (size_t i = 0; tfs_formats[i]; i++)
		if (strcmp(tfs_formats[i]->name, name) == 0)
			return tfs_formats[i];
	return NULL;
}

const char *tfs_format_names(void)
{
	static char names[256];
	if (!names[0]) {
		size_t o = 0;
		for (size_t i = 0; tfs_formats[i] && o < sizeof names; i++)
			o += (size_t)snprintf(names + o, sizeof names - o, "%s%s", i ? ", " : "",
					      tfs_formats[i]->name);
	}
	return names;
}

static int ends_with(const char *s, const char *x)
{
	size_t sl = strlen(s), xl = strlen(x);
	return sl > xl && strcmp(s + sl - xl, x) == 0;
}

/* Whether the file name ends as the format's files do. */
static int named(const struct tfs_format *f, const char *name)
{
	if (!f || !name)
		return 0;
	if (f->ext && ends_with(name, f->ext))
		return 1;
	for (const char *const *x = f->other_ext; x && *x; x++)
		if (ends_with(name, *x))
			return 1;
	return 0;
}

tfs_err tfs_format_read(struct tfs_source *src, const struct tfs_format *forced,
			const struct tfs_parse_opts *o, struct tfs_table *out, struct tfs_diag *d)
{
	const struct tfs_format *best = forced;
	if (!best) {
		unsigned char head[TFS_PROBE_HEAD];
		uint64_t size = src->id.size;
		struct tfs_probe p = {
			.head = head,
			.nhead = size < sizeof head ? (size_t)size : sizeof head,
			.size = size,
		};
		tfs_err e = tfs_source_read(src, head, p.nhead, 0, d);
		if (e)
			return e;
		int score = 0;
		unsigned char tail[TFS_PROBE_TAIL];
		for (int pass = 0; pass < 2 && !score; pass++) {
			if (pass == 1) {
				/* Nothing knows the start: try the end (a trailer). */
				if (size < sizeof tail ||
				    tfs_source_pread(src, tail, sizeof tail, size - sizeof tail))
					break;
				p.tail = tail;
				p.ntail = sizeof tail;
			}
			for (size_t i = 0; tfs_formats[i]; i++) {
				int s = tfs_formats[i]->detect(&p);
				/* A tie goes to the driver the name points at. */
				if (s > score || (s && s == score && !named(best, src->location) &&
						  named(tfs_formats[i], src->location))) {
					score = s;
					best = tfs_formats[i];
				}
			}
		}
		/* Nothing knows the bytes: the reader whose files carry the
		 * name's ending explains what is wrong (a .bt file with a bad
		 * first byte is better told about bincode than about JSON),
		 * else the first driver. */
		for (size_t i = 0; !best && tfs_formats[i]; i++)
			if (named(tfs_formats[i], src->location))
				best = tfs_formats[i];
		if (!best)
			best = tfs_formats[0];
	}
	tfs_err e = best->read(src, o, out, d);
	if (!e)
		out->driver = best;
	return e;
}
