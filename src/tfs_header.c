#include "tfs_header.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tfs_hash.h"
#include "tfs_mem.h"

/* ---- dtypes ---- */

static const struct {
	const char *name;
	unsigned bits;
} dtypes[TFS_DT_COUNT] = {
	[TFS_DT_BOOL] = {"BOOL", 8},
	[TFS_DT_F4] = {"F4", 4},
	[TFS_DT_F6_E2M3] = {"F6_E2M3", 6},
	[TFS_DT_F6_E3M2] = {"F6_E3M2", 6},
	[TFS_DT_U8] = {"U8", 8},
	[TFS_DT_I8] = {"I8", 8},
	[TFS_DT_F8_E5M2] = {"F8_E5M2", 8},
	[TFS_DT_F8_E4M3] = {"F8_E4M3", 8},
	[TFS_DT_F8_E8M0] = {"F8_E8M0", 8},
	[TFS_DT_F8_E4M3FNUZ] = {"F8_E4M3FNUZ", 8},
	[TFS_DT_F8_E5M2FNUZ] = {"F8_E5M2FNUZ", 8},
	[TFS_DT_I16] = {"I16", 16},
	[TFS_DT_U16] = {"U16", 16},
	[TFS_DT_F16] = {"F16", 16},
	[TFS_DT_BF16] = {"BF16", 16},
	[TFS_DT_I32] = {"I32", 32},
	[TFS_DT_U32] = {"U32", 32},
	[TFS_DT_F32] = {"F32", 32},
	[TFS_DT_C64] = {"C64", 64},
	[TFS_DT_F64] = {"F64", 64},
	[TFS_DT_I64] = {"I64", 64},
	[TFS_DT_U64] = {"U64", 64},
};

const char *tfs_dtype_name(unsigned dt)
{
	return dt < TFS_DT_COUNT ? dtypes[dt].name : NULL;
}

unsigned tfs_dtype_bits(unsigned dt)
{
	return dt < TFS_DT_COUNT ? dtypes[dt].bits : 0;
}

unsigned tfs_dtype_lookup(const char *s, size_t len)
{
	for (unsigned i = 0; i < TFS_DT_COUNT; i++)
		if (strlen(dtypes[i].name) == len && memcmp(dtypes[i].name, s, len) == 0)
			return i;
	return TFS_DT_UNKNOWN;
}

const char *tfs_tensor_dtype(const struct tfs_header *h,
			     const struct tfs_tensor *t, size_t *len)
{
	if (t->dtype == TFS_DT_UNKNOWN) {
		*len = t->dtype_len;
		return h->arena + t->dtype_off;
	}
	*len = strlen(dtypes[t->dtype].name);
	return dtypes[t->dtype].name;
}

/* ---- UTF-8 ---- */

size_t tfs_utf8_check(const unsigned char *s, size_t n)
{
	size_t i = 0;
	while (i < n) {
		/* Headers are nearly all ASCII: test eight bytes at a time. */
		while (i + 8 <= n) {
			uint64_t w;
			memcpy(&w, s + i, 8);
			if (w & 0x8080808080808080ull)
				break;
			i += 8;
		}
		if (i >= n)
			break;
		unsigned char c = s[i];
		if (c < 0x80) {
			i++;
			continue;
		}
		size_t len;
		unsigned char lo = 0x80, hi = 0xbf;
		if (c >= 0xc2 && c <= 0xdf) {
			len = 2;
		} else if (c >= 0xe0 && c <= 0xef) {
			len = 3;
			if (c == 0xe0)
				lo = 0xa0; /* overlong */
			else if (c == 0xed)
				hi = 0x9f; /* surrogates */
		} else if (c >= 0xf0 && c <= 0xf4) {
			len = 4;
			if (c == 0xf0)
				lo = 0x90; /* overlong */
			else if (c == 0xf4)
				hi = 0x8f; /* past U+10FFFF */
		} else {
			return i;
		}
		if (n - i < len)
			return i;
		if (s[i + 1] < lo || s[i + 1] > hi)
			return i;
		for (size_t k = 2; k < len; k++)
			if ((s[i + k] & 0xc0) != 0x80)
				return i;
		i += len;
	}
	return n;
}

/* ---- the scanner ---- */

struct str {
	const char *p;
	size_t len;
};

struct sc {
	const char *doc; /* "header" or "index", for messages */
	const unsigned char *base, *p, *end;
	unsigned depth;
	unsigned flags;
	struct tfs_diag *d;
	struct tfs_header *h;
	char *tmp; /* decoded strings that had escapes */
	size_t tmpcap;
	size_t tcap, dcap, acap, mcap;
	uint32_t *slots; /* tensor index + 1, keyed by name; 0 = empty */
	size_t nslots;
};

static tfs_err jerr(struct sc *s, const char *what)
{
	if (s->p >= s->end)
		return tfs_fail(s->d, TFS_ERR_FORMAT,
				"invalid %s JSON: it ends at byte %zu, in the middle of a value",
				s->doc, (size_t)(s->end - s->base));
	return tfs_fail(s->d, TFS_ERR_FORMAT, "invalid %s JSON at byte %zu of the %s: %s",
			s->doc, (size_t)(s->p - s->base), s->doc, what);
}

static tfs_err nomem(struct sc *s)
{
	return tfs_fail(s->d, TFS_ERR_NOMEM, "out of memory while reading the header");
}

static inline void ws(struct sc *s)
{
	while (s->p < s->end &&
	       (*s->p == ' ' || *s->p == '\n' || *s->p == '\r' || *s->p == '\t'))
		s->p++;
}

static inline int peek(struct sc *s)
{
	return s->p < s->end ? *s->p : -1;
}

static tfs_err expect(struct sc *s, char c, const char *what)
{
	ws(s);
	if (peek(s) != c)
		return jerr(s, what);
	s->p++;
	return TFS_OK;
}

