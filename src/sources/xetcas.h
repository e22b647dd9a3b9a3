/* The Xet CAS of one Hub repository at one commit, as a reader speaks to
 * it: the token (asked of the Hub through the driver's callback, held with
 * its expiry and the CAS's address, renewed before it expires and at once
 * when the CAS refuses it, one renewal in flight at a time), the
 * reconstructions (GET {cas}/v1/reconstructions/HASH, of the whole file
 * or of a range) and the xorb ranges at their presigned URLs. The token
 * goes to the CAS's own origin only, never to a xorb's URL or into a
 * message. Made by the Hub driver (sources/hf.c) per repository and mount,
 * shared by its files, freed after them. */
#ifndef TFS_XETCAS_H
#define TFS_XETCAS_H

#include <stddef.h>
#include <stdint.h>

#include "compute/xetplan.h"
#include "core/err.h"

struct tfs_http;
struct tfs_xet_counts;
struct tfs_xet_cas;

/* Fetches the token's document from the Hub into *body (the caller's to
 * free), or fails with d's line and *status the Hub's HTTP status (0: no
 * status). */
typedef tfs_err (*tfs_xet_token_fn)(void *ctx, char **body, size_t *len, long *status, struct tfs_diag *d);

/* `what` names the repository in messages ("org/repo"). */
tfs_err tfs_xet_cas_new(struct tfs_http *http, struct tfs_xet_counts *counts, const char *what,
			tfs_xet_token_fn token, void *ctx, struct tfs_xet_cas **out);
void tfs_xet_cas_free(struct tfs_xet_cas *c);

/* A token is held (the first one asked for now): TFS_OK, or d's line and
 * *status the Hub's answer (404: the Hub has no Xet for the repository). */
tfs_err tfs_xet_cas_ready(struct tfs_xet_cas *c, long *status, struct tfs_diag *d);

/* The reconstruction of bytes [first, last] of file `hex` (its Xet hash)
 * of `size` bytes: asked with Range: bytes=first-last unless `whole`. A
 * refused token is renewed and the request sent once more. *status is the
 * CAS's last HTTP status (0: none). */
tfs_err tfs_xet_cas_plan(struct tfs_xet_cas *c, const char *hex, uint64_t first, uint64_t last, uint64_t size,
			 int whole, struct tfs_xet_plan *p, long *status, struct tfs_diag *d);

/* Bytes [first, last] of a xorb at its presigned url into buf (exactly
 * that many: a short or longer answer fails). *expired: the URL no longer
 * works (403, 410), a new reconstruction gives a new one. */
tfs_err tfs_xet_cas_xorb(struct tfs_xet_cas *c, const char *url, uint64_t first, uint64_t last, void *buf,
			 int *expired, struct tfs_diag *d);

/* A buffer of at least n bytes for a fetch (*cap: its size), from those
 * the repository's fetches gave back (a fresh one of megabytes is pages
 * the kernel faults in and zeroes, a third of a cold load's time), and
 * given back after; NULL: no memory. */
void *tfs_xet_cas_buffer(struct tfs_xet_cas *c, size_t n, size_t *cap);
void tfs_xet_cas_unbuffer(struct tfs_xet_cas *c, void *p, size_t cap);

#endif
