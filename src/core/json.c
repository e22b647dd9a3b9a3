#include "core/json.h"

#include <json-c/json.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/utf8.h"

tfs_err tfs_json_put(char **buf, size_t *len, size_t *cap, const char *s, size_t n)
{
	if (*len + n + 1 > *cap) {
		size_t nc = *cap ? *cap : 256;
		while (nc < *len + n + 1)
			nc *= 2;
		char *q = realloc(*buf, nc);
		if (!q)
			return TFS_ERR_NOMEM;
		*buf = q;
		*cap = nc;
	}
	if (n)
		memcpy(*buf + *len, s, n);
	*len += n;
	(*buf)[*len] = 0;
	return TFS_OK;
}

tfs_err tfs_json_u64(char **buf, size_t *len, size_t *cap, uint64_t v)
{
	char num[24];
	size_t k = sizeof num;
	do {
		num[--k] = (char)('0' + v % 10);
		v /= 10;
	} while (v);
	return tfs_json_put(buf, len, cap, num + k, sizeof num - k);
}

/* The length of the well-formed UTF-8 sequence at s[0..n), or 0. */
static size_t utf8_seq(const unsigned char *s, size_t n)
{
	unsigned char c = s[0];
	size_t len = c >= 0xf0 ? 4 : c >= 0xe0 ? 3 : 2;
	if (c < 0xc2 || c > 0xf4 || len > n)
		return 0;
	return tfs_utf8_check(s, len) == len ? len : 0;
}

/* The one rule for every JSON string tensorfs writes (docs/tools.md,
 * "Names, paths and JSON"): '"', '\\' and control characters are escaped, and every byte
 * that is not part of a well-formed UTF-8 sequence (GGUF and pickles allow
 * any bytes in names and strings) becomes U+FFFD, so the text is valid
 * UTF-8 for the strictest decoder. */
static tfs_err put_string(char **buf, size_t *len, size_t *cap, const char *s, size_t n, int escape_del)
{
	static const char hex[] = "0123456789abcdef";
	const unsigned char *u = (const unsigned char *)s;
	size_t i = 0, run = 0;
	if (tfs_json_put(buf, len, cap, "\"", 1))
		return TFS_ERR_NOMEM;
	for (i = 0; i < n; i++) {
		unsigned char c = u[i];
		char esc[7];
		size_t el = 0;
		if (c >= 0x80) {
			size_t k = utf8_seq(u + i, n - i);
			if (k) {
				run += k;
				i += k - 1;
				continue;
			}
			memcpy(esc, "\xef\xbf\xbd", 3);
			el = 3;
		} else if (c == '"' || c == '\\') {
			esc[0] = '\\';
			esc[1] = (char)c;
			el = 2;
		} else if (c < 0x20 || (c == 0x7f && escape_del)) {
			const char *named = c == '\n'   ? "\\n"
					    : c == '\t' ? "\\t"
					    : c == '\r' ? "\\r"
					    : c == '\b' ? "\\b"
					    : c == '\f' ? "\\f"
							: NULL;
			if (named) {
				memcpy(esc, named, 2);
				el = 2;
			} else {
				memcpy(esc, "\\u00", 4);
				esc[4] = hex[c >> 4];
				esc[5] = hex[c & 15];
				el = 6;
			}
		} else {
			run++;
			continue;
		}
		if (tfs_json_put(buf, len, cap, s + i - run, run) || tfs_json_put(buf, len, cap, esc, el))
			return TFS_ERR_NOMEM;
		run = 0;
	}
	if (tfs_json_put(buf, len, cap, s + n - run, run) || tfs_json_put(buf, len, cap, "\"", 1))
		return TFS_ERR_NOMEM;
	return TFS_OK;
}

tfs_err tfs_json_str(char **buf, size_t *len, size_t *cap, const char *s, size_t n)
{
	return put_string(buf, len, cap, s, n, 1);
}

tfs_err tfs_json_str_std(char **buf, size_t *len, size_t *cap, const char *s, size_t n)
{
	return put_string(buf, len, cap, s, n, 0);
}

tfs_err tfs_json_puts(char **buf, size_t *len, size_t *cap, const char *s)
{
	return tfs_json_put(buf, len, cap, s, strlen(s));
}

tfs_err tfs_json_nested(char **b, size_t *n, size_t *cap, const char *text, size_t len)
{
	tfs_err e = TFS_OK;
	size_t start = 0;
	for (size_t k = 0; !e && k < len; k++) {
		if (text[k] != '\n')
			continue;
		e = tfs_json_put(b, n, cap, text + start, k + 1 - start);
		if (!e)
			e = tfs_json_put(b, n, cap, "  ", 2);
		start = k + 1;
	}
	if (!e)
		e = tfs_json_put(b, n, cap, text + start, len - start);
	return e;
}

/* The digits of the p-significant-digit string that round-trips, or 0.
 * The correctly rounded one is tried first, then its neighbours one unit
 * away in the last digit: at a power of two the interval that reads back
 * the same is lopsided, and the nearest string may fall out of it while a
 * farther one with as few digits is in. */
static int round_trips(double v, int p, char *digits, int *exp10)
{
	char t[48];
	snprintf(t, sizeof t, "%.*e", p - 1, v);
	char *e = strchr(t, 'e');
	long long m = 0;
	for (char *q = t; q < e; q++)
		if (*q >= '0' && *q <= '9')
			m = m * 10 + (*q - '0');
	int ex = atoi(e + 1);
	for (int k = 0; k < 3; k++) {
		long long c = m + (k == 0 ? 0 : k == 1 ? 1 : -1);
		if (c <= 0)
			continue;
		char cand[48];
		snprintf(cand, sizeof cand, "%s%llde%d", v < 0 ? "-" : "", c, ex - (p - 1));
		if (strtod(cand, NULL) != v)
			continue;
		int n = snprintf(digits, 24, "%lld", c);
		*exp10 = ex - (p - 1) + n; /* digits are 0.d1d2... x 10^exp10 */
		return n;
	}
	return 0;
}