static tfs_err grow(void **p, size_t *cap, size_t need, size_t elem)
{
	if (need <= *cap)
		return TFS_OK;
	size_t nc = *cap ? *cap : 64;
	while (nc < need)
		nc *= 2;
	void *q = realloc(*p, nc * elem);
	if (!q)
		return TFS_ERR_NOMEM;
	*p = q;
	*cap = nc;
	return TFS_OK;
}

static int hexval(int c)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	if (c >= 'a' && c <= 'f')
		return c - 'a' + 10;
	if (c >= 'A' && c <= 'F')
		return c - 'A' + 10;
	return -1;
}

static int read_hex4(struct sc *s, unsigned *out)
{
	if (s->end - s->p < 4)
		return -1;
	unsigned v = 0;
	for (int i = 0; i < 4; i++) {
		int h = hexval(s->p[i]);
		if (h < 0)
			return -1;
		v = v << 4 | (unsigned)h;
	}
	s->p += 4;
	*out = v;
	return 0;
}

/* Reads a string at s->p (which is '"'). The result points into the header
 * when the string has no escapes, else into s->tmp, which the next string
 * overwrites. The header is already known to be valid UTF-8. */
static tfs_err scan_string(struct sc *s, struct str *out)
{
	const unsigned char *start = ++s->p;
	while (s->p < s->end) {
		unsigned char c = *s->p;
		if (c == '"') {
			out->p = (const char *)start;
			out->len = (size_t)(s->p - start);
			s->p++;
			return TFS_OK;
		}
		if (c == '\\')
			break;
		if (c < 0x20)
			return jerr(s, "raw control character inside a string");
		s->p++;
	}
	if (s->p >= s->end)
		return jerr(s, "unterminated string");

	/* Decoded text is never longer than its escaped form. */
	const unsigned char *q = s->p;
	while (q < s->end && *q != '"') {
		if (*q == '\\' && q + 1 < s->end)
			q++;
		q++;
	}
	if (grow((void **)&s->tmp, &s->tmpcap, (size_t)(q - start) + 1, 1))
		return nomem(s);
	size_t o = (size_t)(s->p - start);
	memcpy(s->tmp, start, o);
	for (;;) {
		if (s->p >= s->end)
			return jerr(s, "unterminated string");
		unsigned char c = *s->p;
		if (c == '"') {
			s->p++;
			break;
		}
		if (c < 0x20)
			return jerr(s, "raw control character inside a string");
		if (c != '\\') {
			s->tmp[o++] = (char)c;
			s->p++;
			continue;
		}
		s->p++;
		if (s->p >= s->end)
			return jerr(s, "unterminated string");
		c = *s->p++;
		switch (c) {
		case '"': s->tmp[o++] = '"'; break;
		case '\\': s->tmp[o++] = '\\'; break;
		case '/': s->tmp[o++] = '/'; break;
		case 'b': s->tmp[o++] = '\b'; break;
		case 'f': s->tmp[o++] = '\f'; break;
		case 'n': s->tmp[o++] = '\n'; break;
		case 'r': s->tmp[o++] = '\r'; break;
		case 't': s->tmp[o++] = '\t'; break;
		case 'u': {
			unsigned cp, lo;
			if (read_hex4(s, &cp))
				return jerr(s, "bad \\u escape");
			if (cp >= 0xdc00 && cp <= 0xdfff)
				return jerr(s, "lone surrogate in \\u escape");
			if (cp >= 0xd800 && cp <= 0xdbff) {
				if (s->end - s->p < 2 || s->p[0] != '\\' || s->p[1] != 'u')
					return jerr(s, "lone surrogate in \\u escape");
				s->p += 2;
				if (read_hex4(s, &lo))
					return jerr(s, "bad \\u escape");
				if (lo < 0xdc00 || lo > 0xdfff)
					return jerr(s, "lone surrogate in \\u escape");
				cp = 0x10000 + ((cp - 0xd800) << 10) + (lo - 0xdc00);
			}
			/* Every escape is at least as long as its UTF-8. */
			if (cp < 0x80) {
				s->tmp[o++] = (char)cp;
			} else if (cp < 0x800) {
				s->tmp[o++] = (char)(0xc0 | cp >> 6);
				s->tmp[o++] = (char)(0x80 | (cp & 0x3f));
			} else if (cp < 0x10000) {
				s->tmp[o++] = (char)(0xe0 | cp >> 12);
				s->tmp[o++] = (char)(0x80 | ((cp >> 6) & 0x3f));
				s->tmp[o++] = (char)(0x80 | (cp & 0x3f));
			} else {
				s->tmp[o++] = (char)(0xf0 | cp >> 18);
				s->tmp[o++] = (char)(0x80 | ((cp >> 12) & 0x3f));
				s->tmp[o++] = (char)(0x80 | ((cp >> 6) & 0x3f));
				s->tmp[o++] = (char)(0x80 | (cp & 0x3f));
			}
			break;
		}
		default:
			s->p--;
			return jerr(s, "invalid escape in string");
		}
	}
	out->p = s->tmp;
	out->len = o;
	return TFS_OK;
}

enum numkind { NUM_UINT, NUM_OTHER };

static inline int isdig(int c)
{
	return c >= '0' && c <= '9';
}

/* Scans a JSON number. Non-integers and integers that do not fit 64 bits
 * must still lie in f64 range, as serde_json refuses e.g. 1e400 even in a
 * field nobody reads. */
