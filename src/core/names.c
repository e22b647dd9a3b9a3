#include "core/names.h"

#include <stdio.h>
#include <string.h>

static const char HEX[] = "0123456789ABCDEF";

uint64_t (*tfs_name_hash_hook)(const char *name, size_t len);

static inline int must_escape(unsigned char c)
{
	return c == '%' || c == '/' || c < 0x20 || c == 0x7f;
}

/* The shapes of the synthetic files' names: "__X__.json", "__X__.tsv",
 * "__X__.txt", "__X__.png", and the directory of the source's own files, "__files__". */
static int looks_synthetic(const char *s, size_t n)
{
	if (n == 9 && memcmp(s, "__files__", 9) == 0)
		return 1;
	if (n < 8 || s[0] != '_' || s[1] != '_')
		return 0;
	return (n >= 9 && memcmp(s + n - 7, "__.json", 7) == 0) || memcmp(s + n - 6, "__.tsv", 6) == 0 ||
	       memcmp(s + n - 6, "__.txt", 6) == 0 || memcmp(s + n - 6, "__.png", 6) == 0;
}

int tfs_name_is_plain(const char *name, size_t len)
{
	if (len == 0 || len > TFS_NAME_MAX)
		return 0;
	if ((len == 1 && name[0] == '.') || (len == 2 && name[0] == '.' && name[1] == '.'))
		return 0;
	if (looks_synthetic(name, len))
		return 0;
	for (size_t i = 0; i < len; i++)
		if (must_escape((unsigned char)name[i]))
			return 0;
	return 1;
}

uint64_t tfs_name_hash(const char *name, size_t len)
{
	/* FNV-1a, then a final mix: stable across runs and machines, which a
	 * file name must be. Meeting hashes are resolved per mount. */
	uint64_t h = 0xcbf29ce484222325ull;
	for (size_t i = 0; i < len; i++) {
		h ^= (unsigned char)name[i];
		h *= 0x100000001b3ull;
	}
	h ^= h >> 33;
	h *= 0xff51afd7ed558ccdull;
	h ^= h >> 33;
	return h;
}

size_t tfs_name_map(const char *name, size_t len, char *out, int *hashed)
{
	return tfs_name_map_max(name, len, out, TFS_NAME_MAX, hashed);
}

size_t tfs_name_map_max(const char *name, size_t len, char *out, size_t max, int *hashed)
{
	size_t o = 0, i;
	*hashed = 0;
	if (len == 0) {
		memcpy(out, "%empty", 7);
		return 6;
	}
	if (len == 1 && name[0] == '.') {
		memcpy(out, "%2E", 4);
		return 3;
	}
	if (len == 2 && name[0] == '.' && name[1] == '.') {
		memcpy(out, "%2E%2E", 7);
		return 6;
	}
	i = 0;
	if (looks_synthetic(name, len)) {
		memcpy(out, "%5F", 3);
		o = 3;
		i = 1;
	}
	for (; i < len; i++) {
		unsigned char c = (unsigned char)name[i];
		size_t need = must_escape(c) ? 3 : 1;
		if (o + need > max)
			break;
		if (need == 3) {
			out[o++] = '%';
			out[o++] = HEX[c >> 4];
			out[o++] = HEX[c & 15];
		} else {
			out[o++] = (char)c;
		}
	}
	if (i == len) {
		out[o] = 0;
		return o;
	}
	/* Too long: keep a readable prefix that ends on a character boundary
	 * (never inside a %XX escape or a UTF-8 sequence), then the hash. */
	o = o < TFS_NAME_KEEP ? o : TFS_NAME_KEEP;
	if (o >= 1 && out[o - 1] == '%')
		o -= 1;
	else if (o >= 2 && out[o - 2] == '%')
		o -= 2;
	size_t j = o;
	while (j > 0 && ((unsigned char)out[j - 1] & 0xc0) == 0x80)
		j--;
	if (j > 0 && ((unsigned char)out[j - 1] & 0xc0) == 0xc0) {
		unsigned char lead = (unsigned char)out[j - 1];
		size_t want = lead >= 0xf0 ? 4 : lead >= 0xe0 ? 3 : 2;
		if (o - (j - 1) != want)
			o = j - 1;
	}
	o += (size_t)snprintf(
		out + o, TFS_NAME_MAX + 1 - o, "%%~%016llx",
		(unsigned long long)(tfs_name_hash_hook ? tfs_name_hash_hook : tfs_name_hash)(name, len));
	*hashed = 1;
	return o;
}

long tfs_name_unmap(const char *fn, size_t len, char *out, size_t outsz)
{
	size_t o = 0;
	if (len == 6 && memcmp(fn, "%empty", 6) == 0)
		return 0;
	for (size_t i = 0; i < len; i++) {
		unsigned char c = (unsigned char)fn[i];
		if (c == '%') {
			if (i + 2 >= len)
				return -1;
			int hi = fn[i + 1], lo = fn[i + 2];
			int h = (hi >= '0' && hi <= '9')   ? hi - '0'
				: (hi >= 'A' && hi <= 'F') ? hi - 'A' + 10
							   : -1;
			int l = (lo >= '0' && lo <= '9')   ? lo - '0'
				: (lo >= 'A' && lo <= 'F') ? lo - 'A' + 10
							   : -1;
			if (h < 0 || l < 0)
				return -1;
			c = (unsigned char)(h << 4 | l);
			i += 2;
		}
		if (o >= outsz)
			return -1;
		out[o++] = (char)c;
	}
	return (long)o;
}
