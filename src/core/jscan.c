#include "core/jscan.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/table.h"
#include "core/hex.h"

void tfs_js_init(struct tfs_jscan *s, const char *doc, const void *text, size_t n, unsigned max_depth,
		 struct tfs_diag *d)
{
	memset(s, 0, sizeof *s);
	s->doc = doc;
	s->base = s->p = text;
	s->end = s->base + n;
	s->max_depth = max_depth;
	s->d = d;
}

void tfs_js_done(struct tfs_jscan *s)
{
	free(s->tmp);
	s->tmp = NULL;
	s->tmpcap = 0;
}

tfs_err tfs_js_err(struct tfs_jscan *s, const char *what)
{
	if (s->p >= s->end)
		return tfs_fail(s->d, TFS_ERR_FORMAT,
				"invalid %s JSON: it ends at byte %zu, in the middle of a value", s->doc,
				(size_t)(s->end - s->base));
	return tfs_fail(s->d, TFS_ERR_FORMAT, "invalid %s JSON at byte %zu of the %s: %s", s->doc,
			(size_t)(s->p - s->base), s->doc, what);
}

tfs_err tfs_js_nomem(struct tfs_jscan *s)
{
	return tfs_fail(s->d, TFS_ERR_NOMEM, "out of memory while reading the %s", s->doc);
}

tfs_err tfs_js_expect(struct tfs_jscan *s, char c, const char *what)
{
	tfs_js_ws(s);
	if (tfs_js_peek(s) != c)
		return tfs_js_err(s, what);
	s->p++;
	return TFS_OK;
}

static int read_hex4(struct tfs_jscan *s, unsigned *out)
{
	if (s->end - s->p < 4)
		return -1;
	unsigned v = 0;
	for (int i = 0; i < 4; i++) {
		int h = tfs_hexval(s->p[i]);
		if (h < 0)
			return -1;
		v = v << 4 | (unsigned)h;
	}
	s->p += 4;
	*out = v;
	return 0;
}

/* Reads a string at s->p (which is '"'). The result points into the header
 * when the string has no escapes, else into s->tmp, which the next string
 * overwrites. The header is already known to be valid UTF-8. */