static tfs_err scan_number(struct sc *s, enum numkind *kind, uint64_t *val)
{
	const unsigned char *start = s->p;
	int neg = 0, fracexp = 0;
	if (peek(s) == '-') {
		neg = 1;
		s->p++;
	}
	if (!isdig(peek(s)))
		return jerr(s, "invalid number");
	if (*s->p == '0') {
		s->p++;
		if (isdig(peek(s)))
			return jerr(s, "number with a leading zero");
	} else {
		while (isdig(peek(s)))
			s->p++;
	}
	const unsigned char *int_end = s->p;
	if (peek(s) == '.') {
		s->p++;
		if (!isdig(peek(s)))
			return jerr(s, "invalid number");
		while (isdig(peek(s)))
			s->p++;
		fracexp = 1;
	}
	if (peek(s) == 'e' || peek(s) == 'E') {
		s->p++;
		if (peek(s) == '+' || peek(s) == '-')
			s->p++;
		if (!isdig(peek(s)))
			return jerr(s, "invalid number");
		while (isdig(peek(s)))
			s->p++;
		fracexp = 1;
	}
	*kind = NUM_OTHER;
	if (!fracexp) {
		const unsigned char *d = start + neg;
		uint64_t v = 0;
		int fits = 1;
		for (; d < int_end; d++) {
			unsigned dig = (unsigned)(*d - '0');
			if (v > (UINT64_MAX - dig) / 10) {
				fits = 0;
				break;
			}
			v = v * 10 + dig;
		}
		if (fits && !neg) {
			*kind = NUM_UINT;
			*val = v;
			return TFS_OK;
		}
		if (fits && neg && v <= (uint64_t)INT64_MAX + 1)
			return TFS_OK; /* an i64 */
	}
	/* An f64: check that it does not overflow to infinity. */
	size_t len = (size_t)(s->p - start);
	char small[128];
	char *buf = len < sizeof small ? small : malloc(len + 1);
	if (!buf)
		return nomem(s);
	memcpy(buf, start, len);
	buf[len] = 0;
	double x = strtod(buf, NULL);
	if (buf != small)
		free(buf);
	if (isinf(x)) {
		s->p = start;
		return jerr(s, "number out of the range of a 64-bit float");
	}
	return TFS_OK;
}

static tfs_err scan_literal(struct sc *s, const char *lit)
{
	size_t n = strlen(lit);
	if ((size_t)(s->end - s->p) < n || memcmp(s->p, lit, n) != 0)
		return jerr(s, "invalid literal");
	s->p += n;
	return TFS_OK;
}

static tfs_err enter(struct sc *s)
{
	if (++s->depth > TFS_NESTING_MAX)
		return jerr(s, "arrays and objects nested more than 127 deep");
	s->p++;
	return TFS_OK;
}

/* Just after entering an object or array: if it closes at once, consume
 * the closing byte and leave it. Returns 1 when it was empty. */
static int close_if_empty(struct sc *s, char close)
{
	ws(s);
	if (peek(s) != close)
		return 0;
	s->p++;
	s->depth--;
	return 1;
}

/* After a member: 1 when ',' says another follows, 0 when the closing byte
 * ends the container (left), -1 on anything else (*e says what). */
static int next_member(struct sc *s, char close, tfs_err *e)
{
	ws(s);
	if (peek(s) == ',') {
		s->p++;
		return 1;
	}
	if (peek(s) == close) {
		s->p++;
		s->depth--;
		return 0;
	}
	*e = jerr(s, close == '}' ? "expected ',' or '}'" : "expected ',' or ']'");
	return -1;
}

/* Checks and skips any JSON value: fields the reference ignores must still
 * be valid JSON by every rule. */
static tfs_err skip_value(struct sc *s)
{
	tfs_err e = TFS_OK;
	int r;
	struct str str;
	enum numkind k;
	uint64_t v;
	ws(s);
	switch (peek(s)) {
	case '{':
		if ((e = enter(s)))
			return e;
		if (close_if_empty(s, '}'))
			return TFS_OK;
		do {
			ws(s);
			if (peek(s) != '"')
				return jerr(s, "expected a string key");
			if ((e = scan_string(s, &str)) || (e = expect(s, ':', "expected ':'")) ||
			    (e = skip_value(s)))
				return e;
		} while ((r = next_member(s, '}', &e)) > 0);
		return r < 0 ? e : TFS_OK;
	case '[':
		if ((e = enter(s)))
			return e;
		if (close_if_empty(s, ']'))
			return TFS_OK;
		do {
			if ((e = skip_value(s)))
				return e;
		} while ((r = next_member(s, ']', &e)) > 0);
		return r < 0 ? e : TFS_OK;
	case '"':
		return scan_string(s, &str);
	case 't':
		return scan_literal(s, "true");
	case 'f':
		return scan_literal(s, "false");
	case 'n':
		return scan_literal(s, "null");
	default:
		if (peek(s) == '-' || isdig(peek(s)))
			return scan_number(s, &k, &v);
		return jerr(s, "expected a JSON value");
	}
}

/* ---- tables ---- */

static tfs_err arena_add(struct sc *s, const char *p, size_t len, uint32_t *off)
{
	struct tfs_header *h = s->h;
	/* A NUL after every entry lets names be used as C strings where the
	 * name has none inside. */
	if (grow((void **)&h->arena, &s->acap, h->arena_len + len + 1, 1))
		return nomem(s);
	memcpy(h->arena + h->arena_len, p, len);
	h->arena[h->arena_len + len] = 0;
	*off = (uint32_t)h->arena_len;
	h->arena_len += len + 1;
	return TFS_OK;
}

static tfs_err slots_grow(struct sc *s)
{
	struct tfs_header *h = s->h;
	size_t ns = s->nslots ? s->nslots * 2 : 1024;
	uint32_t *sl = calloc(ns, sizeof *sl);
	if (!sl)
		return nomem(s);
	for (uint32_t i = 0; i < h->n; i++) {
		const struct tfs_tensor *t = &h->t[i];
		size_t j = tfs_hash(h->arena + t->name_off, t->name_len, tfs_hash_seed) & (ns - 1);
		while (sl[j])
			j = (j + 1) & (ns - 1);
		sl[j] = i + 1;
	}
	free(s->slots);
	s->slots = sl;
	s->nslots = ns;
	return TFS_OK;
}

/* Adds the tensor or, when the name was seen, replaces it: the reference
 * keeps the last definition of a name. */
