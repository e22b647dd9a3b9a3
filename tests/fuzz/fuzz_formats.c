/* libFuzzer target for the GGUF, bintensors and tensorsafe readers. The
 * input is a whole file, read by each driver in turn. Besides crashes,
 * leaks and UB, it checks what a driver promises of an accepted file:
 * every tensor inside the file and exactly the size its shape and dtype
 * give; metadata JSON that json-c parses; and, for types convert=f32
 * decodes, decoding of the stored blocks (GGUF's dequantization runs on
 * whatever bytes the input holds). */
#include <json.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz_check.h"
#include "formats/bintensors.h"
#include "formats/gguf.h"
#include "formats/tensorsafe.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static const struct tfs_format *const drivers[] = {
		&tfs_format_gguf, &tfs_format_bintensors, &tfs_format_tensorsafe,
	};
	for (size_t k = 0; k < sizeof drivers / sizeof drivers[0]; k++) {
		struct tfs_source *src;
		struct tfs_table h;
		struct tfs_diag d;
		if (tfs_source_open_mem(data, size, "fuzz", &src))
			return 0;
		if (drivers[k]->read(src, NULL, &h, &d) == TFS_OK) {
			fuzz_check_table(&h, data, size);
			tfs_table_free(&h);
		} else if (!memchr(d.msg, 0, sizeof d.msg) || strchr(d.msg, '\n')) {
			abort(); /* a diagnostic is one line */
		}
		tfs_source_close(src);
	}
	return 0;
}
