/* A hexadecimal digit's value: the one reading of hex in the project
 * (hashes, manifests, percent-escapes, JSON's \u escapes). */
#ifndef TFS_HEX_H
#define TFS_HEX_H

/* 0-15 for 0-9, a-f and A-F; -1 for anything else. */
static inline int tfs_hexval(int c)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	if (c >= 'a' && c <= 'f')
		return c - 'a' + 10;
	if (c >= 'A' && c <= 'F')
		return c - 'A' + 10;
	return -1;
}

#endif
