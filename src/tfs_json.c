#include "tfs_json.h"

#include <stdlib.h>
#include <string.h>

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

static tfs_err put_string(char **buf, size_t *len, size_t *cap, const char *s, size_t n,
			  int escape_del)
{
	static const char hex[] = "0123456789abcdef";
	size_t i = 0, run = 0;
	if (tfs_json_put(buf, len, cap, "\"", 1))
		return TFS_ERR_NOMEM;
	for (i = 0; i < n; i++) {
		unsigned char c = (unsigned char)s[i];
		char esc[7];
		size_t el = 0;
		if (c == '"' || c == '\\') {
			esc[0] = '\\';
			esc[1] = (char)c;
			el = 2;
		} else if (c < 0x20 || (c == 0x7f && escape_del)) {
			const char *named = c == '\n' ? "\\n" : c == '\t' ? "\\t" : c == '\r' ? "\\r" :
					    c == '\b' ? "\\b" : c == '\f' ? "\\f" : NULL;
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
