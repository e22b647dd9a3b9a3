#include "model/edits.h"

#include <errno.h>
#include <fcntl.h>
#include <json-c/json.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/jscan.h"
#include "core/json.h"
#include "core/kv.h"
#include "core/userfile.h"

/* A key as messages show it: quoted, escaped, cut short (a key may hold
 * a newline; a message is one line). */
struct qbuf {
	char s[120];
};
static struct qbuf quoted(const char *k)
{
	struct qbuf q;
	tfs_quote(q.s, sizeof q.s, k, strlen(k));
	return q;
}
#define Q(k) (quoted(k).s)

/* An edits file is a few keys; a chat template is kilobytes. A bound keeps
 * a wrong path (a model!) from being read whole. */
#define EDITS_MAX (16u << 20)

struct tfs_edits {
	char *path; /* as messages show it */
	json_object *obj;
};

void tfs_edits_free(struct tfs_edits *ed)
{
	if (!ed)
		return;
	json_object_put(ed->obj);
	free(ed->path);
	free(ed);
}

static char *read_all(const char *path, size_t *len, struct tfs_diag *d, tfs_err *e)
{
	char *buf;
	*e = tfs_file_read("-o edits", path, EDITS_MAX, &buf, len, d);
	if (*e && *e != TFS_ERR_NOMEM)
		*e = TFS_ERR_INVAL; /* the user's own file: a usage error */
	return *e ? NULL : buf;
}

/* Whether an array's elements are all of one plain kind. */
static int plain_array_ok(json_object *a)
{
	size_t n = json_object_array_length(a);
	for (size_t i = 0; i < n; i++) {
		json_object *v = json_object_array_get_idx(a, i);
		enum json_type t = json_object_get_type(v);
		if (t == json_type_object || t == json_type_array || t == json_type_null)
			return 0;
	}
	return 1;
}

/* The file's own shape; what each value means for a table is checked when
 * applied. */
static tfs_err check_value(const char *path, const char *key, json_object *v, struct tfs_diag *d)
{
	if (!*key)
		return tfs_fail(d, TFS_ERR_INVAL, "-o edits=%s: an empty key", path);
	if (json_object_is_type(v, json_type_array) && !plain_array_ok(v))
		return tfs_fail(d, TFS_ERR_INVAL,
				"-o edits=%s: key %s: an array may hold only strings, numbers or booleans",
				path, Q(key));
	if (!json_object_is_type(v, json_type_object))
		return TFS_OK;
	json_object *ty, *val, *el;
	if (!json_object_object_get_ex(v, "type", &ty) || !json_object_is_type(ty, json_type_string) ||
	    !json_object_object_get_ex(v, "value", &val))
		return tfs_fail(d, TFS_ERR_INVAL,
				"-o edits=%s: key %s: an object must be {\"type\": T, \"value\": V}", path,
				Q(key));
	uint32_t t = tfs_kv_type_lookup(json_object_get_string(ty));
	if (t == TFS_KV_COUNT)
		return tfs_fail(d, TFS_ERR_INVAL, "-o edits=%s: key %s: unknown type %s", path, Q(key),
				Q(json_object_get_string(ty)));
	json_object_object_foreach(v, k, unused)
	{
		(void)unused;
		if (strcmp(k, "type") && strcmp(k, "value") && strcmp(k, "element_type"))
			return tfs_fail(d, TFS_ERR_INVAL, "-o edits=%s: key %s: unknown member %s", path,
					Q(key), Q(k));
	}
	if (t != TFS_KV_ARR)
		return TFS_OK;
	if (!json_object_object_get_ex(v, "element_type", &el) ||
	    !json_object_is_type(el, json_type_string) ||
	    tfs_kv_type_lookup(json_object_get_string(el)) >= TFS_KV_COUNT ||
	    tfs_kv_type_lookup(json_object_get_string(el)) == TFS_KV_ARR)
		return tfs_fail(d, TFS_ERR_INVAL,
				"-o edits=%s: key %s: an ARRAY needs an element_type that is not ARRAY", path,
				Q(key));
	if (!json_object_is_type(val, json_type_array) || !plain_array_ok(val))
		return tfs_fail(d, TFS_ERR_INVAL,
				"-o edits=%s: key %s: an ARRAY's value must be an array of plain values",
				path, Q(key));
	return TFS_OK;
}

