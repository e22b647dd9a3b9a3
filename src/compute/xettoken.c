#include "compute/xettoken.h"

#include <string.h>
#include <strings.h>

#include "core/jscan.h"
#include "core/utf8.h"

static int token_ok(const char *p, size_t n)
{
	if (n == 0 || n > TFS_XET_TOKEN_MAX)
		return 0;
	for (size_t i = 0; i < n; i++)
		if ((unsigned char)p[i] <= ' ' || (unsigned char)p[i] >= 0x7f)
			return 0;
	return 1;
}

/* http(s)://HOST[:PORT][/PATH]: a host, no userinfo, no query or
 * fragment, nothing a header or a log line could be split by. The origin
 * is what the token may be sent to. */
static int cas_ok(const char *p, size_t n, struct tfs_xet_token *t)
{
	size_t skip = n > 8 && strncasecmp(p, "https://", 8) == 0  ? 8
		      : n > 7 && strncasecmp(p, "http://", 7) == 0 ? 7
								   : 0;
	if (!skip || n > TFS_XET_CAS_URL_MAX)
		return 0;
	for (size_t i = 0; i < n; i++)
		if ((unsigned char)p[i] <= ' ' || (unsigned char)p[i] >= 0x7f || p[i] == '?' || p[i] == '#' ||
		    p[i] == '\\')
			return 0;
	size_t host = skip, end = skip;
	while (end < n && p[end] != '/')
		end++;
	if (end == host || memchr(p + host, '@', end - host))
		return 0;
	while (n > end && p[n - 1] == '/')
		n--;
	memcpy(t->cas, p, n);
	t->cas[n] = 0;
	memcpy(t->origin, p, end);
	t->origin[end] = 0;
	return 1;
}

static tfs_err member(struct tfs_jscan *s, const struct tfs_jstr *k, struct tfs_xet_token *t, int *seen)
{
	int bit = TFS_JS_IS(k, "accessToken") ? 1 : TFS_JS_IS(k, "exp") ? 2 : TFS_JS_IS(k, "casUrl") ? 4 : 0;
	if (bit & *seen)
		return tfs_js_err(s, "a key given twice");
	*seen |= bit;
	tfs_js_ws(s);
	if (bit == 2) {
		enum tfs_jnum kind;
		uint64_t v;
		const unsigned char *at = s->p;
		tfs_err e = tfs_js_number(s, &kind, &v);
		if (e)
			return e;
		if (kind != TFS_JNUM_UINT || v > (1ull << 40)) {
			s->p = at;
			return tfs_js_err(s, "exp must be a whole number of seconds");
		}
		t->exp = (int64_t)v;
		return TFS_OK;
	}
	if (!bit)
		return tfs_js_skip(s);
	struct tfs_jstr v;
	if (tfs_js_peek(s) != '"')
		return tfs_js_err(s, bit == 1 ? "accessToken must be a string" : "casUrl must be a string");
	tfs_err e = tfs_js_string(s, &v);
	if (e)
		return e;
	if (bit == 1) {
		if (!token_ok(v.p, v.len))
			return tfs_js_err(
				s, "accessToken must be 1 to 4096 printable characters without spaces");
		memcpy(t->token, v.p, v.len);
		t->token[v.len] = 0;
	} else if (!cas_ok(v.p, v.len, t)) {
		return tfs_js_err(s,
				  "casUrl must be an http(s) URL with a host and no user, query or spaces");
	}
	return TFS_OK;
}

tfs_err tfs_xet_token_parse(const char *json, size_t n, struct tfs_xet_token *t, struct tfs_diag *d)
{
	struct tfs_jscan s;
	struct tfs_jstr k;
	int seen = 0;
	memset(t, 0, sizeof *t);
	size_t bad = tfs_utf8_check((const unsigned char *)json, n);
	if (bad != n)
		return tfs_fail(d, TFS_ERR_FORMAT, "a Xet token answer that is not valid UTF-8 (at byte %zu)",
				bad);
	tfs_js_init(&s, "Xet token", json, n, 8, d);
	tfs_js_ws(&s);
	tfs_err e =
		tfs_js_peek(&s) == '{' ? tfs_js_enter(&s) : tfs_js_err(&s, "the answer must be an object");
	if (!e && !tfs_js_close_if_empty(&s, '}')) {
		do {
			tfs_js_ws(&s);
			if (tfs_js_peek(&s) != '"')
				e = tfs_js_err(&s, "expected a string key");
			if (!e && !(e = tfs_js_string(&s, &k)) &&
			    !(e = tfs_js_expect(&s, ':', "expected ':'")))
				e = member(&s, &k, t, &seen);
		} while (!e && tfs_js_next(&s, '}', &e) > 0);
	}
	if (!e) {
		tfs_js_ws(&s);
		if (s.p != s.end)
			e = tfs_js_err(&s, "unexpected text after the object");
	}
	tfs_js_done(&s);
	if (!e && seen != 7)
		e = tfs_fail(d, TFS_ERR_FORMAT, "a Xet token answer needs accessToken, exp and casUrl");
	if (e) {
		explicit_bzero(t->token, sizeof t->token);
		memset(t, 0, sizeof *t);
	}
	return e;
}
