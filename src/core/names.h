/* Tensor names to file names: one injective, documented mapping.
 *
 * A tensor name may hold any Unicode text, including '/', NUL, control
 * characters, "." and "..", the empty string and more than NAME_MAX bytes.
 * The mapping (docs/mounting.md, "File names"):
 *   - '%', '/', NUL, bytes 0x01-0x1F and 0x7F become %XX (upper-case hex);
 *     every other byte is kept, so Unicode forms and case stay distinct;
 *   - the empty name becomes "%empty"; "." and ".." become "%2E", "%2E%2E";
 *   - a name shaped like a synthetic file (starts with "__", ends with
 *     "__.json", "__.tsv", "__.txt" or "__.png") gets its first '_' written as %5F;
 *   - a result over 255 bytes keeps its first 200 bytes (cut at a character
 *     boundary) followed by "%~" and 16 hex digits of a hash of the full name.
 * Decoding %XX back gives the name, and a '%' in the output is always one of
 * these forms, so no two names meet; hashed names are made unique per mount
 * by tfs_names_unique (a "-N" suffix, in header order) should hashes meet. */
#ifndef TFS_NAMES_H
#define TFS_NAMES_H

#include <stddef.h>
#include <stdint.h>

#define TFS_NAME_MAX 255
#define TFS_NAME_KEEP 200

/* Writes the file name for `name` into out (TFS_NAME_MAX + 1 bytes at least)
 * and returns its length; out is NUL-terminated. Sets *hashed when the long
 * form was used. */
size_t tfs_name_map(const char *name, size_t len, char *out, int *hashed);

/* The same with room kept for a suffix: the result is at most `max` bytes
 * (max >= TFS_NAME_KEEP + 18), shortened by the same rule. */
size_t tfs_name_map_max(const char *name, size_t len, char *out, size_t max, int *hashed);

/* True when the mapped name is the name itself (no escaping needed). */
int tfs_name_is_plain(const char *name, size_t len);

/* Reverses the mapping for names that were not hashed; returns -1 when `fn`
 * is not a name the mapping produces (or is hashed). For tests and tools. */
long tfs_name_unmap(const char *fn, size_t len, char *out, size_t outsz);

/* A stable (unseeded) 64-bit hash for the long-name form. */
uint64_t tfs_name_hash(const char *name, size_t len);

/* Tests replace the hash to force the collisions that 64 bits make too
 * rare to meet by chance; NULL means tfs_name_hash. */
extern uint64_t (*tfs_name_hash_hook)(const char *name, size_t len);

#endif
