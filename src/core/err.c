#include "core/err.h"

#include "core/url.h"
#include "core/utf8.h"

#include <stdio.h>
#include <string.h>

static void (*log_sink)(const char *line);
static void (*info_sink)(const char *line);

void tfs_log_set(void (*sink)(const char *line))
{
	log_sink = sink;
}

void tfs_log_set_info(void (*sink)(const char *line))
{
	info_sink = sink;
}

void tfs_log_info(const char *fmt, ...)
{
	char line[1024];
	va_list ap;
	if (!info_sink)
		return;
	va_start(ap, fmt);
	vsnprintf(line, sizeof line, fmt, ap);
	va_end(ap);
	tfs_url_scrub(line);
	info_sink(line);
}

static void (*detail_sink)(const char *line);

void tfs_log_set_detail(void (*sink)(const char *line))
{
	detail_sink = sink;
}

void tfs_log_detail(const char *fmt, ...)
{
	char line[1024];
	va_list ap;
	if (!detail_sink)
		return;
	va_start(ap, fmt);
	vsnprintf(line, sizeof line, fmt, ap);
	va_end(ap);
	detail_sink(line);
}

void tfs_log(const char *fmt, ...)
{
	char line[1024];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(line, sizeof line, fmt, ap);
	va_end(ap);
	tfs_url_scrub(line);
	if (log_sink)
		log_sink(line);
	else
		fprintf(stderr, "tensorfs: %s\n", line);
}

const char *tfs_err_str(tfs_err e)
{
	switch (e) {
	case TFS_OK:
		return "success";
	case TFS_ERR_NOMEM:
		return "out of memory";
	case TFS_ERR_IO:
		return "I/O error";
	case TFS_ERR_SHORT:
		return "source is shorter than at mount time";
	case TFS_ERR_OPEN:
		return "cannot open source";
	case TFS_ERR_NOENT:
		return "no such file";
	case TFS_ERR_NOTREG:
		return "not a regular file";
	case TFS_ERR_FORMAT:
		return "not a valid file of its format";
	case TFS_ERR_INVAL:
		return "invalid argument";
	case TFS_ERR_UNHANDLED:
		return "not handled";
	case TFS_ERR_NOFILE:
		return "no such file in the mount";
	case TFS_ERR_NOTDIR:
		return "not a directory";
	case TFS_ERR_ISDIR:
		return "a directory";
	case TFS_ERR_NAMETOOLONG:
		return "name too long";
	case TFS_ERR_ROFS:
		return "read-only";
	case TFS_ERR_NODATA:
		return "no such attribute";
	case TFS_ERR_RANGE:
		return "value larger than the room given";
	case TFS_ERR_TOOBIG:
		return "value too large";
	case TFS_ERR_NOTSUP:
		return "not supported";
	}
	return "unknown error";
}

tfs_err tfs_vfail(struct tfs_diag *d, tfs_err e, const char *fmt, va_list ap)
{
	if (d) {
		vsnprintf(d->msg, sizeof d->msg, fmt, ap);
		/* A URL's password never reaches a message, however it got
		 * into one (an endpoint in a "no answer", curl's own words). */
		tfs_url_scrub(d->msg);
	}
	return e;
}

tfs_err tfs_fail(struct tfs_diag *d, tfs_err e, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	tfs_vfail(d, e, fmt, ap);
	va_end(ap);
	return e;
}

void tfs_quote(char *out, size_t outsz, const char *name, size_t len)
{
	static const char hex[] = "0123456789abcdef";
	size_t o = 0, i;
	/* Room for the closing quote, "..." and the NUL. */
	size_t limit = outsz > 8 ? outsz - 6 : 0;

	if (outsz < 3) {
		if (outsz)
			out[0] = 0;
		return;
	}
	out[o++] = '\'';
	for (i = 0; i < len; i++) {
		unsigned char c = (unsigned char)name[i];
		/* A name that is not UTF-8 (GGUF and pickles allow any bytes)
		 * must not make the line itself invalid text: whole valid
		 * sequences are kept, any other byte is shown as \xNN. */
		size_t seq = c < 0x80 ? 1 : c >= 0xf0 ? 4 : c >= 0xe0 ? 3 : 2;
		if (seq > 1 && (i + seq > len || tfs_utf8_check((const unsigned char *)name + i, seq) != seq))
			seq = 0;
		/* (C1 controls, U+0080 to U+009F, are control characters too:
		 * 0x9B is a terminal's CSI.) */
		int c1 = c == 0xc2 && seq == 2 && (unsigned char)name[i + 1] < 0xa0;
		if (c1)
			seq = 0;
		int esc = seq == 0 || c < 0x20 || c == 0x7f || c == '\'' || c == '\\';
		if (o + (esc ? 4 : seq) > limit)
			break;
		if (esc) {
			out[o++] = '\\';
			out[o++] = 'x';
			out[o++] = hex[c >> 4];
			out[o++] = hex[c & 15];
		} else {
			memcpy(out + o, name + i, seq);
			o += seq;
			i += seq - 1;
		}
	}
	if (i < len) {
		memcpy(out + o, "...", 3);
		o += 3;
	}
	out[o++] = '\'';
	out[o] = 0;
}

/* Whether tfs_quote would show `s` as it is (between its quotes). */
static int plain(const char *s, size_t n)
{
	if (tfs_utf8_check((const unsigned char *)s, n) != n)
		return 0;
	for (size_t i = 0; i < n; i++) {
		unsigned char c = (unsigned char)s[i];
		if (c < 0x20 || c == 0x7f || c == '\'' || c == '\\' ||
		    (c == 0xc2 && i + 1 < n && (unsigned char)s[i + 1] < 0xa0))
			return 0;
	}
	return 1;
}

const char *tfs_quote_path(char *out, size_t outsz, const char *path)
{
	size_t n = strlen(path);
	if (n < outsz && plain(path, n))
		memcpy(out, path, n + 1);
	else
		tfs_quote(out, outsz, path, n);
	return out;
}