static tfs_err tensor_put(struct sc *s, const struct tfs_tensor *t)
{
	struct tfs_header *h = s->h;
	if ((size_t)h->n * 2 >= s->nslots && slots_grow(s))
		return nomem(s);
	const char *name = h->arena + t->name_off;
	size_t j = tfs_hash(name, t->name_len, tfs_hash_seed) & (s->nslots - 1);
	while (s->slots[j]) {
		struct tfs_tensor *o = &h->t[s->slots[j] - 1];
		if (o->name_len == t->name_len &&
		    memcmp(h->arena + o->name_off, name, t->name_len) == 0) {
			*o = *t;
			return TFS_OK;
		}
		j = (j + 1) & (s->nslots - 1);
	}
	if (h->n == UINT32_MAX || grow((void **)&h->t, &s->tcap, (size_t)h->n + 1, sizeof *h->t))
		return nomem(s);
	h->t[h->n] = *t;
	s->slots[j] = ++h->n;
	return TFS_OK;
}

static tfs_err tensor_fail(struct sc *s, const struct tfs_tensor *t,
			   const char *what)
{
	char q[160];
	if (s->p >= s->end)
		return jerr(s, what);
	tfs_quote(q, sizeof q, s->h->arena + t->name_off, t->name_len);
	return tfs_fail(s->d, TFS_ERR_FORMAT,
			"tensor %s: %s (at byte %zu of the header)", q, what,
			(size_t)(s->p - s->base));
}

static tfs_err parse_dtype(struct sc *s, struct tfs_tensor *t)
{
	tfs_err e;
	struct str str;
	ws(s);
	int map = peek(s) == '{';
	if (map) {
		/* serde also accepts an enum variant written as {"F32": null}. */
		if ((e = enter(s)))
			return e;
		ws(s);
	}
	if (peek(s) != '"')
		return tensor_fail(s, t, map ? "dtype {...} must hold one dtype name"
					      : "dtype must be a string");
	if ((e = scan_string(s, &str)))
		return e;
	t->dtype = (uint8_t)tfs_dtype_lookup(str.p, str.len);
	if (t->dtype == TFS_DT_UNKNOWN) {
		if (s->flags & TFS_PARSE_STRICT) {
			char q[96], msg[160];
			tfs_quote(q, sizeof q, str.p, str.len);
			snprintf(msg, sizeof msg, "unknown dtype %s", q);
			return tensor_fail(s, t, msg);
		}
		if ((e = arena_add(s, str.p, str.len, &t->dtype_off)))
			return e;
		t->dtype_len = (uint32_t)str.len;
	}
	if (map) {
		if ((e = expect(s, ':', "expected ':'")))
			return e;
		ws(s);
		if (peek(s) != 'n' || scan_literal(s, "null"))
			return tensor_fail(s, t, "dtype {\"NAME\": ...} must have the value null");
		ws(s);
		if (peek(s) != '}')
			return tensor_fail(s, t, "dtype {...} must hold exactly one dtype name");
		s->p++;
		s->depth--;
	}
	return TFS_OK;
}

static tfs_err parse_u64(struct sc *s, const struct tfs_tensor *t, uint64_t *v,
			 const char *field)
{
	enum numkind k;
	char msg[96];
	ws(s);
	if (peek(s) == '-' || isdig(peek(s))) {
		const unsigned char *at = s->p;
		tfs_err e = scan_number(s, &k, v);
		if (e)
			return e;
		if (k == NUM_UINT)
			return TFS_OK;
		s->p = at;
	}
	snprintf(msg, sizeof msg, "%s must hold integers from 0 to 2^64-1", field);
	return tensor_fail(s, t, msg);
}

static tfs_err parse_shape(struct sc *s, struct tfs_tensor *t)
{
	tfs_err e;
	struct tfs_header *h = s->h;
	ws(s);
	if (peek(s) != '[')
		return tensor_fail(s, t, "shape must be an array of integers");
	if ((e = enter(s)))
		return e;
	t->dims_off = (uint32_t)h->ndims;
	t->ndim = 0;
	if (close_if_empty(s, ']'))
		return TFS_OK;
	int r;
	do {
		uint64_t v;
		if ((e = parse_u64(s, t, &v, "shape")))
			return e;
		if (grow((void **)&h->dims, &s->dcap, h->ndims + 1, sizeof *h->dims))
			return nomem(s);
		h->dims[h->ndims++] = v;
		t->ndim++;
	} while ((r = next_member(s, ']', &e)) > 0);
	return r < 0 ? e : TFS_OK;
}

static tfs_err parse_offsets(struct sc *s, struct tfs_tensor *t)
{
	tfs_err e;
	ws(s);
	if (peek(s) != '[')
		return tensor_fail(s, t, "data_offsets must be an array of two integers");
	if ((e = enter(s)))
		return e;
	ws(s);
	if (peek(s) == ']')
		return tensor_fail(s, t, "data_offsets must hold exactly two integers");
	if ((e = parse_u64(s, t, &t->begin, "data_offsets")))
		return e;
	ws(s);
	if (peek(s) != ',')
		return tensor_fail(s, t, "data_offsets must hold exactly two integers");
	s->p++;
	if ((e = parse_u64(s, t, &t->end, "data_offsets")))
		return e;
	ws(s);
	if (peek(s) != ']')
		return tensor_fail(s, t, "data_offsets must hold exactly two integers");
	s->p++;
	s->depth--;
	return TFS_OK;
}

static int str_is(const struct str *a, const char *lit)
{
	size_t n = strlen(lit);
	return a->len == n && memcmp(a->p, lit, n) == 0;
}

