/* libFuzzer target for the name mapping: for any bytes, the file name is a
 * valid directory entry, at most NAME_MAX bytes, and, unless hashed, maps
 * back to exactly the input (so two names can never share a file). The
 * tree layout's components go through the same function. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "model/index.h"
#include "core/jscan.h"
#include "formats/safetensors.h"
#include "core/names.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char out[TFS_NAME_MAX + 1];
	int hashed;
	size_t n = tfs_name_map((const char *)data, size, out, &hashed);
	if (n == 0 || n > TFS_NAME_MAX || out[n] != 0 || memchr(out, '/', n) || memchr(out, 0, n) ||
	    (n == 1 && out[0] == '.') || (n == 2 && out[0] == '.' && out[1] == '.'))
		abort();
	/* Valid UTF-8 in, valid UTF-8 out: the cut never splits a character. */
	if (tfs_utf8_check(data, size) == size && tfs_utf8_check((unsigned char *)out, n) != n)
		abort();
	if (tfs_name_is_plain((const char *)data, size) !=
	    (!hashed && n == size && memcmp(out, data, n) == 0))
		abort();
	if (!hashed) {
		char *back = malloc(size + 1);
		long b = tfs_name_unmap(out, n, back, size + 1);
		if (b != (long)size || memcmp(back, data, size) != 0)
			abort();
		free(back);
	} else if (!memmem(out, n, "%~", 2)) {
		abort();
	}
	return 0;
}
