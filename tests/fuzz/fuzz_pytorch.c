/* libFuzzer target for the zip, pickle, PyTorch and .npz readers. Each
 * input is read twice: as a whole file by both drivers (the zip reader's
 * ground), and as data.pkl inside a well-formed stored archive that also
 * holds four storage records, so that mutations reach the pickle machine
 * and the tensor rules instead of dying in the zip checks. An accepted
 * file must keep fuzz_check.h's promises. */
#include <json.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz_check.h"
#include "formats/npz.h"
#include "formats/torch.h"

static void run(const struct tfs_format *f, const uint8_t *data, size_t size)
{
	struct tfs_source *src;
	struct tfs_table h;
	struct tfs_diag d;
	if (tfs_source_open_mem(data, size, "fuzz", &src))
		return;
	if (f->read(src, NULL, &h, &d) == TFS_OK) {
		fuzz_check_table(&h, data, size);
		tfs_table_free(&h);
	} else if (!memchr(d.msg, 0, sizeof d.msg) || strchr(d.msg, '\n')) {
		abort(); /* a diagnostic is one line */
	}
	tfs_source_close(src);
}

static void le(uint8_t *p, uint64_t v, int n)
{
	for (int i = 0; i < n; i++)
		p[i] = (uint8_t)(v >> (8 * i));
}

/* A stored zip of a/data.pkl (the input) and a/data/0..3 (256 bytes each). */
static uint8_t *archive(const uint8_t *pkl, size_t n, size_t *len)
{
	static const char *const names[] = {"a/data.pkl", "a/data/0", "a/data/1", "a/data/2", "a/data/3"};
	size_t cap = n + 5 * (30 + 46 + 2 * 16 + 256) + 22;
	uint8_t *z = calloc(1, cap), *cd_start;
	uint64_t lho[5];
	size_t pos = 0;
	if (!z)
		return NULL;
	for (int i = 0; i < 5; i++) {
		size_t nl = strlen(names[i]), dl = i ? 256 : n;
		lho[i] = pos;
		le(z + pos, 0x04034b50, 4);
		le(z + pos + 18, dl, 4);
		le(z + pos + 22, dl, 4);
		le(z + pos + 26, nl, 2);
		memcpy(z + pos + 30, names[i], nl);
		pos += 30 + nl;
		if (i)
			for (size_t k = 0; k < dl; k++)
				z[pos + k] = (uint8_t)(k * 7 + i);
		else
			memcpy(z + pos, pkl, n);
		pos += dl;
	}
	cd_start = z + pos;
	for (int i = 0; i < 5; i++) {
		size_t nl = strlen(names[i]), dl = i ? 256 : n;
		le(z + pos, 0x02014b50, 4);
		le(z + pos + 20, dl, 4);
		le(z + pos + 24, dl, 4);
		le(z + pos + 28, nl, 2);
		le(z + pos + 42, lho[i], 4);
		memcpy(z + pos + 46, names[i], nl);
		pos += 46 + nl;
	}
	le(z + pos, 0x06054b50, 4);
	le(z + pos + 8, 5, 2);
	le(z + pos + 10, 5, 2);
	le(z + pos + 12, (uint64_t)(z + pos - cd_start), 4);
	le(z + pos + 16, (uint64_t)(cd_start - z), 4);
	*len = pos + 22;
	return z;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	run(&tfs_format_torch, data, size);
	run(&tfs_format_npz, data, size);
	size_t zl;
	uint8_t *z = archive(data, size, &zl);
	if (z) {
		run(&tfs_format_torch, z, zl);
		free(z);
	}
	return 0;
}
