#include "sources/aws.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/jscan.h"
#include "core/userfile.h"

#define AWS_FILE_MAX (1u << 20)

/* ---- INI ---- */

static void trim(const char **a, const char **b)
{
	while (*a < *b && (**a == ' ' || **a == '\t' || **a == '\r'))
		(*a)++;
	while (*b > *a && ((*b)[-1] == ' ' || (*b)[-1] == '\t' || (*b)[-1] == '\r'))
		(*b)--;
}

tfs_err tfs_ini_parse(const char *text, size_t n, tfs_ini_fn entry, void *ctx, struct tfs_diag *d)
{
	char section[256] = "", key[256], val[4096];
	size_t line = 0;
	if (tfs_utf8_check((const unsigned char *)text, n) != n)
		return tfs_fail(d, TFS_ERR_FORMAT, "not UTF-8 text");
	for (size_t i = 0; i < n;) {
		const char *a = text + i, *nl = memchr(a, '\n', n - i), *b = nl ? nl : text + n;
		i = (size_t)(b - text) + 1;
		line++;
		trim(&a, &b);
		if (a == b || *a == '#' || *a == ';')
			continue;
		if (memchr(a, 0, (size_t)(b - a)))
			return tfs_fail(d, TFS_ERR_FORMAT, "line %zu holds a NUL byte", line);
		if (*a == '[') {
			if (b[-1] != ']')
				return tfs_fail(d, TFS_ERR_FORMAT, "line %zu: a section without its ']'",
						line);
			const char *sa = a + 1, *sb = b - 1;
			trim(&sa, &sb);
			if (sb == sa || (size_t)(sb - sa) >= sizeof section)
				return tfs_fail(d, TFS_ERR_FORMAT,
						"line %zu: an empty or too long section name", line);
			memcpy(section, sa, (size_t)(sb - sa));
			section[sb - sa] = 0;
			continue;
		}
		const char *eq = memchr(a, '=', (size_t)(b - a));
		if (!eq)
			return tfs_fail(d, TFS_ERR_FORMAT, "line %zu is not 'key = value'", line);
		const char *ka = a, *kb = eq, *va = eq + 1, *vb = b;
		trim(&ka, &kb);
		trim(&va, &vb);
		if (kb == ka || (size_t)(kb - ka) >= sizeof key || (size_t)(vb - va) >= sizeof val)
			return tfs_fail(d, TFS_ERR_FORMAT, "line %zu: an empty or too long key or value",
					line);
		if (!*section)
			return tfs_fail(d, TFS_ERR_FORMAT, "line %zu: a key before any [section]", line);
		memcpy(key, ka, (size_t)(kb - ka));
		key[kb - ka] = 0;
		memcpy(val, va, (size_t)(vb - va));
		val[vb - va] = 0;
		tfs_err e = entry(ctx, section, key, val);
		if (e)
			return e;
	}
	return TFS_OK;
}

/* ---- credentials ---- */

struct want {
	struct tfs_aws_creds *c;
	const char *section; /* the profile's section in this file */
	int found;
	char key[256], secret[256], token[4096], region[64];
	const char *too_long; /* a value that does not fit: refused, never cut */
};

static void keep(struct want *w, char *dst, size_t n, const char *name, const char *value)
{
	size_t l = strlen(value);
	if (l >= n)
		w->too_long = name;
	else
		memcpy(dst, value, l + 1);
}

static tfs_err take(void *ctx, const char *section, const char *key, const char *value)
{
	struct want *w = ctx;
	if (strcmp(section, w->section) != 0)
		return TFS_OK;
	w->found = 1;
	/* The last value of a key wins, as in the AWS tools. */
	if (strcmp(key, "aws_access_key_id") == 0)
		keep(w, w->key, sizeof w->key, "aws_access_key_id", value);
	else if (strcmp(key, "aws_secret_access_key") == 0)
		keep(w, w->secret, sizeof w->secret, "aws_secret_access_key", value);
	else if (strcmp(key, "aws_session_token") == 0)
		keep(w, w->token, sizeof w->token, "aws_session_token", value);
	else if (strcmp(key, "region") == 0)
		keep(w, w->region, sizeof w->region, "region", value);
	return TFS_OK;
}

/* Reads one file's section; a missing file is not an error. var: the
 * environment variable that named it, or NULL (the default path). */