size_t tfs_float_repr(char *buf, size_t cap, double v)
{
	if (v != v)
		return (size_t)snprintf(buf, cap, "nan");
	if (v - v != 0)
		return (size_t)snprintf(buf, cap, "%s", v < 0 ? "-inf" : "inf");
	const char *sign = signbit(v) ? "-" : "";
	if (v == 0)
		return (size_t)snprintf(buf, cap, "%s0.0", sign);
	char d[24];
	int n = 0, decpt = 0;
	for (int p = 1; p <= 17 && !n; p++)
		n = round_trips(v, p, d, &decpt);
	while (n > 1 && d[n - 1] == '0')
		d[--n] = 0;
	char out[64];
	size_t o = 0;
	if (*sign)
		out[o++] = '-';
	if (decpt > -4 && decpt <= 16) {
		if (decpt <= 0) { /* 0.000ddd */
			out[o++] = '0';
			out[o++] = '.';
			for (int i = 0; i < -decpt; i++)
				out[o++] = '0';
			for (int i = 0; i < n; i++)
				out[o++] = d[i];
		} else { /* ddd.ddd, or ddd000.0 */
			for (int i = 0; i < decpt; i++)
				out[o++] = i < n ? d[i] : '0';
			out[o++] = '.';
			if (decpt >= n)
				out[o++] = '0';
			for (int i = decpt; i < n; i++)
				out[o++] = d[i];
		}
		out[o] = 0;
	} else { /* d.ddde+XX */
		int x = decpt - 1;
		out[o++] = d[0];
		if (n > 1) {
			out[o++] = '.';
			for (int i = 1; i < n; i++)
				out[o++] = d[i];
		}
		snprintf(out + o, sizeof out - o, "e%c%02d", x < 0 ? '-' : '+', x < 0 ? -x : x);
	}
	return (size_t)snprintf(buf, cap, "%s", out);
}

void tfs_json_fstr(FILE *f, const char *s, size_t n)
{
	char *b = NULL;
	size_t len = 0, cap = 0;
	if (tfs_json_str(&b, &len, &cap, s, n) == TFS_OK)
		fwrite(b, 1, len, f);
	free(b);
}

static tfs_err indent(char **b, size_t *len, size_t *cap, int level, int flags)
{
	tfs_err e = TFS_OK;
	for (int i = 0; !e && (flags & JSON_C_TO_STRING_PRETTY) && i < level; i++)
		e = tfs_json_put(b, len, cap, "  ", 2);
	return e;
}

/* json-c's layout (json_object.c: objects, arrays, its PRETTY and SPACED
 * flags), so that what it wrote before reads the same. */
static tfs_err put_value(char **b, size_t *len, size_t *cap, json_object *v, int level, int flags)
{
	enum json_type t = v ? json_object_get_type(v) : json_type_null;
	int pretty = flags & JSON_C_TO_STRING_PRETTY, spaced = (flags & JSON_C_TO_STRING_SPACED) && !pretty;
	if (t == json_type_string)
		return tfs_json_str_std(b, len, cap, json_object_get_string(v),
					(size_t)json_object_get_string_len(v));
	if (t != json_type_object && t != json_type_array) {
		/* Numbers (a parsed one keeps its text), booleans, null: no
		 * string in them. */
		const char *s = v ? json_object_to_json_string_ext(v, flags) : "null";
		return tfs_json_puts(b, len, cap, s ? s : "null");
	}
	int any = 0; /* (json-c writes an empty one pretty as "{\n}") */
	tfs_err e = tfs_json_put(b, len, cap, t == json_type_object ? "{" : "[", 1);
	if (t == json_type_object) {
		json_object_object_foreach(v, key, val)
		{
			if (e)
				break;
			if (any && (e = tfs_json_put(b, len, cap, ",", 1)))
				break;
			any = 1;
			if ((pretty && (e = tfs_json_put(b, len, cap, "\n", 1))) ||
			    (spaced && (e = tfs_json_put(b, len, cap, " ", 1))) ||
			    (e = indent(b, len, cap, level + 1, flags)) ||
			    (e = tfs_json_str_std(b, len, cap, key, strlen(key))) ||
			    (e = tfs_json_puts(b, len, cap, (flags & JSON_C_TO_STRING_SPACED) ? ": " : ":")))
				break;
			e = put_value(b, len, cap, val, level + 1, flags);
		}
	} else {
		size_t n = json_object_array_length(v);
		for (size_t i = 0; !e && i < n; i++) {
			if (any && (e = tfs_json_put(b, len, cap, ",", 1)))
				break;
			any = 1;
			if ((pretty && (e = tfs_json_put(b, len, cap, "\n", 1))) ||
			    (spaced && (e = tfs_json_put(b, len, cap, " ", 1))) ||
			    (e = indent(b, len, cap, level + 1, flags)))
				break;
			e = put_value(b, len, cap, json_object_array_get_idx(v, i), level + 1, flags);
		}
	}
	if (!e && pretty)
		e = tfs_json_put(b, len, cap, "\n", 1);
	if (!e && pretty)
		e = indent(b, len, cap, level, flags);
	if (!e && spaced)
		e = tfs_json_put(b, len, cap, " ", 1);
	if (!e)
		e = tfs_json_put(b, len, cap, t == json_type_object ? "}" : "]", 1);
	return e;
}

tfs_err tfs_json_value(char **buf, size_t *len, size_t *cap, struct json_object *v, int flags)
{
	return put_value(buf, len, cap, v, 0, flags);
}
