/* -o sums' manifests (views/sums.c), and their line, which --verify
 * prints too. */
#ifndef TFS_SUMS_H
#define TFS_SUMS_H

#include <stddef.h>

/* A line as sha256sum (or xxh64sum) writes it: HEX, two spaces, NAME and a
 * newline; a NAME holding a backslash, newline or carriage return has them
 * escaped and the line starts with a backslash (GNU coreutils' rule). */
size_t tfs_sum_line_len(size_t hexlen, const char *name, size_t n);
/* Writes the line into out (tfs_sum_line_len bytes); returns its length. */
size_t tfs_sum_line(char *out, const char *hex, size_t hexlen, const char *name, size_t n);

#endif