static tfs_err parse_tensor(struct sc *s, struct tfs_tensor *t)
{
	tfs_err e;
	ws(s);
	if (peek(s) == '[') {
		/* serde reads a struct from a sequence of its fields in order. */
		if ((e = enter(s)) || (e = parse_dtype(s, t)) ||
		    (e = expect(s, ',', "expected ',' after dtype")) ||
		    (e = parse_shape(s, t)) ||
		    (e = expect(s, ',', "expected ',' after shape")) ||
		    (e = parse_offsets(s, t)))
			return e;
		ws(s);
		if (peek(s) != ']')
			return tensor_fail(s, t, "the array form must hold exactly [dtype, shape, data_offsets]");
		s->p++;
		s->depth--;
		return TFS_OK;
	}
	if (peek(s) != '{')
		return tensor_fail(s, t, "expected an object with dtype, shape and data_offsets");
	if ((e = enter(s)))
		return e;
	unsigned seen = 0;
	int r = 0;
	if (!close_if_empty(s, '}')) {
		do {
			struct str key;
			unsigned bit = 0;
			ws(s);
			if (peek(s) != '"')
				return jerr(s, "expected a string key");
			if ((e = scan_string(s, &key)))
				return e;
			if (str_is(&key, "dtype"))
				bit = 1;
			else if (str_is(&key, "shape"))
				bit = 2;
			else if (str_is(&key, "data_offsets"))
				bit = 4;
			if (seen & bit) {
				char msg[64];
				snprintf(msg, sizeof msg, "field '%s' appears twice",
					 bit == 1 ? "dtype" : bit == 2 ? "shape" : "data_offsets");
				return tensor_fail(s, t, msg);
			}
			seen |= bit;
			if ((e = expect(s, ':', "expected ':'")))
				return e;
			if (bit == 1)
				e = parse_dtype(s, t);
			else if (bit == 2)
				e = parse_shape(s, t);
			else if (bit == 4)
				e = parse_offsets(s, t);
			else
				e = skip_value(s);
			if (e)
				return e;
		} while ((r = next_member(s, '}', &e)) > 0);
		if (r < 0)
			return e;
	}
	if (!(seen & 1))
		return tensor_fail(s, t, "missing field 'dtype'");
	if (!(seen & 2))
		return tensor_fail(s, t, "missing field 'shape'");
	if (!(seen & 4))
		return tensor_fail(s, t, "missing field 'data_offsets'");
	return TFS_OK;
}

static tfs_err parse_metadata(struct sc *s)
{
	tfs_err e;
	struct tfs_header *h = s->h;
	ws(s);
	if (peek(s) == 'n')
		return scan_literal(s, "null");
	if (peek(s) != '{')
		return jerr(s, "__metadata__ must be an object of strings, or null");
	if ((e = enter(s)))
		return e;
	h->has_metadata = true;
	if (close_if_empty(s, '}'))
		return TFS_OK;
	int r;
	do {
		struct str str;
		struct tfs_meta_pair mp;
		ws(s);
		if (peek(s) != '"')
			return jerr(s, "expected a string key");
		if ((e = scan_string(s, &str)) ||
		    (e = arena_add(s, str.p, str.len, &mp.key_off)))
			return e;
		mp.key_len = (uint32_t)str.len;
		if ((e = expect(s, ':', "expected ':'")))
			return e;
		ws(s);
		if (peek(s) != '"')
			return jerr(s, "__metadata__ values must be strings");
		if ((e = scan_string(s, &str)) ||
		    (e = arena_add(s, str.p, str.len, &mp.val_off)))
			return e;
		mp.val_len = (uint32_t)str.len;
		if (grow((void **)&h->meta, &s->mcap, (size_t)h->nmeta + 1, sizeof *h->meta))
			return nomem(s);
		h->meta[h->nmeta++] = mp;
	} while ((r = next_member(s, '}', &e)) > 0);
	return r < 0 ? e : TFS_OK;
}

/* Duplicate metadata keys: the last value wins, at the first key's place. */
static tfs_err metadata_dedupe(struct sc *s)
{
	struct tfs_header *h = s->h;
	if (h->nmeta < 2)
		return TFS_OK;
	size_t ns = 16;
	while (ns < (size_t)h->nmeta * 2)
		ns *= 2;
	uint32_t *sl = calloc(ns, sizeof *sl);
	if (!sl)
		return nomem(s);
	uint32_t out = 0;
	for (uint32_t i = 0; i < h->nmeta; i++) {
		struct tfs_meta_pair *m = &h->meta[i];
		const char *k = h->arena + m->key_off;
		size_t j = tfs_hash(k, m->key_len, tfs_hash_seed) & (ns - 1);
		for (;;) {
			if (!sl[j]) {
				h->meta[out] = *m;
				sl[j] = ++out;
				break;
			}
			struct tfs_meta_pair *o = &h->meta[sl[j] - 1];
			if (o->key_len == m->key_len &&
			    memcmp(h->arena + o->key_off, k, m->key_len) == 0) {
				o->val_off = m->val_off;
				o->val_len = m->val_len;
				break;
			}
			j = (j + 1) & (ns - 1);
		}
	}
	free(sl);
	h->nmeta = out;
	return TFS_OK;
}

static tfs_err parse_top(struct sc *s)
{
	tfs_err e;
	int seen_meta = 0;
	ws(s);
	if (peek(s) != '{')
		return jerr(s, "the header must be a JSON object");
	if ((e = enter(s)))
		return e;
	int r = 0;
	if (!close_if_empty(s, '}')) {
		do {
			struct str key;
			ws(s);
			if (peek(s) != '"')
				return jerr(s, "expected a string key");
			if ((e = scan_string(s, &key)))
				return e;
			if (str_is(&key, "__metadata__")) {
				if (seen_meta)
					return jerr(s, "__metadata__ appears twice");
				seen_meta = 1;
				if ((e = expect(s, ':', "expected ':'")) || (e = parse_metadata(s)))
					return e;
			} else {
				struct tfs_tensor t;
				memset(&t, 0, sizeof t);
				if (key.len > UINT32_MAX)
					return nomem(s);
				if ((e = arena_add(s, key.p, key.len, &t.name_off)))
					return e;
				t.name_len = (uint32_t)key.len;
				if ((e = expect(s, ':', "expected ':'")) ||
				    (e = parse_tensor(s, &t)) || (e = tensor_put(s, &t)))
					return e;
			}
		} while ((r = next_member(s, '}', &e)) > 0);
		if (r < 0)
			return e;
	}
	ws(s);
	if (s->p != s->end)
		return jerr(s, "unexpected bytes after the JSON object (only spaces, tabs and newlines may pad the header)");
	return TFS_OK;
}

