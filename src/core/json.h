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

/* Appends `s` as a JSON string literal. Written here rather than with
 * json-c because json-c keys are C strings: text holding U+0000 would be
 * cut short. */
tfs_err tfs_json_str(char **buf, size_t *len, size_t *cap, const char *s, size_t n);

/* Writes `s` as a JSON string literal to f, for the command line's --json
 * output (nothing when memory runs out: the caller's ferror-free output is
 * then short, and its JSON invalid, never wrong). */
void tfs_json_fstr(FILE *f, const char *s, size_t n);

/* The same, escaping exactly what serde_json and Python's json.dumps
 * (ensure_ascii=False) escape: DEL stays as it is. */
tfs_err tfs_json_str_std(char **buf, size_t *len, size_t *cap, const char *s, size_t n);

/* Appends pretty-printed JSON nested one level deeper: every line after
 * the first is indented two more spaces. */
/* A double as Python's repr() writes it: the shortest digits that read
 * back the same (the closest such), in fixed notation from 1e-4 up to
 * 1e16 ("10.0", "1234500000000000.0", "0.0001") and in exponent form
 * outside ("1e+16", "1e-05"); "nan" (whatever its sign), "inf", "-inf".
 * buf needs 32 bytes; returns the length. */
size_t tfs_float_repr(char *buf, size_t cap, double v);

tfs_err tfs_json_nested(char **buf, size_t *len, size_t *cap, const char *text, size_t n);

#endif