/* ---- what json-c would change without a word ---- */

/* json-c saturates an integer past 64 bits (18446744073709551616 reads as
 * 18446744073709551615), cuts a key at U+0000, and takes bytes that are
 * not UTF-8 and lone surrogates (then U+FFFD); none of these may reach a
 * table. So the file's own text is walked first, strictly (core/jscan.h:
 * UTF-8, no lone surrogates, numbers within f64's range), and each of
 * them refused with the key it is in. */
struct strict {
	struct tfs_jscan s;
	const char *path;
	char key[120]; /* the top-level key being read, quoted */
	struct tfs_diag *d;
};

#define INT_RANGE "a 64-bit integer is -9223372036854775808 to 18446744073709551615"

/* An integer literal (no fraction, no exponent) that fits 64 bits, signed
 * or not; 1 for any other number. */
static int int_fits(const unsigned char *p, size_t n)
{
	int neg = n && *p == '-';
	uint64_t v = 0;
	for (size_t i = (size_t)neg; i < n; i++) {
		if (p[i] < '0' || p[i] > '9')
			return 1; /* a fraction or an exponent: a double */
		unsigned dig = (unsigned)(p[i] - '0');
		if (v > (UINT64_MAX - dig) / 10)
			return 0;
		v = v * 10 + dig;
	}
	return !neg || v <= (uint64_t)INT64_MAX + 1;
}

static tfs_err strict_fail(struct strict *x, const char *what)
{
	return tfs_fail(x->d, TFS_ERR_INVAL, "-o edits=%s: key %s: %s", x->path, x->key, what);
}

static tfs_err strict_value(struct strict *x)
{
	struct tfs_jscan *s = &x->s;
	tfs_err e = TFS_OK;
	int r;
	struct tfs_jstr str;
	tfs_js_ws(s);
	int c = tfs_js_peek(s);
	if (c == '{' || c == '[') {
		if ((e = tfs_js_enter(s)))
			return e;
		if (tfs_js_close_if_empty(s, c == '{' ? '}' : ']'))
			return TFS_OK;
		do {
			if (c == '{') {
				tfs_js_ws(s);
				if (tfs_js_peek(s) != '"')
					return tfs_js_err(s, "expected a string key");
				if ((e = tfs_js_string(s, &str)))
					return e;
				if (memchr(str.p, 0, str.len))
					return strict_fail(
						x,
						"a member's name holds U+0000 (NUL), which cannot be kept");
				if ((e = tfs_js_expect(s, ':', "expected ':'")))
					return e;
			}
			if ((e = strict_value(x)))
				return e;
		} while ((r = tfs_js_next(s, c == '{' ? '}' : ']', &e)) > 0);
		return r < 0 ? e : TFS_OK;
	}
	if (c == '"') {
		if ((e = tfs_js_string(s, &str)))
			return e;
		return memchr(str.p, 0, str.len)
			       ? strict_fail(x, "a string holds U+0000 (NUL), which cannot be kept")
			       : TFS_OK;
	}
	if (c == '-' || tfs_js_isdigit(c)) {
		const unsigned char *start = s->p;
		enum tfs_jnum k;
		uint64_t v;
		if ((e = tfs_js_number(s, &k, &v)))
			return e;
		size_t n = (size_t)(s->p - start);
		if (int_fits(start, n))
			return TFS_OK;
		char what[160];
		snprintf(what, sizeof what, "%.*s%s is out of range (" INT_RANGE ")", n > 40 ? 40 : (int)n,
			 (const char *)start, n > 40 ? "..." : "");
		return strict_fail(x, what);
	}
	return tfs_js_skip(s);
}