tfs_err tfs_js_string(struct tfs_jscan *s, struct tfs_jstr *out)
{
	const unsigned char *start = ++s->p;
	while (s->p < s->end) {
		unsigned char c = *s->p;
		if (c == '"') {
			out->p = (const char *)start;
			out->len = (size_t)(s->p - start);
			s->p++;
			return TFS_OK;
		}
		if (c == '\\')
			break;
		if (c < 0x20)
			return tfs_js_err(s, "raw control character inside a string");
		s->p++;
	}
	if (s->p >= s->end)
		return tfs_js_err(s, "unterminated string");

	/* Decoded text is never longer than its escaped form. */
	const unsigned char *q = s->p;
	while (q < s->end && *q != '"') {
		if (*q == '\\' && q + 1 < s->end)
			q++;
		q++;
	}
	if (tfs_grow((void **)&s->tmp, &s->tmpcap, (size_t)(q - start) + 1, 1))
		return tfs_js_nomem(s);
	size_t o = (size_t)(s->p - start);
	memcpy(s->tmp, start, o);
	for (;;) {
		if (s->p >= s->end)
			return tfs_js_err(s, "unterminated string");
		unsigned char c = *s->p;
		if (c == '"') {
			s->p++;
			break;
		}
		if (c < 0x20)
			return tfs_js_err(s, "raw control character inside a string");
		if (c != '\\') {
			s->tmp[o++] = (char)c;
			s->p++;
			continue;
		}
		s->p++;
		if (s->p >= s->end)
			return tfs_js_err(s, "unterminated string");
		c = *s->p++;
		switch (c) {
		case '"':
			s->tmp[o++] = '"';
			break;
		case '\\':
			s->tmp[o++] = '\\';
			break;
		case '/':
			s->tmp[o++] = '/';
			break;
		case 'b':
			s->tmp[o++] = '\b';
			break;
		case 'f':
			s->tmp[o++] = '\f';
			break;
		case 'n':
			s->tmp[o++] = '\n';
			break;
		case 'r':
			s->tmp[o++] = '\r';
			break;
		case 't':
			s->tmp[o++] = '\t';
			break;
		case 'u': {
			unsigned cp, lo;
			if (read_hex4(s, &cp))
				return tfs_js_err(s, "bad \\u escape");
			if (cp >= 0xdc00 && cp <= 0xdfff)
				return tfs_js_err(s, "lone surrogate in \\u escape");
			if (cp >= 0xd800 && cp <= 0xdbff) {
				if (s->end - s->p < 2 || s->p[0] != '\\' || s->p[1] != 'u')
					return tfs_js_err(s, "lone surrogate in \\u escape");
				s->p += 2;
				if (read_hex4(s, &lo))
					return tfs_js_err(s, "bad \\u escape");
				if (lo < 0xdc00 || lo > 0xdfff)
					return tfs_js_err(s, "lone surrogate in \\u escape");
				cp = 0x10000 + ((cp - 0xd800) << 10) + (lo - 0xdc00);
			}
			/* Every escape is at least as long as its UTF-8. */
			if (cp < 0x80) {
				s->tmp[o++] = (char)cp;
			} else if (cp < 0x800) {
				s->tmp[o++] = (char)(0xc0 | cp >> 6);
				s->tmp[o++] = (char)(0x80 | (cp & 0x3f));
			} else if (cp < 0x10000) {
				s->tmp[o++] = (char)(0xe0 | cp >> 12);
				s->tmp[o++] = (char)(0x80 | ((cp >> 6) & 0x3f));
				s->tmp[o++] = (char)(0x80 | (cp & 0x3f));
			} else {
				s->tmp[o++] = (char)(0xf0 | cp >> 18);
				s->tmp[o++] = (char)(0x80 | ((cp >> 12) & 0x3f));
				s->tmp[o++] = (char)(0x80 | ((cp >> 6) & 0x3f));
				s->tmp[o++] = (char)(0x80 | (cp & 0x3f));
			}
			break;
		}
		default:
			s->p--;
			return tfs_js_err(s, "invalid escape in string");
		}
	}
	out->p = s->tmp;
	out->len = o;
	return TFS_OK;
}

/* Scans a JSON number. Non-integers and integers that do not fit 64 bits
 * must still lie in f64 range, as serde_json refuses e.g. 1e400 even in a
 * field nobody reads. */
tfs_err tfs_js_number(struct tfs_jscan *s, enum tfs_jnum *kind, uint64_t *val)
{
	const unsigned char *start = s->p;
	int neg = 0, fracexp = 0;
	if (tfs_js_peek(s) == '-') {
		neg = 1;
		s->p++;
	}
	if (!tfs_js_isdigit(tfs_js_peek(s)))
		return tfs_js_err(s, "invalid number");
	if (*s->p == '0') {
		s->p++;
		if (tfs_js_isdigit(tfs_js_peek(s)))
			return tfs_js_err(s, "number with a leading zero");
	} else {
		while (tfs_js_isdigit(tfs_js_peek(s)))
			s->p++;
	}
	const unsigned char *int_end = s->p;
	if (tfs_js_peek(s) == '.') {
		s->p++;
		if (!tfs_js_isdigit(tfs_js_peek(s)))
			return tfs_js_err(s, "invalid number");
		while (tfs_js_isdigit(tfs_js_peek(s)))
			s->p++;
		fracexp = 1;
	}
	if (tfs_js_peek(s) == 'e' || tfs_js_peek(s) == 'E') {
		s->p++;
		if (tfs_js_peek(s) == '+' || tfs_js_peek(s) == '-')
			s->p++;
		if (!tfs_js_isdigit(tfs_js_peek(s)))
			return tfs_js_err(s, "invalid number");
		while (tfs_js_isdigit(tfs_js_peek(s)))
			s->p++;
		fracexp = 1;
	}
	*kind = TFS_JNUM_OTHER;
	if (!fracexp) {
		const unsigned char *d = start + neg;
		uint64_t v = 0;
		int fits = 1;
		for (; d < int_end; d++) {
			unsigned dig = (unsigned)(*d - '0');
			if (v > (UINT64_MAX - dig) / 10) {
				fits = 0;
				break;
			}
			v = v * 10 + dig;
		}
		if (fits && !neg) {
			*kind = TFS_JNUM_UINT;
			*val = v;
			return TFS_OK;
		}
		if (fits && neg && v <= (uint64_t)INT64_MAX + 1)
			return TFS_OK; /* an i64 */
	}
	/* An f64: check that it does not overflow to infinity. */
	size_t len = (size_t)(s->p - start);
	char small[128];
	char *buf = len < sizeof small ? small : malloc(len + 1);
	if (!buf)
		return tfs_js_nomem(s);
	memcpy(buf, start, len);
	buf[len] = 0;
	double x = strtod(buf, NULL);
	if (buf != small)
		free(buf);
	if (isinf(x)) {
		s->p = start;
		return tfs_js_err(s, "number out of the range of a 64-bit float");
	}
	return TFS_OK;
}

