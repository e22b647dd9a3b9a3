/* libFuzzer target for format detection and dispatch, the entry every
 * mount and --inspect goes through: the input is a whole file, read once
 * with the driver its bytes call for (tfs_format_read with nothing forced)
 * and once by every registered driver as -o input=NAME forces it. It
 * names no driver: a new format in formats/registry.c is fuzzed here at
 * once. Besides crashes, leaks and UB, an accepted table must hold only
 * tensors inside the file with the sizes their shapes give, and a refusal
 * must be one line. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz_check.h"
#include "core/format.h"

static void one(const uint8_t *data, size_t size, const struct tfs_format *forced)
{
	struct tfs_source *src;
	struct tfs_table h;
	struct tfs_diag d;
	if (tfs_source_open_mem(data, size, "fuzz", &src))
		return;
	memset(&d, 0, sizeof d);
	if (tfs_format_read(src, forced, NULL, &h, &d) == TFS_OK) {
		fuzz_check_table_ex(&h, data, size, 1);
		tfs_table_free(&h);
	} else if (!memchr(d.msg, 0, sizeof d.msg) || strchr(d.msg, '\n') || !d.msg[0]) {
		abort(); /* a diagnostic is one line, never empty */
	}
	tfs_source_close(src);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	one(data, size, NULL);
	for (size_t k = 0; tfs_formats[k]; k++)
		one(data, size, tfs_formats[k]);
	return 0;
}