static tfs_err strict_text(const char *text, size_t len, const char *path, struct tfs_diag *d)
{
	size_t bad = tfs_utf8_check((const unsigned char *)text, len);
	if (bad != len)
		return tfs_fail(
			d, TFS_ERR_INVAL,
			"-o edits=%s: byte %zu is not UTF-8 text (an edits file is UTF-8, as JSON is)", path,
			bad);
	struct strict x = {.path = path, .d = d};
	struct tfs_jscan *s = &x.s;
	struct tfs_jstr key;
	tfs_err e = TFS_OK;
	int r;
	tfs_js_init(s, "edits", text, len, 16, d);
	if ((e = tfs_js_enter(s)) || tfs_js_close_if_empty(s, '}')) {
		tfs_js_done(s);
		return e;
	}
	do {
		tfs_js_ws(s);
		if (tfs_js_peek(s) != '"') {
			e = tfs_js_err(s, "expected a string key");
			break;
		}
		if ((e = tfs_js_string(s, &key)))
			break;
		tfs_quote(x.key, sizeof x.key, key.p, key.len);
		if (memchr(key.p, 0, key.len)) {
			e = strict_fail(&x, "the key holds U+0000 (NUL), which cannot be kept");
			break;
		}
		if ((e = tfs_js_expect(s, ':', "expected ':'")) || (e = strict_value(&x)))
			break;
	} while ((r = tfs_js_next(s, '}', &e)) > 0);
	tfs_js_done(s);
	if (e && e != TFS_ERR_INVAL && e != TFS_ERR_NOMEM) {
		/* jscan's own refusal (a lone surrogate, a number past f64's
		 * range): a mistake in the file, as the others. */
		char msg[TFS_DIAG_MAX];
		snprintf(msg, sizeof msg, "%s", d->msg);
		e = tfs_fail(d, TFS_ERR_INVAL, "-o edits=%s: %s", path, msg);
	}
	return e;
}

tfs_err tfs_edits_load(const char *path, struct tfs_edits **out, struct tfs_diag *d)
{
	size_t len = 0;
	tfs_err e;
	char *text = read_all(path, &len, d, &e);
	if (!text)
		return e;
	e = tfs_edits_parse(text, len, path, out, d);
	free(text);
	return e;
}

tfs_err tfs_edits_parse(const char *text, size_t len, const char *file, struct tfs_edits **out,
			struct tfs_diag *d)
{
	char qp[TFS_QPATH_MAX];
	const char *path = tfs_quote_path(qp, sizeof qp, file); /* as messages show it */
	tfs_err e = TFS_OK;
	if (len > EDITS_MAX)
		return tfs_fail(d, TFS_ERR_INVAL, "-o edits=%s: an edits file is at most %u MiB", path,
				EDITS_MAX >> 20);
	json_tokener *tok = json_tokener_new_ex(16);
	json_object *obj = NULL;
	if (!tok)
		return tfs_fail(d, TFS_ERR_NOMEM, "out of memory");
	json_tokener_set_flags(tok, JSON_TOKENER_STRICT);
	obj = json_tokener_parse_ex(tok, text, (int)len);
	enum json_tokener_error je = json_tokener_get_error(tok);
	size_t used = json_tokener_get_parse_end(tok);
	json_tokener_free(tok);
	while (obj && used < len &&
	       (text[used] == ' ' || text[used] == '\n' || text[used] == '\t' || text[used] == '\r'))
		used++;
	if (!obj || je != json_tokener_success || used != len) {
		e = tfs_fail(d, TFS_ERR_INVAL, "-o edits=%s: not JSON (%s, near byte %zu)", path,
			     obj && je == json_tokener_success ? "text after the object"
			     : je == json_tokener_continue     ? "it ends before the JSON does"
							       : json_tokener_error_desc(je),
			     used);
	} else if (!json_object_is_type(obj, json_type_object)) {
		e = tfs_fail(d, TFS_ERR_INVAL,
			     "-o edits=%s: must be a JSON object of keys to set (null deletes)", path);
	} else if (!(e = strict_text(text, len, path, d))) {
		json_object_object_foreach(obj, k, v)
		{
			if ((e = check_value(path, k, v, d)))
				break;
		}
	}
	struct tfs_edits *ed = e ? NULL : calloc(1, sizeof *ed);
	if (!e && (!ed || !(ed->path = strdup(path))))
		e = tfs_fail(d, TFS_ERR_NOMEM, "out of memory");
	if (e) {
		json_object_put(obj);
		free(ed);
		return e;
	}
	ed->obj = obj;
	*out = ed;
	return TFS_OK;
}

