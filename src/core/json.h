/* Writing JSON (and other text) into a growing buffer. Every function
 * appends to *buf (length *len, capacity *cap), keeps it NUL-terminated,
 * and returns TFS_ERR_NOMEM when it cannot grow it. */
#ifndef TFS_JSON_H
#define TFS_JSON_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "core/err.h"

/* Appends n bytes as they are. */
tfs_err tfs_json_put(char **buf, size_t *len, size_t *cap, const char *s, size_t n);

/* Appends a NUL-terminated string as it is. */
tfs_err tfs_json_puts(char **buf, size_t *len, size_t *cap, const char *s);

/* Appends v in decimal (in headers and tables, faster than snprintf). */
tfs_err tfs_json_u64(char **buf, size_t *len, size_t *cap, uint64_t v);

/* Appends `s` as a JSON string literal, by the one rule for every JSON
 * string tensorfs writes: '"', '\\', control characters and DEL escaped,
 * and each byte that is not part of a well-formed UTF-8 sequence written
 * as U+FFFD, so that every JSON output is valid UTF-8. Written here rather
 * than with json-c because json-c keys are C strings (text holding U+0000
 * would be cut short) and its writer passes invalid UTF-8 through. */
tfs_err tfs_json_str(char **buf, size_t *len, size_t *cap, const char *s, size_t n);

/* Writes `s` as a JSON string literal to f, for the command line's --json
 * output (nothing when memory runs out: the caller's ferror-free output is
 * then short, and its JSON invalid, never wrong). */
void tfs_json_fstr(FILE *f, const char *s, size_t n);

/* The same, escaping exactly what serde_json and Python's json.dumps
 * (ensure_ascii=False) escape: DEL stays as it is. */
tfs_err tfs_json_str_std(char **buf, size_t *len, size_t *cap, const char *s, size_t n);

/* Appends a json-c value as json_object_to_json_string_ext(v, flags |
 * JSON_C_TO_STRING_NOSLASHESCAPE) writes it (flags: JSON_C_TO_STRING_*),
 * but every string through the one rule of tfs_json_str_std: json-c's own
 * writer passes bytes that are not UTF-8 through. */
struct json_object;
tfs_err tfs_json_value(char **buf, size_t *len, size_t *cap, struct json_object *v, int flags);

/* A double as Python's repr() writes it: the shortest digits that read
 * back the same (the closest such), in fixed notation from 1e-4 up to
 * 1e16 ("10.0", "1234500000000000.0", "0.0001") and in exponent form
 * outside ("1e+16", "1e-05"); "nan" (whatever its sign), "inf", "-inf".
 * buf needs 32 bytes; returns the length. */
size_t tfs_float_repr(char *buf, size_t cap, double v);

/* Appends pretty-printed JSON nested one level deeper: every line after
 * the first is indented two more spaces. */
tfs_err tfs_json_nested(char **buf, size_t *len, size_t *cap, const char *text, size_t n);

#endif