static tfs_err read_profile(const char *var, const char *path, const char *section, struct want *w,
			    struct tfs_diag *d)
{
	char *buf;
	size_t n;
	struct tfs_diag od;
	tfs_err e = tfs_file_read(var, path, AWS_FILE_MAX, &buf, &n, &od);
	if (e == TFS_ERR_NOENT)
		return TFS_OK;
	if (e) {
		/* The user's own file: refused is a usage error, unreadable
		 * the source's. */
		if (var)
			tfs_fail(d, e, "%s", od.msg);
		else
			tfs_fail(d, e, "%s: %s", path, od.msg);
		return e == TFS_ERR_OPEN || e == TFS_ERR_NOMEM ? e : TFS_ERR_INVAL;
	}
	w->section = section;
	struct tfs_diag pd;
	e = tfs_ini_parse(buf, n, take, w, &pd);
	memset(buf, 0, n);
	free(buf);
	/* The user's own file: a mistake in it is a usage error. */
	if (e)
		return tfs_fail(d, e == TFS_ERR_FORMAT ? TFS_ERR_INVAL : e, "%s: %s", path, pd.msg);
	if (w->too_long)
		return tfs_fail(d, TFS_ERR_INVAL,
				"%s: the %s of [%s] is longer than tensorfs takes: refused, never cut", path,
				w->too_long, section);
	return TFS_OK;
}

static const char *env(const char *k)
{
	const char *v = getenv(k);
	return v && *v ? v : NULL;
}

static int printable(const char *s)
{
	for (; *s; s++)
		if ((unsigned char)*s <= 0x20 || *s == 0x7f)
			return 0;
	return 1;
}

void tfs_aws_files(char *cred, char *conf, size_t n)
{
	const char *home = env("HOME") ? env("HOME") : "/root";
	if (env("AWS_SHARED_CREDENTIALS_FILE"))
		snprintf(cred, n, "%s", env("AWS_SHARED_CREDENTIALS_FILE"));
	else
		snprintf(cred, n, "%s/.aws/credentials", home);
	if (env("AWS_CONFIG_FILE"))
		snprintf(conf, n, "%s", env("AWS_CONFIG_FILE"));
	else
		snprintf(conf, n, "%s/.aws/config", home);
}

tfs_err tfs_aws_credentials(struct tfs_aws_creds *c, int need_key, struct tfs_diag *d)
{
	return tfs_aws_credentials_of(c, need_key, NULL, d);
}