/* ---- typed metadata ---- */

struct enc {
	char *b;
	size_t n, cap;
};

static tfs_err put_le(struct enc *o, uint64_t v, unsigned bytes)
{
	unsigned char tmp[8];
	for (unsigned i = 0; i < bytes; i++)
		tmp[i] = (unsigned char)(v >> (8 * i));
	return tfs_json_put(&o->b, &o->n, &o->cap, (const char *)tmp, bytes);
}

static tfs_err put_string(struct enc *o, const char *s, size_t len)
{
	tfs_err e = put_le(o, len, 8);
	return e ? e : tfs_json_put(&o->b, &o->n, &o->cap, s, len);
}

/* The natural type of a plain value for a key the file does not have:
 * gguf-py's (a string STRING, a bool BOOL, an integer INT32, or INT64 /
 * UINT64 when it does not fit, a number FLOAT32), and UINT32 for
 * general.alignment, the one type ggml's reader accepts for it. */
static uint32_t natural(const char *key, json_object *v)
{
	switch (json_object_get_type(v)) {
	case json_type_string:
		return TFS_KV_STR;
	case json_type_boolean:
		return TFS_KV_BOOL;
	case json_type_double:
		return TFS_KV_F32;
	case json_type_int: {
		if (strcmp(key, "general.alignment") == 0)
			return TFS_KV_U32;
		int64_t i = json_object_get_int64(v);
		if (i == INT64_MAX && json_object_get_uint64(v) > (uint64_t)INT64_MAX)
			return TFS_KV_U64;
		return i >= INT32_MIN && i <= INT32_MAX ? TFS_KV_I32 : TFS_KV_I64;
	}
	default:
		return TFS_KV_COUNT;
	}
}

/* An array's natural element type: every element's, widened (INT32 to
 * INT64, any number among integers to FLOAT32); TFS_KV_COUNT when they
 * are of different kinds or there are none. */
static uint32_t natural_elem(const char *key, json_object *a)
{
	size_t n = json_object_array_length(a);
	uint32_t t = TFS_KV_COUNT;
	for (size_t i = 0; i < n; i++) {
		uint32_t x = natural(key, json_object_array_get_idx(a, i));
		if (t == TFS_KV_COUNT || t == x)
			t = x;
		else if ((t == TFS_KV_I32 && x == TFS_KV_I64) || (t == TFS_KV_I64 && x == TFS_KV_I32))
			t = TFS_KV_I64;
		else if ((t == TFS_KV_F32 && (x == TFS_KV_I32 || x == TFS_KV_I64)) ||
			 (x == TFS_KV_F32 && (t == TFS_KV_I32 || t == TFS_KV_I64)))
			t = TFS_KV_F32;
		else
			return TFS_KV_COUNT;
	}
	return t;
}

static int is_int(uint32_t t)
{
	return t == TFS_KV_U8 || t == TFS_KV_I8 || t == TFS_KV_U16 || t == TFS_KV_I16 || t == TFS_KV_U32 ||
	       t == TFS_KV_I32 || t == TFS_KV_U64 || t == TFS_KV_I64;
}