/* ---- validation ---- */

struct span {
	uint64_t begin, end;
	uint32_t i;
};

static int span_cmp(const void *a, const void *b)
{
	const struct span *x = a, *y = b;
	if (x->begin != y->begin)
		return x->begin < y->begin ? -1 : 1;
	if (x->end != y->end)
		return x->end < y->end ? -1 : 1;
	return x->i < y->i ? -1 : x->i > y->i;
}

static void fmt_shape(char *out, size_t sz, const uint64_t *dims, uint32_t ndim)
{
	size_t o = 0;
	o += (size_t)snprintf(out + o, sz - o, "[");
	for (uint32_t i = 0; i < ndim && o < sz; i++) {
		if (o + 30 > sz) {
			snprintf(out + o, sz - o, "...");
			o = strlen(out);
			break;
		}
		o += (size_t)snprintf(out + o, sz - o, "%s%llu", i ? "," : "",
				      (unsigned long long)dims[i]);
	}
	if (o < sz)
		snprintf(out + o, sz - o, "]");
}

static tfs_err vfail_tensor(struct sc *s, const struct tfs_tensor *t,
			    const char *fmt, ...) __attribute__((format(printf, 3, 4)));

static tfs_err vfail_tensor(struct sc *s, const struct tfs_tensor *t,
			    const char *fmt, ...)
{
	char q[160], rest[400];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(rest, sizeof rest, fmt, ap);
	va_end(ap);
	tfs_quote(q, sizeof q, s->h->arena + t->name_off, t->name_len);
	return tfs_fail(s->d, TFS_ERR_FORMAT, "tensor %s: %s", q, rest);
}

static tfs_err validate(struct sc *s, const struct tfs_parse_opts *opts)
{
	struct tfs_header *h = s->h;
	struct span *sp = NULL;
	tfs_err e = TFS_OK;
	uint64_t start = 0;
	const struct tfs_tensor *prev = NULL;

	if (h->n) {
		sp = malloc((size_t)h->n * sizeof *sp);
		if (!sp)
			return nomem(s);
	}
	for (uint32_t i = 0; i < h->n; i++) {
		sp[i].begin = h->t[i].begin;
		sp[i].end = h->t[i].end;
		sp[i].i = i;
	}
	if (h->n)
		qsort(sp, h->n, sizeof *sp, span_cmp);

	for (uint32_t k = 0; k < h->n; k++) {
		const struct tfs_tensor *t = &h->t[sp[k].i];
		unsigned long long b = t->begin, en = t->end;
		if (t->end < t->begin) {
			e = vfail_tensor(s, t, "data_offsets [%llu,%llu] end before they begin", b, en);
			goto out;
		}
		if (t->begin > start) {
			e = vfail_tensor(s, t,
					 "data_offsets [%llu,%llu] leave a gap: bytes %llu to %llu of the data belong to no tensor",
					 b, en, (unsigned long long)start, b);
			goto out;
		}
		if (t->begin < start) {
			char q[160];
			tfs_quote(q, sizeof q, h->arena + prev->name_off, prev->name_len);
			e = vfail_tensor(s, t, "data_offsets [%llu,%llu] overlap tensor %s at [%llu,%llu]",
					 b, en, q, (unsigned long long)prev->begin,
					 (unsigned long long)prev->end);
			goto out;
		}
		start = t->end;
		prev = t;

		char shp[200];
		const uint64_t *dims = t->ndim ? h->dims + t->dims_off : NULL;
		if (t->dtype == TFS_DT_UNKNOWN) {
			if (opts && opts->warn) {
				char q[160], dq[80], msg[TFS_DIAG_MAX];
				tfs_quote(q, sizeof q, h->arena + t->name_off, t->name_len);
				tfs_quote(dq, sizeof dq, h->arena + t->dtype_off, t->dtype_len);
				snprintf(msg, sizeof msg,
					 "tensor %s: unknown dtype %s, passed through without a size check (-o strict refuses it)",
					 q, dq);
				opts->warn(opts->warn_ctx, msg);
			}
			continue;
		}
		uint64_t elems = 1;
		for (uint32_t d = 0; d < t->ndim; d++) {
			if (dims[d] && elems > UINT64_MAX / dims[d]) {
				fmt_shape(shp, sizeof shp, dims, t->ndim);
				e = vfail_tensor(s, t, "shape %s has more elements than fit in 64 bits", shp);
				goto out;
			}
			elems *= dims[d];
		}
		unsigned bits = dtypes[t->dtype].bits;
		if (elems > UINT64_MAX / bits) {
			fmt_shape(shp, sizeof shp, dims, t->ndim);
			e = vfail_tensor(s, t, "%s %s has more bits than fit in 64 bits",
					 dtypes[t->dtype].name, shp);
			goto out;
		}
		uint64_t nbits = elems * bits;
		if (nbits % 8) {
			fmt_shape(shp, sizeof shp, dims, t->ndim);
			e = vfail_tensor(s, t, "%s %s is %llu bits, not a whole number of bytes",
					 dtypes[t->dtype].name, shp, (unsigned long long)nbits);
			goto out;
		}
		if (t->end - t->begin != nbits / 8) {
			fmt_shape(shp, sizeof shp, dims, t->ndim);
			e = vfail_tensor(s, t, "data_offsets [%llu,%llu] hold %llu bytes but %s %s needs %llu",
					 b, en, (unsigned long long)(t->end - t->begin),
					 dtypes[t->dtype].name, shp, (unsigned long long)(nbits / 8));
			goto out;
		}
	}

	uint64_t data_len = h->file_size - h->data_start;
	if (start > data_len) {
		e = tfs_fail(s->d, TFS_ERR_FORMAT,
			     "truncated file: the tensors need %llu bytes of data after the header but the file has %llu (%llu bytes missing; an incomplete download?)",
			     (unsigned long long)start, (unsigned long long)data_len,
			     (unsigned long long)(start - data_len));
	} else if (start < data_len) {
		e = tfs_fail(s->d, TFS_ERR_FORMAT,
			     "%llu unexpected bytes after the last tensor: the data should end at byte %llu of the file, which has %llu",
			     (unsigned long long)(data_len - start),
			     (unsigned long long)(h->data_start + start),
			     (unsigned long long)h->file_size);
	}
out:
	free(sp);
	return e;
}

