/* Strict UTF-8 (RFC 3629): what the JSON scanner, the format parsers, the
 * messages (a name that is not UTF-8 is quoted with \xNN) and the writers
 * of generated files check text against. Depends on nothing. */
#ifndef TFS_UTF8_H
#define TFS_UTF8_H

#include <stddef.h>

/* No overlongs, no surrogates, nothing past U+10FFFF. Returns the offset
 * of the first bad byte, or n. */
size_t tfs_utf8_check(const unsigned char *s, size_t n);

/* Columns a string takes on a terminal: wide (CJK) characters two,
 * combining ones none, a byte that is not UTF-8 one. */
size_t tfs_utf8_width(const char *s);

#endif