/* One element of type t from v into o; a static message on a mismatch. */
static const char *put_elem(struct enc *o, uint32_t t, json_object *v)
{
	enum json_type jt = json_object_get_type(v);
	if (t == TFS_KV_STR) {
		if (jt != json_type_string)
			return "must be a string";
		return put_string(o, json_object_get_string(v), (size_t)json_object_get_string_len(v))
			       ? "out of memory"
			       : NULL;
	}
	if (t == TFS_KV_BOOL) {
		if (jt != json_type_boolean)
			return "must be true or false";
		return put_le(o, json_object_get_boolean(v) ? 1 : 0, 1) ? "out of memory" : NULL;
	}
	if (is_int(t)) {
		if (jt != json_type_int)
			return "must be an integer";
		unsigned bytes = tfs_kv_type_size(t);
		int sign = t == TFS_KV_I8 || t == TFS_KV_I16 || t == TFS_KV_I32 || t == TFS_KV_I64;
		int64_t i = json_object_get_int64(v);
		uint64_t u = json_object_get_uint64(v);
		if (sign) {
			int64_t lo = bytes == 8 ? INT64_MIN : -(int64_t)(1ull << (8 * bytes - 1));
			int64_t hi = bytes == 8 ? INT64_MAX : (int64_t)((1ull << (8 * bytes - 1)) - 1);
			if (i < lo || i > hi || (i == INT64_MAX && u > (uint64_t)INT64_MAX))
				return "is out of the type's range";
			return put_le(o, (uint64_t)i, bytes) ? "out of memory" : NULL;
		}
		uint64_t hi = bytes == 8 ? UINT64_MAX : (1ull << (8 * bytes)) - 1;
		if (i < 0 || u > hi)
			return "is out of the type's range";
		return put_le(o, u, bytes) ? "out of memory" : NULL;
	}
	/* FLOAT32, FLOAT64: a number, or "nan", "inf", "-inf" as
	 * __metadata__.json writes them. */
	double x;
	if (jt == json_type_int || jt == json_type_double) {
		x = json_object_get_double(v);
	} else if (jt == json_type_string && strcmp(json_object_get_string(v), "nan") == 0) {
		x = NAN;
	} else if (jt == json_type_string && strcmp(json_object_get_string(v), "inf") == 0) {
		x = INFINITY;
	} else if (jt == json_type_string && strcmp(json_object_get_string(v), "-inf") == 0) {
		x = -INFINITY;
	} else {
		return "must be a number";
	}
	if (t == TFS_KV_F32) {
		float f = (float)x;
		if (isinf(f) && !isinf(x))
			return "is out of FLOAT32's range";
		uint32_t bits;
		memcpy(&bits, &f, 4);
		return put_le(o, bits, 4) ? "out of memory" : NULL;
	}
	uint64_t bits;
	memcpy(&bits, &x, 8);
	return put_le(o, bits, 8) ? "out of memory" : NULL;
}

static const struct tfs_kv *find(const struct tfs_kv *pairs, uint64_t n, const char *key)
{
	size_t kl = strlen(key);
	for (uint64_t i = 0; i < n; i++)
		if (pairs[i].klen == kl && memcmp(pairs[i].key, key, kl) == 0)
			return &pairs[i];
	return NULL;
}

