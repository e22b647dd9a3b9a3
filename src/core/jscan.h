/* A strict single-pass JSON scanner with no document tree: RFC 8259 as
 * serde_json reads it (no comments, trailing commas, NaN or leading zeros,
 * no raw control characters in strings, no lone surrogates anywhere,
 * numbers within f64 range, a nesting limit). The safetensors header, shard
 * indexes and tensorsafe's metadata are read with it; each caller walks the
 * values it expects and skips (while still checking) the rest. */
#ifndef TFS_JSCAN_H
#define TFS_JSCAN_H

#include <stddef.h>
#include <stdint.h>

#include "core/err.h"
#include "core/utf8.h"

struct tfs_jscan {
	const char *doc; /* what is read ("header", "index"), for messages */
	const unsigned char *base, *p, *end;
	unsigned depth, max_depth;
	struct tfs_diag *d;
	char *tmp; /* decoded strings that had escapes */
	size_t tmpcap;
};

struct tfs_jstr {
	const char *p;
	size_t len;
};

enum tfs_jnum { TFS_JNUM_UINT, TFS_JNUM_OTHER };

/* Starts a scan of n bytes, which must already be valid UTF-8. */
void tfs_js_init(struct tfs_jscan *s, const char *doc, const void *text, size_t n, unsigned max_depth,
		 struct tfs_diag *d);
void tfs_js_done(struct tfs_jscan *s);

/* "invalid DOC JSON at byte K of the DOC: WHAT" (or "it ends at ..."). */
tfs_err tfs_js_err(struct tfs_jscan *s, const char *what);
tfs_err tfs_js_nomem(struct tfs_jscan *s);

static inline void tfs_js_ws(struct tfs_jscan *s)
{
	while (s->p < s->end && (*s->p == ' ' || *s->p == '\n' || *s->p == '\r' || *s->p == '\t'))
		s->p++;
}

static inline int tfs_js_peek(const struct tfs_jscan *s)
{
	return s->p < s->end ? *s->p : -1;
}

static inline int tfs_js_isdigit(int c)
{
	return c >= '0' && c <= '9';
}

/* Skips whitespace, then consumes `c` or fails with `what`. */
tfs_err tfs_js_expect(struct tfs_jscan *s, char c, const char *what);

/* A string at s->p (which is '"'). out points into the text when the
 * string has no escapes, else into s->tmp, which the next string
 * overwrites. */
tfs_err tfs_js_string(struct tfs_jscan *s, struct tfs_jstr *out);

/* A number: TFS_JNUM_UINT with its value when it is an integer from 0 to
 * 2^64-1, else TFS_JNUM_OTHER (checked to lie in f64 range). */
tfs_err tfs_js_number(struct tfs_jscan *s, enum tfs_jnum *kind, uint64_t *val);

tfs_err tfs_js_literal(struct tfs_jscan *s, const char *lit);

/* Consumes '{' or '[' one level deeper (refused past max_depth). */
tfs_err tfs_js_enter(struct tfs_jscan *s);
/* Just after entering: when the container closes at once, consumes the
 * closing byte, leaves the level and returns 1. */
int tfs_js_close_if_empty(struct tfs_jscan *s, char close);
/* After a member: 1 when ',' says another follows, 0 when `close` ends
 * the container (consumed), -1 on anything else (*e says what). */
int tfs_js_next(struct tfs_jscan *s, char close, tfs_err *e);
/* Checks and skips any value. */
tfs_err tfs_js_skip(struct tfs_jscan *s);

static inline int tfs_js_str_is(const struct tfs_jstr *a, const char *lit, size_t n)
{
	size_t i;
	if (a->len != n)
		return 0;
	for (i = 0; i < n && a->p[i] == lit[i]; i++)
		;
	return i == n;
}
#define TFS_JS_IS(str, lit) tfs_js_str_is((str), (lit), sizeof(lit) - 1)

#endif