tfs_err tfs_aws_credentials_of(struct tfs_aws_creds *c, int need_key, const char *named, struct tfs_diag *d)
{
	memset(c, 0, sizeof *c);
	const char *profile = named && *named ? named : env("AWS_PROFILE") ? env("AWS_PROFILE") : "default";
	snprintf(c->profile, sizeof c->profile, "%s", profile);
	struct want w;
	memset(&w, 0, sizeof w);
	w.c = c;
	char path[4096], section[300];
	/* A profile named on the command line (or in fstab) wins over keys in
	 * the environment, as the AWS CLI's --profile does. */
	int env_keys = !(named && *named) && env("AWS_ACCESS_KEY_ID") && env("AWS_SECRET_ACCESS_KEY");
	tfs_err e = TFS_OK;
	/* The credentials file: [NAME]. The config file: [profile NAME], or
	 * [default] for the default profile. */
	const char *var = "AWS_SHARED_CREDENTIALS_FILE";
	char conf[4096];
	tfs_aws_files(path, conf, sizeof path);
	if (!env_keys && need_key && (e = read_profile(env(var) ? var : NULL, path, profile, &w, d)))
		return e;
	var = "AWS_CONFIG_FILE";
	snprintf(path, sizeof path, "%s", conf);
	snprintf(section, sizeof section, strcmp(profile, "default") == 0 ? "%s" : "profile %s", profile);
	struct want cfg;
	memset(&cfg, 0, sizeof cfg);
	if ((e = read_profile(env(var) ? var : NULL, path, section, &cfg, d)))
		return e;
	static const char *const vars[] = {"AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN",
					   "AWS_REGION", "AWS_DEFAULT_REGION"};
	const size_t caps[] = {sizeof c->key, sizeof c->secret, sizeof c->token, sizeof c->region,
			       sizeof c->region};
	for (size_t i = 0; i < sizeof vars / sizeof *vars; i++)
		if (env(vars[i]) && strlen(env(vars[i])) >= caps[i])
			return tfs_fail(d, TFS_ERR_INVAL,
					"%s is longer than tensorfs takes (%zu bytes): refused, never cut",
					vars[i], caps[i] - 1);
	if (env_keys) {
		snprintf(c->key, sizeof c->key, "%s", env("AWS_ACCESS_KEY_ID"));
		snprintf(c->secret, sizeof c->secret, "%s", env("AWS_SECRET_ACCESS_KEY"));
		snprintf(c->token, sizeof c->token, "%s",
			 env("AWS_SESSION_TOKEN") ? env("AWS_SESSION_TOKEN") : "");
		c->from_env = 1;
	} else if (need_key) {
		/* The credentials file first, then keys in the config file. */
		const struct want *src = *w.key ? &w : &cfg;
		snprintf(c->key, sizeof c->key, "%s", src->key);
		snprintf(c->secret, sizeof c->secret, "%s", src->secret);
		snprintf(c->token, sizeof c->token, "%s", src->token);
	}
	if (env("AWS_REGION"))
		snprintf(c->region, sizeof c->region, "%s", env("AWS_REGION"));
	else if (env("AWS_DEFAULT_REGION"))
		snprintf(c->region, sizeof c->region, "%s", env("AWS_DEFAULT_REGION"));
	else if (*cfg.region)
		snprintf(c->region, sizeof c->region, "%s", cfg.region);
	else if (*w.region)
		snprintf(c->region, sizeof c->region, "%s", w.region);
	else
		snprintf(c->region, sizeof c->region, "us-east-1");
	for (const char *p = c->region; *p; p++)
		if (!((*p >= 'a' && *p <= 'z') || (*p >= '0' && *p <= '9') || *p == '-'))
			return tfs_fail(d, TFS_ERR_INVAL, "the AWS region '%s' is not a region name",
					c->region);
	if (!need_key)
		return TFS_OK;
	if (!*c->key || !*c->secret)
		return tfs_fail(
			d, TFS_ERR_OPEN,
			"no AWS credentials: set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY, give profile '%s' keys in ~/.aws/credentials, or pass -o no_sign_request for a public bucket",
			profile);
	/* They go into headers and a user:password pair: nothing that could
	 * end a header or the pair. */
	if (!printable(c->key) || !printable(c->secret) || !printable(c->token) || strchr(c->key, ':'))
		return tfs_fail(d, TFS_ERR_INVAL,
				"the AWS credentials of profile '%s' hold spaces or control characters",
				profile);
	return TFS_OK;
}

/* ---- XML: ListObjectsV2 ---- */

/* The text between <tag> and </tag> from *p (before end), entities
 * decoded into out. Returns 1 when found, 0 when not, -1 when malformed. */
static int decode(const char *a, const char *b, char *out, size_t outsz)
{
	size_t o = 0;
	for (const char *p = a; p < b; p++) {
		unsigned cp = (unsigned char)*p;
		if (*p == '<')
			return -1;
		if (*p == '&') {
			const char *semi = memchr(p, ';', (size_t)(b - p));
			if (!semi || semi - p > 10)
				return -1;
			size_t k = (size_t)(semi - p - 1);
			if (k == 2 && !memcmp(p + 1, "lt", 2))
				cp = '<';
			else if (k == 2 && !memcmp(p + 1, "gt", 2))
				cp = '>';
			else if (k == 3 && !memcmp(p + 1, "amp", 3))
				cp = '&';
			else if (k == 4 && !memcmp(p + 1, "quot", 4))
				cp = '"';
			else if (k == 4 && !memcmp(p + 1, "apos", 4))
				cp = '\'';
			else if (k >= 2 && p[1] == '#') {
				char num[12];
				memcpy(num, p + 2, k - 1);
				num[k - 1] = 0;
				char *end;
				unsigned long v =
					num[0] == 'x' ? strtoul(num + 1, &end, 16) : strtoul(num, &end, 10);
				if (*end || end == num || v == 0 || v > 0x10ffff ||
				    (v >= 0xd800 && v <= 0xdfff))
					return -1;
				cp = (unsigned)v;
			} else {
				return -1;
			}
			p = semi;
			char u[4];
			size_t ul;
			if (cp < 0x80) {
				u[0] = (char)cp, ul = 1;
			} else if (cp < 0x800) {
				u[0] = (char)(0xc0 | cp >> 6), u[1] = (char)(0x80 | (cp & 63)), ul = 2;
			} else if (cp < 0x10000) {
				u[0] = (char)(0xe0 | cp >> 12), u[1] = (char)(0x80 | ((cp >> 6) & 63));
				u[2] = (char)(0x80 | (cp & 63)), ul = 3;
			} else {
				u[0] = (char)(0xf0 | cp >> 18), u[1] = (char)(0x80 | ((cp >> 12) & 63));
				u[2] = (char)(0x80 | ((cp >> 6) & 63)), u[3] = (char)(0x80 | (cp & 63)),
				ul = 4;
			}
			if (o + ul >= outsz)
				return -1;
			memcpy(out + o, u, ul);
			o += ul;
			continue;
		}
		if (o + 1 >= outsz)
			return -1;
		out[o++] = *p;
	}
	out[o] = 0;
	return 1;
}