/* The whole pair for an edit into o; NULL, or what is wrong. */
static const char *encode_pair(struct enc *o, const char *key, json_object *v, const struct tfs_kv *old)
{
	uint32_t t, el;
	json_object *val = v;
	if (json_object_is_type(v, json_type_object)) {
		json_object *ty, *et;
		json_object_object_get_ex(v, "type", &ty);
		json_object_object_get_ex(v, "value", &val);
		t = el = tfs_kv_type_lookup(json_object_get_string(ty));
		if (t == TFS_KV_ARR && json_object_object_get_ex(v, "element_type", &et))
			el = tfs_kv_type_lookup(json_object_get_string(et));
	} else if (old) {
		t = old->type;
		el = old->elem;
	} else if (json_object_is_type(v, json_type_array)) {
		t = TFS_KV_ARR;
		el = natural_elem(key, v);
		if (el == TFS_KV_COUNT)
			return "an array of mixed or no elements has no natural type; use {\"type\": \"ARRAY\", \"element_type\": T, \"value\": [...]}";
	} else {
		t = el = natural(key, v);
	}
	if ((t == TFS_KV_ARR) != json_object_is_type(val, json_type_array))
		return t == TFS_KV_ARR ? "must be an array (the key is an ARRAY)" : "must not be an array";
	if (strcmp(key, "general.alignment") == 0) {
		if (t != TFS_KV_U32)
			return "must be a UINT32, the one type ggml's reader accepts for it";
		uint64_t a = json_object_get_uint64(val);
		if (!json_object_is_type(val, json_type_int) || json_object_get_int64(val) <= 0 ||
		    a > UINT32_MAX || (a & (a - 1)))
			return "must be a power of 2 (ggml's reader refuses any other)";
	}
	tfs_err e = put_string(o, key, strlen(key));
	if (!e)
		e = put_le(o, t, 4);
	if (e)
		return "out of memory";
	if (t != TFS_KV_ARR)
		return put_elem(o, t, val);
	size_t n = json_object_array_length(val);
	if (put_le(o, el, 4) || put_le(o, n, 8))
		return "out of memory";
	for (size_t i = 0; i < n; i++) {
		const char *why = put_elem(o, el, json_object_array_get_idx(val, i));
		if (why)
			return why;
	}
	return NULL;
}

static tfs_err apply_typed(const struct tfs_edits *ed, struct tfs_table *t, struct tfs_diag *d)
{
	struct tfs_kv *pairs = calloc(t->kv.n ? (size_t)t->kv.n : 1, sizeof *pairs);
	struct enc o = {0};
	uint64_t np = 0, nout = 0;
	size_t pos = 0;
	tfs_err e = pairs ? TFS_OK : tfs_fail(d, TFS_ERR_NOMEM, "out of memory");
	while (!e && np < t->kv.n && tfs_kvs_next(&t->kv, &pos, &pairs[np]))
		np++;
	const char *why = NULL;
	/* A key of any length (GGUF's are up to 2^64 bytes), NUL-terminated
	 * for json-c; one holding U+0000 is none of the file's (which holds
	 * none, strict_text). */
	char *key = NULL;
	size_t keycap = 0;
	/* The pairs in their order, each edited one in its place. */
	for (uint64_t i = 0; !e && !why && i < np; i++) {
		json_object *v;
		if (tfs_grow((void **)&key, &keycap, (size_t)pairs[i].klen + 1, 1)) {
			e = tfs_fail(d, TFS_ERR_NOMEM, "out of memory");
			break;
		}
		memcpy(key, pairs[i].key, pairs[i].klen);
		key[pairs[i].klen] = 0;
		if (memchr(key, 0, pairs[i].klen) || !json_object_object_get_ex(ed->obj, key, &v)) {
			e = tfs_json_put(&o.b, &o.n, &o.cap, (const char *)pairs[i].pair, pairs[i].plen);
			nout++;
		} else if (v) {
			if ((why = encode_pair(&o, key, v, &pairs[i])))
				e = tfs_fail(d, TFS_ERR_INVAL, "-o edits=%s: key %s (%s in the file): %s",
					     ed->path, Q(key), tfs_kv_type_name(pairs[i].type), why);
			nout++;
		}
	}
	/* Then the new keys, in the edits file's order. */
	json_object_object_foreach(ed->obj, k, v)
	{
		if (e)
			break;
		if (!v || find(pairs, np, k))
			continue;
		if ((why = encode_pair(&o, k, v, NULL)))
			e = tfs_fail(d, TFS_ERR_INVAL, "-o edits=%s: key %s: %s", ed->path, Q(k), why);
		nout++;
	}
	free(key);
	free(pairs);
	if (e) {
		free(o.b);
		return e;
	}
	free(t->kv.own);
	t->kv.own = (unsigned char *)o.b;
	t->kv.p = o.b ? t->kv.own : (const unsigned char *)"";
	t->kv.len = o.n;
	t->kv.n = nout;
	t->has_metadata = nout > 0;
	return TFS_OK;
}

/* ---- string pairs ---- */

