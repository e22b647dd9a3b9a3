/* UTF-8 checking, used by the parsers, the messages and the writers. */
#include "core/utf8.h"

#include <locale.h>
#include <stdint.h>
#include <string.h>
#include <wchar.h>

size_t tfs_utf8_check(const unsigned char *s, size_t n)
{
	size_t i = 0;
	while (i < n) {
		/* Headers are nearly all ASCII: test eight bytes at a time. */
		while (i + 8 <= n) {
			uint64_t w;
			memcpy(&w, s + i, 8);
			if (w & 0x8080808080808080ull)
				break;
			i += 8;
		}
		if (i >= n)
			break;
		unsigned char c = s[i];
		if (c < 0x80) {
			i++;
			continue;
		}
		size_t len;
		unsigned char lo = 0x80, hi = 0xbf;
		if (c >= 0xc2 && c <= 0xdf) {
			len = 2;
		} else if (c >= 0xe0 && c <= 0xef) {
			len = 3;
			if (c == 0xe0)
				lo = 0xa0; /* overlong */
			else if (c == 0xed)
				hi = 0x9f; /* surrogates */
		} else if (c >= 0xf0 && c <= 0xf4) {
			len = 4;
			if (c == 0xf0)
				lo = 0x90; /* overlong */
			else if (c == 0xf4)
				hi = 0x8f; /* past U+10FFFF */
		} else {
			return i;
		}
		if (n - i < len)
			return i;
		if (s[i + 1] < lo || s[i + 1] > hi)
			return i;
		for (size_t k = 2; k < len; k++)
			if ((s[i + k] & 0xc0) != 0x80)
				return i;
		i += len;
	}
	return n;
}

/* Measured in C.UTF-8 whatever the caller's locale, since names are
 * UTF-8 by the formats' rules. */
size_t tfs_utf8_width(const char *s)
{
	static locale_t utf8;
	if (!utf8)
		utf8 = newlocale(LC_CTYPE_MASK, "C.UTF-8", (locale_t)0);
	locale_t old = utf8 ? uselocale(utf8) : (locale_t)0;
	mbstate_t st;
	memset(&st, 0, sizeof st);
	size_t w = 0, n = strlen(s);
	while (n) {
		wchar_t wc;
		size_t k = mbrtowc(&wc, s, n, &st);
		if (k == (size_t)-1 || k == (size_t)-2 || k == 0) {
			memset(&st, 0, sizeof st);
			k = 1;
			w++;
		} else {
			int cw = wcwidth(wc);
			w += cw < 0 ? 1 : (size_t)cw;
		}
		s += k;
		n -= k;
	}
	if (utf8)
		uselocale(old);
	return w;
}