void tfs_header_free(struct tfs_header *h)
{
	if (!h)
		return;
	free(h->t);
	free(h->arena);
	free(h->dims);
	free(h->meta);
	memset(h, 0, sizeof *h);
}

tfs_err tfs_header_parse(const unsigned char *hdr, size_t n, uint64_t file_size,
			 const struct tfs_parse_opts *opts,
			 struct tfs_header *out, struct tfs_diag *d)
{
	struct sc s;
	tfs_err e;
	size_t bad;

	memset(out, 0, sizeof *out);
	memset(&s, 0, sizeof s);
	out->header_len = n;
	out->data_start = 8 + (uint64_t)n;
	out->file_size = file_size;
	if (n > TFS_HEADER_MAX || file_size < out->data_start)
		return tfs_fail(d, TFS_ERR_INVAL, "header length out of range");

	bad = tfs_utf8_check(hdr, n);
	if (bad != n)
		return tfs_fail(d, TFS_ERR_FORMAT,
				"the header is not valid UTF-8 (bad byte 0x%02x at byte %zu of the header)",
				hdr[bad], bad);

	s.doc = "header";
	s.base = s.p = hdr;
	s.end = hdr + n;
	/* Upper bounds from the header's length, so the tables never move:
	 * decoded text is never longer than the header, a tensor takes at
	 * least 19 bytes of JSON ("":["F4",[],[0,0]],), a dimension at least
	 * 2. Pages never touched cost nothing; grow() still copes if a bound
	 * were ever wrong. */
	if (n >= (1u << 20)) {
		s.acap = n + 1;
		s.tcap = n / 19 + 1;
		s.dcap = n / 2 + 1;
		out->arena = malloc(s.acap);
		out->t = malloc(s.tcap * sizeof *out->t);
		out->dims = malloc(s.dcap * sizeof *out->dims);
		if (!out->arena || !out->t || !out->dims) {
			tfs_header_free(out);
			return tfs_fail(d, TFS_ERR_NOMEM, "out of memory for a %zu-byte header", n);
		}
		tfs_advise_huge(out->arena, s.acap);
		tfs_advise_huge(out->t, s.tcap * sizeof *out->t);
		tfs_advise_huge(out->dims, s.dcap * sizeof *out->dims);
	}
	s.d = d;
	s.h = out;
	s.flags = opts ? opts->flags : 0;
	e = parse_top(&s);
	if (!e)
		e = metadata_dedupe(&s);
	if (!e)
		e = validate(&s, opts);
	if (!e) {
		for (uint32_t i = 0; i < out->n; i++)
			out->unknown_dtypes += out->t[i].dtype == TFS_DT_UNKNOWN;
	}
	free(s.tmp);
	free(s.slots);
	if (e)
		tfs_header_free(out);
	return e;
}

/* ---- shard index files ---- */

static tfs_err scan_weight_map(struct sc *s, const struct tfs_index_cb *cb)
{
	tfs_err e;
	ws(s);
	if (peek(s) != '{')
		return tfs_fail(s->d, TFS_ERR_FORMAT, "not a safetensors index: \"weight_map\" is not an object");
	if ((e = enter(s)))
		return e;
	if (close_if_empty(s, '}'))
		return TFS_OK;
	/* The name is decoded into s->tmp, which the shard's decoding would
	 * overwrite: keep a copy when it had escapes. */
	char *keep = NULL;
	size_t keepcap = 0;
	int r;
	do {
		struct str name, shard;
		ws(s);
		if (peek(s) != '"') {
			e = jerr(s, "expected a string key");
			break;
		}
		if ((e = scan_string(s, &name)))
			break;
		if (name.p == s->tmp) {
			if (grow((void **)&keep, &keepcap, name.len + 1, 1)) {
				e = nomem(s);
				break;
			}
			memcpy(keep, name.p, name.len);
			name.p = keep;
		}
		if ((e = expect(s, ':', "expected ':'")))
			break;
		ws(s);
		if (peek(s) != '"') {
			char q[160], msg[256];
			tfs_quote(q, sizeof q, name.p, name.len);
			snprintf(msg, sizeof msg, "weight_map entry %s is not a shard file name", q);
			e = tfs_fail(s->d, TFS_ERR_FORMAT, "%s", msg);
			break;
		}
		if ((e = scan_string(s, &shard)) ||
		    (e = cb->entry(cb->ctx, name.p, name.len, shard.p, shard.len, s->d)))
			break;
	} while ((r = next_member(s, '}', &e)) > 0);
	free(keep);
	return e;
}