static tfs_err arena_add(struct tfs_table *t, const char *s, size_t len, uint32_t *off)
{
	if (t->arena_len + len + 1 > UINT32_MAX)
		return TFS_ERR_NOMEM;
	char *a = realloc(t->arena, t->arena_len + len + 1);
	if (!a)
		return TFS_ERR_NOMEM;
	t->arena = a;
	memcpy(a + t->arena_len, s, len);
	a[t->arena_len + len] = 0;
	*off = (uint32_t)t->arena_len;
	t->arena_len += len + 1;
	return TFS_OK;
}

/* A string edit's text, or NULL (a value the pairs cannot hold). */
static json_object *string_of(json_object *v)
{
	json_object *ty, *val;
	if (json_object_is_type(v, json_type_object) && json_object_object_get_ex(v, "type", &ty) &&
	    strcmp(json_object_get_string(ty), "STRING") == 0 && json_object_object_get_ex(v, "value", &val))
		v = val;
	return json_object_is_type(v, json_type_string) ? v : NULL;
}

static tfs_err apply_pairs(const struct tfs_edits *ed, struct tfs_table *t, struct tfs_diag *d)
{
	json_object_object_foreach(ed->obj, k0, v0)
	{
		if (v0 && !string_of(v0))
			return tfs_fail(
				d, TFS_ERR_INVAL,
				"-o edits=%s: key %s: this file's metadata holds strings only (as safetensors' __metadata__ does)",
				ed->path, Q(k0));
	}
	size_t cap = (size_t)t->nmeta + (size_t)json_object_object_length(ed->obj) + 1;
	struct tfs_meta_pair *out = malloc(cap * sizeof *out);
	uint32_t n = 0;
	tfs_err e = out ? TFS_OK : TFS_ERR_NOMEM;
	for (uint32_t i = 0; !e && i < t->nmeta; i++) {
		struct tfs_meta_pair p = t->meta[i];
		char *key = t->arena + p.key_off;
		json_object *v;
		if (strlen(key) != p.key_len || !json_object_object_get_ex(ed->obj, key, &v)) {
			out[n++] = p;
			continue;
		}
		if (!v)
			continue; /* deleted */
		json_object *s = string_of(v);
		e = arena_add(t, json_object_get_string(s), (size_t)json_object_get_string_len(s),
			      &p.val_off);
		p.val_len = (uint32_t)json_object_get_string_len(s);
		out[n++] = p;
	}
	json_object_object_foreach(ed->obj, k, v)
	{
		if (e)
			break;
		int had = 0;
		for (uint32_t i = 0; i < t->nmeta && !had; i++)
			had = t->meta[i].key_len == strlen(k) &&
			      memcmp(t->arena + t->meta[i].key_off, k, strlen(k)) == 0;
		if (had || !v)
			continue;
		json_object *s = string_of(v);
		struct tfs_meta_pair p = {0};
		if (!(e = arena_add(t, k, strlen(k), &p.key_off)))
			e = arena_add(t, json_object_get_string(s), (size_t)json_object_get_string_len(s),
				      &p.val_off);
		p.key_len = (uint32_t)strlen(k);
		p.val_len = (uint32_t)json_object_get_string_len(s);
		out[n++] = p;
	}
	if (e) {
		free(out);
		return tfs_fail(d, TFS_ERR_NOMEM, "out of memory");
	}
	free(t->meta);
	t->meta = out;
	t->nmeta = n;
	t->has_metadata = t->has_metadata || n > 0;
	return TFS_OK;
}

tfs_err tfs_edits_apply(const struct tfs_edits *ed, struct tfs_table *t, struct tfs_diag *d)
{
	json_object_object_foreach(ed->obj, k, v)
	{
		(void)v;
		if (strncmp(k, "split.", 6) == 0 && t->kv.p)
			return tfs_fail(
				d, TFS_ERR_INVAL,
				"-o edits=%s: key %s: split.* keys describe how the files are split, and generated files set their own",
				ed->path, Q(k));
	}
	return t->kv.p ? apply_typed(ed, t, d) : apply_pairs(ed, t, d);
}
