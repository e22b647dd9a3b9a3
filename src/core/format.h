/* Container formats as drivers. A driver turns the bytes of one file (a
 * tfs_source) into a tfs_table, with its own validation and messages; the
 * rest of tensorfs reads only the table and never learns format names.
 * Adding a format is adding one driver file and one line in formats/registry.c. */
#ifndef TFS_FORMAT_H
#define TFS_FORMAT_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "core/err.h"
#include "core/source.h"
#include "core/table.h"

enum {
	TFS_PARSE_STRICT = 1, /* refuse what the format's reference reader refuses */
};

/* Called once per tolerated oddity (a dtype outside the known ones...). */
typedef void (*tfs_warn_fn)(void *ctx, const char *msg);

struct tfs_parse_opts {
	unsigned flags;
	tfs_warn_fn warn;
	void *warn_ctx;
};

/* What detection sees of a file: its first bytes and its size; its last
 * bytes only when no driver knows the first (over HTTP the first range
 * request brings the start, and a trailer costs one more request). */
#define TFS_PROBE_HEAD 4096
#define TFS_PROBE_TAIL 32
struct tfs_probe {
	const unsigned char *head;
	size_t nhead;
	const unsigned char *tail; /* NULL, or the file's last ntail bytes */
	size_t ntail;
	uint64_t size;
};

/* The largest header (or metadata block) any reader accepts, and the
 * largest header -o export writes: the safetensors reference's limit. */
#define TFS_HEADER_CAP 100000000u

struct tfs_format {
	const char *name; /* -o input=NAME, and messages */
	/* The file name ending of its files, for a directory without an
	 * index (".safetensors"), or NULL. */
	const char *ext;
	/* Other endings its files carry (".pt"), NULL-terminated, or NULL:
	 * with ext, what tells which reader a file is meant for when its
	 * bytes do not say. */
	const char *const *other_ext;
	/* 2: the bytes are this format (a magic number says so); 1: they may
	 * be (a plausible prefix, no magic); 0: they are not. */
	int (*detect)(const struct tfs_probe *p);
	/* Reads and validates the whole table of the file. On failure the
	 * diag holds one line and `out` holds nothing. */
	tfs_err (*read)(struct tfs_source *src, const struct tfs_parse_opts *o, struct tfs_table *out,
			struct tfs_diag *d);
	/* For a format whose models may be split over several files (the
	 * table's part_count): the file name of part k (0-based) of `count`
	 * from the name of any part, or TFS_ERR_UNHANDLED when `name` does not
	 * follow the format's naming. Optional. */
	tfs_err (*part_name)(const char *name, uint32_t k, uint32_t count, char *out, size_t cap);
};

/* The registered drivers, in detection order; NULL-terminated. */
extern const struct tfs_format *const tfs_formats[];

/* The driver of that name, or NULL. */
const struct tfs_format *tfs_format_find(const char *name);

/* The names of all formats, "safetensors, gguf, ...", for messages. */
const char *tfs_format_names(void);

/* Reads a file's table with the driver its bytes call for (or `forced`):
 * the content first, the name after. Of the drivers that recognise the
 * bytes equally well (a zip may be PyTorch's or NumPy's), the one whose
 * files carry the name's ending reads it. When none recognises them, the
 * reader of the format whose ending the name has says what is wrong,
 * else the first driver's (safetensors', whose messages name what the
 * file most likely is). */
tfs_err tfs_format_read(struct tfs_source *src, const struct tfs_format *forced,
			const struct tfs_parse_opts *o, struct tfs_table *out, struct tfs_diag *d);

/* What `git clone` without git-lfs leaves in place of a large file: a
 * small text file naming it (https://git-lfs.com/spec/v1), which starts
 * so. Formats name it in their refusal; the model lists such shards. */
#define TFS_LFS_MAGIC "version https://git-lfs.github.com/spec/"

static inline int tfs_is_lfs_pointer(const void *head, size_t n)
{
	return n >= sizeof TFS_LFS_MAGIC - 1 && memcmp(head, TFS_LFS_MAGIC, sizeof TFS_LFS_MAGIC - 1) == 0;
}

#endif