tfs_err tfs_js_literal(struct tfs_jscan *s, const char *lit)
{
	size_t n = strlen(lit);
	if ((size_t)(s->end - s->p) < n || memcmp(s->p, lit, n) != 0)
		return tfs_js_err(s, "invalid literal");
	s->p += n;
	return TFS_OK;
}

tfs_err tfs_js_enter(struct tfs_jscan *s)
{
	if (++s->depth > s->max_depth) {
		char what[80];
		snprintf(what, sizeof what, "arrays and objects nested more than %u deep", s->max_depth);
		return tfs_js_err(s, what);
	}
	s->p++;
	return TFS_OK;
}

/* Just after entering an object or array: if it closes at once, consume
 * the closing byte and leave it. Returns 1 when it was empty. */
int tfs_js_close_if_empty(struct tfs_jscan *s, char close)
{
	tfs_js_ws(s);
	if (tfs_js_peek(s) != close)
		return 0;
	s->p++;
	s->depth--;
	return 1;
}

/* After a member: 1 when ',' says another follows, 0 when the closing byte
 * ends the container (left), -1 on anything else (*e says what). */
int tfs_js_next(struct tfs_jscan *s, char close, tfs_err *e)
{
	tfs_js_ws(s);
	if (tfs_js_peek(s) == ',') {
		s->p++;
		return 1;
	}
	if (tfs_js_peek(s) == close) {
		s->p++;
		s->depth--;
		return 0;
	}
	*e = tfs_js_err(s, close == '}' ? "expected ',' or '}'" : "expected ',' or ']'");
	return -1;
}

/* Checks and skips any JSON value: fields the reference ignores must still
 * be valid JSON by every rule. */
tfs_err tfs_js_skip(struct tfs_jscan *s)
{
	tfs_err e = TFS_OK;
	int r;
	struct tfs_jstr str;
	enum tfs_jnum k;
	uint64_t v;
	tfs_js_ws(s);
	switch (tfs_js_peek(s)) {
	case '{':
		if ((e = tfs_js_enter(s)))
			return e;
		if (tfs_js_close_if_empty(s, '}'))
			return TFS_OK;
		do {
			tfs_js_ws(s);
			if (tfs_js_peek(s) != '"')
				return tfs_js_err(s, "expected a string key");
			if ((e = tfs_js_string(s, &str)) || (e = tfs_js_expect(s, ':', "expected ':'")) ||
			    (e = tfs_js_skip(s)))
				return e;
		} while ((r = tfs_js_next(s, '}', &e)) > 0);
		return r < 0 ? e : TFS_OK;
	case '[':
		if ((e = tfs_js_enter(s)))
			return e;
		if (tfs_js_close_if_empty(s, ']'))
			return TFS_OK;
		do {
			if ((e = tfs_js_skip(s)))
				return e;
		} while ((r = tfs_js_next(s, ']', &e)) > 0);
		return r < 0 ? e : TFS_OK;
	case '"':
		return tfs_js_string(s, &str);
	case 't':
		return tfs_js_literal(s, "true");
	case 'f':
		return tfs_js_literal(s, "false");
	case 'n':
		return tfs_js_literal(s, "null");
	default:
		if (tfs_js_peek(s) == '-' || tfs_js_isdigit(tfs_js_peek(s)))
			return tfs_js_number(s, &k, &v);
		return tfs_js_err(s, "expected a JSON value");
	}
}
