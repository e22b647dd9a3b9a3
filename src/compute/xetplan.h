/* The answer of Xet's reconstruction API (GET {cas}/v1/reconstructions/
 * {file hash}, or v2, with Range: bytes=FIRST-LAST): which chunks of which
 * xorbs make the file's bytes, and where to fetch them. v1 names a
 * presigned URL and the byte range to send with it per chunk range
 * ("fetch_info"); v2 groups several such ranges under one URL ("xorbs");
 * both become one list of fetches here.
 *
 * Strict and bounded: at most TFS_XET_TERMS_MAX terms and as many
 * fetches, URLs of at most TFS_XET_URL_MAX bytes (http or https, no
 * spaces or control characters), chunk ranges non-empty and within a
 * xorb's size, byte ranges in order and of a size their chunks can have,
 * the terms covering exactly the bytes asked (the last term needed, none
 * past the file's end), and every term inside one fetch of its xorb. */
#ifndef TFS_XETPLAN_H
#define TFS_XETPLAN_H

#include <stddef.h>
#include <stdint.h>

#include "core/err.h"
#include "compute/xetchunk.h"
#include "compute/xethash.h"

#define TFS_XET_TERMS_MAX (1u << 20)
#define TFS_XET_URL_MAX 16384
/* The chunks a xorb can hold (xet-core writes at most 8,192), and its
 * bytes: 64 MiB serialized, and room for one more chunk past that. */
#define TFS_XET_XORB_CHUNKS_MAX 65536u
#define TFS_XET_XORB_BYTES_MAX ((64ull << 20) + TFS_XET_CHUNK_HEADER + TFS_XET_CHUNK_COMP_MAX)

struct tfs_xet_term {
	uint8_t xorb[TFS_XET_HASH_LEN];
	uint32_t start, end; /* chunks [start, end) of the xorb */
	uint32_t unpacked;   /* their bytes, uncompressed */
	uint32_t fetch;      /* the fetch that holds them */
	uint64_t at;         /* its first byte, in the file */
};

struct tfs_xet_fetch {
	uint8_t xorb[TFS_XET_HASH_LEN];
	uint32_t start, end;  /* chunks [start, end) */
	uint64_t first, last; /* their bytes in the xorb, inclusive: the Range sent with the URL */
	uint32_t url;         /* index in urls */
};

struct tfs_xet_plan {
	uint64_t skip; /* offset_into_first_range: bytes of the first term before the range */
	struct tfs_xet_term *term;
	uint32_t nterm;
	struct tfs_xet_fetch *fetch;
	uint32_t nfetch;
	char **url;
	uint32_t nurl;
	int v2;
};

/* The answer for bytes [first, last] of a file of `size` bytes. On
 * failure p holds nothing and d one line. */
tfs_err tfs_xet_plan_parse(const char *json, size_t n, uint64_t first, uint64_t last, uint64_t size,
			   struct tfs_xet_plan *p, struct tfs_diag *d);
void tfs_xet_plan_free(struct tfs_xet_plan *p);

/* The term holding byte `off` of the file (the plan's terms are in file
 * order), or -1. */
long tfs_xet_plan_term_at(const struct tfs_xet_plan *p, uint64_t off);

/* Whether a plan for a range agrees with the whole file's: each of its
 * terms lies in the whole plan's term at the same place, of the same
 * xorb, within its chunks, and starts (ends) with it where it starts
 * (ends) at the same chunk. An answer for another range than the one
 * asked fails here unless it is shifted by whole chunks inside one term,
 * which only the chunks' lengths, once known, can show. */
tfs_err tfs_xet_plan_within(const struct tfs_xet_plan *whole, const struct tfs_xet_plan *r,
			    struct tfs_diag *d);

#endif