tfs_err tfs_index_scan(const char *text, size_t n, const struct tfs_index_cb *cb,
		       struct tfs_diag *d)
{
	struct sc s;
	tfs_err e = TFS_OK;
	int seen_wm = 0;
	size_t bad = tfs_utf8_check((const unsigned char *)text, n);
	if (bad != n)
		return tfs_fail(d, TFS_ERR_FORMAT, "the index is not valid UTF-8 (at byte %zu)", bad);
	memset(&s, 0, sizeof s);
	s.doc = "index";
	s.base = s.p = (const unsigned char *)text;
	s.end = s.base + n;
	s.d = d;
	ws(&s);
	if (peek(&s) != '{') {
		e = jerr(&s, "the index must be a JSON object");
		goto out;
	}
	if ((e = enter(&s)))
		goto out;
	int r = 0;
	if (!close_if_empty(&s, '}')) {
		do {
			struct str key;
			char *kcopy;
			ws(&s);
			if (peek(&s) != '"') {
				e = jerr(&s, "expected a string key");
				goto out;
			}
			if ((e = scan_string(&s, &key)) || (e = expect(&s, ':', "expected ':'")))
				goto out;
			if (str_is(&key, "weight_map")) {
				if (seen_wm++) {
					e = tfs_fail(d, TFS_ERR_FORMAT, "the index has two \"weight_map\" members");
					goto out;
				}
				if ((e = scan_weight_map(&s, cb)))
					goto out;
			} else {
				kcopy = malloc(key.len + 1);
				if (!kcopy) {
					e = nomem(&s);
					goto out;
				}
				memcpy(kcopy, key.p, key.len);
				kcopy[key.len] = 0;
				ws(&s);
				const unsigned char *v = s.p;
				e = skip_value(&s);
				if (!e)
					e = cb->other(cb->ctx, kcopy, key.len, (const char *)v, (size_t)(s.p - v), d);
				free(kcopy);
				if (e)
					goto out;
			}
		} while ((r = next_member(&s, '}', &e)) > 0);
		if (r < 0)
			goto out;
	}
	ws(&s);
	if (s.p != s.end) {
		e = jerr(&s, "unexpected text after the object");
		goto out;
	}
	if (!seen_wm)
		e = tfs_fail(d, TFS_ERR_FORMAT, "not a safetensors index: no \"weight_map\" object");
out:
	free(s.tmp);
	return e;
}

/* ---- reading from a source ---- */

static int starts_with_ci(const unsigned char *p, size_t n, const char *lit)
{
	size_t k = strlen(lit);
	if (n < k)
		return 0;
	for (size_t i = 0; i < k; i++) {
		unsigned char c = p[i];
		if (c >= 'A' && c <= 'Z')
			c = (unsigned char)(c + 32);
		if (c != (unsigned char)lit[i])
			return 0;
	}
	return 1;
}

/* Says what a file that is not safetensors most likely is. */
static const char *sniff(const unsigned char *p, size_t n)
{
	size_t i = 0;
	if (n >= 23 && memcmp(p, "version https://git-lfs", 23) == 0)
		return "this is a Git LFS pointer, not the file itself: fetch the real file (git lfs pull)";
	if (n >= 4 && memcmp(p, "GGUF", 4) == 0)
		return "this is a GGUF file, not safetensors";
	if (n >= 4 && memcmp(p, "PK\x03\x04", 4) == 0)
		return "this is a zip archive (a PyTorch .bin/.pt checkpoint?), not safetensors";
	if (n >= 2 && p[0] == 0x80 && p[1] >= 2 && p[1] <= 5)
		return "this is a Python pickle (a PyTorch checkpoint?), not safetensors";
	while (i < n && (p[i] == ' ' || p[i] == '\t' || p[i] == '\n' || p[i] == '\r'))
		i++;
	if (starts_with_ci(p + i, n - i, "<!doctype html") ||
	    starts_with_ci(p + i, n - i, "<html") || starts_with_ci(p + i, n - i, "<head") ||
	    starts_with_ci(p + i, n - i, "<?xml"))
		return "this is an HTML or XML page (a failed download or an error page?), not safetensors";
	if (i < n && (p[i] == '{' || p[i] == '['))
		return "this is a JSON text file, not safetensors (pass the .safetensors file, not an index or config)";
	/* A real length prefix has zero high bytes; eight printable bytes
	 * mean text. */
	if (n >= 8) {
		size_t k = 0;
		while (k < 8 && ((p[k] >= 0x20 && p[k] < 0x7f) || p[k] == '\n' || p[k] == '\t' ||
				 p[k] == '\r' || p[k] >= 0x80))
			k++;
		if (k == 8)
			return "this is a text file, not safetensors";
	}
	return NULL;
}

tfs_err tfs_header_read(struct tfs_source *src, const struct tfs_parse_opts *opts,
			struct tfs_header *out, struct tfs_diag *d)
{
	unsigned char head[512];
	uint64_t size = src->id.size, n;
	size_t got = size < sizeof head ? (size_t)size : sizeof head;
	tfs_err e;

	memset(out, 0, sizeof *out);
	if (size == 0)
		return tfs_fail(d, TFS_ERR_FORMAT, "the file is empty");
	e = tfs_source_pread(src, head, got, 0);
	if (e == TFS_ERR_SHORT)
		return tfs_fail(d, TFS_ERR_IO, "the file shrank while being read");
	if (e)
		return tfs_fail(d, e, "read error: %s", tfs_err_str(e));
	const char *what = sniff(head, got);
	if (size < 8)
		return tfs_fail(d, TFS_ERR_FORMAT,
				"%s", what ? what : "the file is too short (under 8 bytes) to be safetensors");
	n = 0;
	for (int i = 7; i >= 0; i--)
		n = n << 8 | head[i];
	if (n > TFS_HEADER_MAX) {
		if (what)
			return tfs_fail(d, TFS_ERR_FORMAT, "%s", what);
		return tfs_fail(d, TFS_ERR_FORMAT,
				"the header length %llu is over the 100000000-byte limit (not a safetensors file?)",
				(unsigned long long)n);
	}
	if (n > size - 8)
		return tfs_fail(d, TFS_ERR_FORMAT,
				"truncated file: the header length says %llu bytes but only %llu follow the 8-byte prefix (an incomplete download?)",
				(unsigned long long)n, (unsigned long long)(size - 8));
	unsigned char *buf = malloc((size_t)n + 1);
	if (!buf)
		return tfs_fail(d, TFS_ERR_NOMEM, "out of memory for a %llu-byte header",
				(unsigned long long)n);
	tfs_advise_huge(buf, (size_t)n + 1);
	e = tfs_source_pread(src, buf, (size_t)n, 8);
	if (e) {
		free(buf);
		if (e == TFS_ERR_SHORT)
			return tfs_fail(d, TFS_ERR_IO, "the file shrank while being read");
		return tfs_fail(d, e, "read error: %s", tfs_err_str(e));
	}
	buf[n] = 0;
	e = tfs_header_parse(buf, (size_t)n, size, opts, out, d);
	free(buf);
	return e;
}