/* Finds <tag>text</tag> in [a, b): -1 malformed, 0 absent, 1 found. */
static int element(const char *a, const char *b, const char *tag, char *out, size_t outsz, const char **after)
{
	char open[64], close[64];
	snprintf(open, sizeof open, "<%s>", tag);
	snprintf(close, sizeof close, "</%s>", tag);
	const char *s = memmem(a, (size_t)(b - a), open, strlen(open));
	if (!s)
		return 0;
	s += strlen(open);
	const char *e = memmem(s, (size_t)(b - s), close, strlen(close));
	if (!e)
		return -1;
	if (after)
		*after = e + strlen(close);
	return decode(s, e, out, outsz);
}

tfs_err tfs_s3_parse_list(const char *xml, size_t n, const struct tfs_s3_list_cb *cb, int *truncated,
			  char *next, size_t nextsz, struct tfs_diag *d)
{
	const char *end = xml + n;
	char v[2048];
	*truncated = 0;
	if (nextsz)
		next[0] = 0;
	if (tfs_utf8_check((const unsigned char *)xml, n) != n || memchr(xml, 0, n))
		return tfs_fail(d, TFS_ERR_FORMAT, "the bucket listing is not UTF-8 text");
	if (memmem(xml, n, "<!", 2))
		return tfs_fail(d, TFS_ERR_FORMAT, "the bucket listing holds a DTD or comment: refused");
	const char *root = memmem(xml, n, "<ListBucketResult", 17);
	if (!root || !memmem(root, (size_t)(end - root), "</ListBucketResult>", 19))
		return tfs_fail(d, TFS_ERR_FORMAT, "the answer is not a bucket listing (ListBucketResult)");
	/* Objects. */
	for (const char *p = root;;) {
		const char *c = memmem(p, (size_t)(end - p), "<Contents>", 10);
		if (!c)
			break;
		const char *ce = memmem(c, (size_t)(end - c), "</Contents>", 11);
		if (!ce)
			return tfs_fail(d, TFS_ERR_FORMAT, "the bucket listing has an unclosed <Contents>");
		/* An ETag as long as the HTTP layer takes (TFS_HTTP_ETAG_MAX). */
		char key[1100], etag[1025];
		int k = element(c, ce, "Key", key, sizeof key, NULL);
		int s = element(c, ce, "Size", v, sizeof v, NULL);
		int t = element(c, ce, "ETag", etag, sizeof etag, NULL);
		if (k != 1 || s != 1)
			return tfs_fail(d, TFS_ERR_FORMAT,
					"the bucket listing has an object without a key or a size");
		if (t < 0)
			return tfs_fail(
				d, TFS_ERR_FORMAT,
				"the bucket listing has an ETag that is malformed or over 1024 bytes");
		char *se;
		errno = 0;
		unsigned long long size = strtoull(v, &se, 10);
		if (errno || *se || se == v || v[0] == '-')
			return tfs_fail(d, TFS_ERR_FORMAT,
					"the bucket listing gives a size that is not a number");
		tfs_err e = cb->object(cb->ctx, key, size, t == 1 ? etag : "");
		if (e)
			return e;
		p = ce + 11;
	}
	int r = element(root, end, "IsTruncated", v, sizeof v, NULL);
	if (r < 0)
		return tfs_fail(d, TFS_ERR_FORMAT, "the bucket listing is not well formed");
	*truncated = r == 1 && strcmp(v, "true") == 0;
	if (*truncated) {
		r = element(root, end, "NextContinuationToken", next, nextsz, NULL);
		if (r != 1 || !*next)
			return tfs_fail(d, TFS_ERR_FORMAT,
					"the bucket listing is truncated but gives no continuation token");
	}
	return TFS_OK;
}

void tfs_s3_error_code(const char *xml, size_t n, char *out, size_t outsz)
{
	if (element(xml, xml + n, "Code", out, outsz, NULL) != 1)
		out[0] = 0;
}
