/* The manifests --verify checks against, and the line -o sums writes: sha256sum or xxh64sum output, or
 * llama-gguf-hash's. Hostile input: fuzzed (tests/fuzz/fuzz_manifest.c).
 *
 * Read a line at a time, and kept small: each checked line is an entry of
 * about 48 bytes (the digest in binary, the tensor it names), and only the
 * names of lines whose tensor the resolver does not find are kept (to be
 * reported). A manifest of N lines takes about 48 N bytes plus the names of
 * its missing tensors, never the whole text. */
#ifndef TFS_MANIFEST_H
#define TFS_MANIFEST_H

#include <stddef.h>
#include <stdint.h>

#include "core/err.h"
#include "compute/hashes.h"

/* The longest line taken; a longer one is no checksum line (counted in
 * `bad`). A name of a flat mount is at most 255 bytes, a tensor's name in
 * llama-gguf-hash's output a few hundred. */
#define TFS_MANIFEST_LINE_MAX (64u << 10)

/* One checked line: the hash of one tensor (or of one flat mount's file). */
struct tfs_manifest_entry {
	uint32_t node;       /* what the resolver found, 0: not found */
	uint32_t name;       /* offset of its name in `names` when not found */
	uint32_t line;       /* 1 for the first */
	uint8_t a;           /* enum tfs_digest_algo */
	unsigned char d[32]; /* the digest: SHA-256's 32 bytes, XXH64's 8 (big-endian) */
};

struct tfs_manifest {
	struct tfs_manifest_entry *e;
	size_t n, cap;
	size_t bad;   /* lines that are no checksum line */
	size_t lines; /* read so far */
	char *names;  /* the names not found: each its length (a uint32_t), its
		       * bytes and a NUL */
	size_t nlen, ncap;
	/* The node a line's name means, 0 when none (then the name is kept):
	 * set before the first line; NULL keeps every name. */
	uint32_t (*resolve)(void *ctx, const char *name, size_t len);
	void *ctx;
};

/* Takes one line (without its newline; s[n] must be writable: it is
 * parsed in place). Lines it does not check (comments, llama-gguf-hash's
 * whole-model line and its sha1, xxh3 and uuid lines) are skipped; lines of
 * no known form are counted in `bad`. A NUL in a name is a byte of it.
 * TFS_ERR_NOMEM or TFS_OK. */
tfs_err tfs_manifest_line(struct tfs_manifest *m, char *s, size_t n);

/* After the last line: TFS_ERR_INVAL when no line can be checked. */
tfs_err tfs_manifest_done(struct tfs_manifest *m, struct tfs_diag *d);

/* Every line of text[0, len) (text must hold len + 1 bytes), then
 * tfs_manifest_done; m is set up first (resolve NULL). */
tfs_err tfs_manifest_parse(char *text, size_t len, struct tfs_manifest *m, struct tfs_diag *d);

/* An entry's digest as lowercase hex (65 bytes with the NUL), and its name
 * when it was kept (NULL otherwise), *len bytes (it may hold a NUL; one
 * follows it). */
void tfs_manifest_hex(const struct tfs_manifest_entry *x, char *hex);
const char *tfs_manifest_name(const struct tfs_manifest *m, const struct tfs_manifest_entry *x, size_t *len);

void tfs_manifest_free(struct tfs_manifest *m);

/* A line as sha256sum (or xxh64sum) writes it: HEX, two spaces, NAME and a
 * newline; a NAME holding a backslash, newline or carriage return has them
 * escaped and the line starts with a backslash (GNU coreutils' rule). */
size_t tfs_sum_line_len(size_t hexlen, const char *name, size_t n);
/* Writes the line into out (tfs_sum_line_len bytes); returns its length. */
size_t tfs_sum_line(char *out, const char *hex, size_t hexlen, const char *name, size_t n);

#endif
