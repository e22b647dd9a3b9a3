/* libFuzzer target for the manifests --verify reads (sha256sum, xxh64sum
 * and llama-gguf-hash output): for any bytes, parsing ends, every entry has
 * a lowercase hex digest of its algorithm's length and a name (kept: no
 * resolver), and no more entries than lines. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "compute/manifest.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char *text = malloc(size + 1);
	if (!text)
		return 0;
	memcpy(text, data, size);
	size_t lines = 1;
	for (size_t i = 0; i < size; i++)
		lines += data[i] == '\n';
	struct tfs_manifest m;
	struct tfs_diag d;
	tfs_err e = tfs_manifest_parse(text, size, &m, &d);
	if (e != TFS_OK && e != TFS_ERR_INVAL && e != TFS_ERR_NOMEM)
		abort();
	if (e == TFS_OK) {
		if (m.n == 0 || m.n > lines)
			abort();
		for (size_t k = 0; k < m.n; k++) {
			const struct tfs_manifest_entry *x = &m.e[k];
			char hex[80];
			tfs_manifest_hex(x, hex);
			size_t hl = tfs_digest_hex_len((enum tfs_digest_algo)x->a);
			size_t nl = 0;
			const char *name = tfs_manifest_name(&m, x, &nl);
			if (x->a >= TFS_DIGEST_COUNT || strlen(hex) != hl ||
			    strspn(hex, "0123456789abcdef") != hl || !name || nl > size || name[nl] ||
			    x->line == 0 || x->line > lines)
				abort();
		}
		tfs_manifest_free(&m);
	}
	free(text);
	return 0;
}
