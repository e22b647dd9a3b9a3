/* The table in every directory (__tensors__.tsv): one line per entry, for
 * people (any viewer) and scripts (TSV). README, "The table in every
 * directory", has the columns.
 *
 * Nothing is built at mount time and the text is never held whole: the
 * first time a table's size is asked for, its lines are formatted once to
 * count them, keeping only the byte offset of every 256th line; a read
 * formats the lines it covers again, from the nearest such offset. */
#ifndef TFS_LISTING_H
#define TFS_LISTING_H

#include <stddef.h>
#include <stdint.h>

#include "core/err.h"

struct tfs_tree;
struct tfs_node;
struct tfs_listing;

/* The table's size in bytes (0 when out of memory: an empty file). */
uint64_t tfs_listing_size(const struct tfs_tree *t, const struct tfs_node *table);

/* Bytes [off, off + len) of the table into dst; *got is how many there
 * were (fewer at the end). */
tfs_err tfs_listing_read(const struct tfs_tree *t, const struct tfs_node *table, uint64_t off, size_t len,
			 char *dst, size_t *got);

#endif
