/* Unit tests of what the remote sources parse without a network: the INI
 * syntax of the AWS files, the credential chain (the environment, then
 * the profile in the credentials and config files), S3 listings and error
 * bodies, hf:// references, the Hub's answers and HTTP header lines. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "sources/aws.h"
#include "sources/hfapi.h"
#include "sources/hflocal.h"
#include "sources/httpc.h"
#include "sources/hub.h"
#include "core/url.h"

#include "check.h"

/* ---- INI ---- */

struct seen {
	char text[4096];
};

static tfs_err record(void *ctx, const char *section, const char *key, const char *value)
{
	struct seen *s = ctx;
	size_t n = strlen(s->text);
	snprintf(s->text + n, sizeof s->text - n, "[%s]%s=%s;", section, key, value);
	return TFS_OK;
}

static tfs_err ini(const char *text, char *out, char *msg)
{
	struct seen s = {""};
	struct tfs_diag d = {""};
	tfs_err e = tfs_ini_parse(text, strlen(text), record, &s, &d);
	strcpy(out, s.text);
	strcpy(msg, d.msg);
	return e;
}

static void test_ini(void)
{
	char out[4096], msg[TFS_DIAG_MAX];
	CHECK(ini("[default]\naws_access_key_id = AK\n  aws_secret_access_key=SK  \r\n", out, msg) ==
			      TFS_OK &&
		      strcmp(out, "[default]aws_access_key_id=AK;[default]aws_secret_access_key=SK;") == 0,
	      "basic: %s", out);
	CHECK(ini("# c\n; c\n\n[ p ]\nk = a = b\n", out, msg) == TFS_OK && strcmp(out, "[p]k=a = b;") == 0,
	      "comments, trim, '=' in a value: %s", out);
	CHECK(ini("[a]\nk=1\n[b]\nk=2\n[a]\nk=3", out, msg) == TFS_OK &&
		      strcmp(out, "[a]k=1;[b]k=2;[a]k=3;") == 0,
	      "sections again, no final newline: %s", out);
	CHECK(ini("", out, msg) == TFS_OK && !*out, "empty");
	const struct {
		const char *text, *want;
	} bad[] = {
		{"[default\nk=v\n", "line 1: a section without its ']'"},
		{"[]\n", "line 1: an empty or too long section name"},
		{"k=v\n", "line 1: a key before any [section]"},
		{"[a]\njust words\n", "line 2 is not 'key = value'"},
		{"[a]\n = v\n", "line 2: an empty or too long key or value"},
		{"[a]\nk=\xff\n", "not UTF-8 text"},
	};
	for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
		tfs_err e = ini(bad[i].text, out, msg);
		CHECK(e == TFS_ERR_FORMAT && strcmp(msg, bad[i].want) == 0, "bad %zu: %s", i, msg);
	}
	char nul[] = "[a]\nk=v\0x\n";
	struct seen s = {""};
	struct tfs_diag d = {""};
	CHECK(tfs_ini_parse(nul, sizeof nul - 1, record, &s, &d) == TFS_ERR_FORMAT && strstr(d.msg, "NUL"),
	      "a NUL byte: %s", d.msg);
	char *big = malloc(10000);
	memset(big, 'k', 9000);
	memcpy(big, "[a]\n", 4);
	strcpy(big + 9000, "=v\n");
	CHECK(ini(big, out, msg) == TFS_ERR_FORMAT && strstr(msg, "too long"), "a huge key: %s", msg);
	free(big);
}

/* ---- credentials ---- */

static void clear_env(void)
{
	const char *vars[] = {"AWS_ACCESS_KEY_ID",
			      "AWS_SECRET_ACCESS_KEY",
			      "AWS_SESSION_TOKEN",
			      "AWS_PROFILE",
			      "AWS_REGION",
			      "AWS_DEFAULT_REGION",
			      "AWS_SHARED_CREDENTIALS_FILE",
			      "AWS_CONFIG_FILE"};
	for (size_t i = 0; i < sizeof vars / sizeof vars[0]; i++)
		unsetenv(vars[i]);
}

static void write_file(const char *path, const char *text)
{
	FILE *f = fopen(path, "w");
	fputs(text, f);
	fclose(f);
}

static void test_credentials(void)
{
	char dir[] = "/tmp/tfs-unit-aws-XXXXXX", cred[200], conf[200];
	struct tfs_aws_creds c;
	struct tfs_diag d;
	if (!mkdtemp(dir))
		abort();
	snprintf(cred, sizeof cred, "%s/credentials", dir);
	snprintf(conf, sizeof conf, "%s/config", dir);
	clear_env();
	setenv("HOME", dir, 1); /* no ~/.aws */
	CHECK(tfs_aws_credentials(&c, 1, &d) == TFS_ERR_OPEN && strstr(d.msg, "no AWS credentials") &&
		      strstr(d.msg, "'default'"),
	      "nothing: %s", d.msg);
	CHECK(tfs_aws_credentials(&c, 0, &d) == TFS_OK && strcmp(c.region, "us-east-1") == 0,
	      "unsigned: region only");
	setenv("AWS_ACCESS_KEY_ID", "AKENV", 1);
	setenv("AWS_SECRET_ACCESS_KEY", "SKENV", 1);
	setenv("AWS_SESSION_TOKEN", "TOKENV", 1);
	setenv("AWS_DEFAULT_REGION", "eu-west-1", 1);
	CHECK(tfs_aws_credentials(&c, 1, &d) == TFS_OK && !strcmp(c.key, "AKENV") &&
		      !strcmp(c.secret, "SKENV") && !strcmp(c.token, "TOKENV") &&
		      !strcmp(c.region, "eu-west-1") && c.from_env,
	      "from the environment: %s", d.msg);
	setenv("AWS_REGION", "ap-south-1", 1);
	CHECK(tfs_aws_credentials(&c, 1, &d) == TFS_OK && !strcmp(c.region, "ap-south-1"),
	      "AWS_REGION first");
	clear_env();
	setenv("AWS_SHARED_CREDENTIALS_FILE", cred, 1);
	setenv("AWS_CONFIG_FILE", conf, 1);
	write_file(cred,
		   "[default]\naws_access_key_id = AKDEF\naws_secret_access_key = SKDEF\n"
		   "[dev]\naws_access_key_id=AKDEV\naws_secret_access_key=SKDEV\naws_session_token=TDEV\n");
	write_file(
		conf,
		"[default]\nregion = us-west-2\n[profile dev]\nregion = eu-central-1\n[dev]\nregion = wrong\n");
	CHECK(tfs_aws_credentials(&c, 1, &d) == TFS_OK && !strcmp(c.key, "AKDEF") &&
		      !strcmp(c.region, "us-west-2") && !*c.token,
	      "default profile: %s", d.msg);
	setenv("AWS_PROFILE", "dev", 1);
	CHECK(tfs_aws_credentials(&c, 1, &d) == TFS_OK && !strcmp(c.key, "AKDEV") &&
		      !strcmp(c.token, "TDEV") && !strcmp(c.region, "eu-central-1"),
	      "named profile, [profile NAME] in config: %s", d.msg);
	/* keys only in the config file */
	write_file(cred, "");
	write_file(conf, "[profile dev]\naws_access_key_id=AKC\naws_secret_access_key=SKC\n");
	CHECK(tfs_aws_credentials(&c, 1, &d) == TFS_OK && !strcmp(c.key, "AKC") &&
		      !strcmp(c.region, "us-east-1"),
	      "keys in the config file: %s", d.msg);
	write_file(cred, "[dev]\naws_access_key_id = AK\n");
	write_file(conf, "");
	CHECK(tfs_aws_credentials(&c, 1, &d) == TFS_ERR_OPEN && strstr(d.msg, "'dev'"),
	      "a key without secret: %s", d.msg);
	write_file(cred, "[dev]\naws_access_key_id = AK\naws_secret_access_key = a b\n");
	CHECK(tfs_aws_credentials(&c, 1, &d) == TFS_ERR_INVAL && strstr(d.msg, "spaces"),
	      "a secret with a space: %s", d.msg);
	write_file(cred, "[dev\n");
	CHECK(tfs_aws_credentials(&c, 1, &d) == TFS_ERR_INVAL && strstr(d.msg, cred) &&
		      strstr(d.msg, "line 1"),
	      "a damaged file is named with its line: %s", d.msg);
	write_file(cred, "[dev]\naws_access_key_id = AK\naws_secret_access_key = SK\n");
	write_file(conf, "[profile dev]\nregion = us east\n");
	CHECK(tfs_aws_credentials(&c, 1, &d) == TFS_ERR_INVAL && strstr(d.msg, "region"), "a bad region: %s",
	      d.msg);
	unlink(cred);
	unlink(conf);
	rmdir(dir);
	clear_env();
}

/* ---- S3 listings ---- */

struct objs {
	char text[8192];
};

static tfs_err object(void *ctx, const char *key, uint64_t size, const char *etag)
{
	struct objs *o = ctx;
	size_t n = strlen(o->text);
	snprintf(o->text + n, sizeof o->text - n, "%s|%llu|%s;", key, (unsigned long long)size, etag);
	return TFS_OK;
}

static tfs_err list(const char *xml, char *out, int *truncated, char *next, char *msg)
{
	struct objs o = {""};
	struct tfs_s3_list_cb cb = {.object = object, .ctx = &o};
	struct tfs_diag d = {""};
	tfs_err e = tfs_s3_parse_list(xml, strlen(xml), &cb, truncated, next, 64, &d);
	strcpy(out, o.text);
	strcpy(msg, d.msg);
	return e;
}

static void test_s3_listing(void)
{
	char out[8192], next[64], msg[TFS_DIAG_MAX];
	int tr;
	const char *ok =
		"<?xml version=\"1.0\"?><ListBucketResult><Name>b</Name><IsTruncated>true</IsTruncated>"
		"<NextContinuationToken>tok&amp;1</NextContinuationToken>"
		"<Contents><Key>m/a&lt;b&#x20AC;&#65;.st</Key><ETag>&quot;e1&quot;</ETag><Size>12</Size></Contents>"
		"<Contents><Key>m/x</Key><Size>0</Size></Contents></ListBucketResult>";
	CHECK(list(ok, out, &tr, next, msg) == TFS_OK && tr && !strcmp(next, "tok&1") &&
		      !strcmp(out, "m/a<b\xe2\x82\xac"
				   "A.st|12|\"e1\";m/x|0|;"),
	      "entities: %s / %s", out, msg);
	const struct {
		const char *xml, *want;
	} bad[] = {
		{"<Error><Code>AccessDenied</Code></Error>", "not a bucket listing"},
		{"<ListBucketResult><Contents><Key>a</Key><Size>1</Size></ListBucketResult>",
		 "unclosed <Contents>"},
		{"<ListBucketResult><Contents><Key>a</Key></Contents></ListBucketResult>",
		 "without a key or a size"},
		{"<ListBucketResult><Contents><Key>a</Key><Size>-1</Size></Contents></ListBucketResult>",
		 "not a number"},
		{"<ListBucketResult><Contents><Key>a</Key><Size>99999999999999999999999</Size></Contents></ListBucketResult>",
		 "not a number"},
		{"<ListBucketResult><Contents><Key>a&bogus;</Key><Size>1</Size></Contents></ListBucketResult>",
		 "without a key"},
		{"<ListBucketResult><Contents><Key>a&#0;</Key><Size>1</Size></Contents></ListBucketResult>",
		 "without a key"},
		{"<!DOCTYPE x [<!ENTITY a \"aaaa\">]><ListBucketResult></ListBucketResult>", "DTD"},
		{"<ListBucketResult><IsTruncated>true</IsTruncated></ListBucketResult>",
		 "no continuation token"},
		{"<ListBucketResult><IsTruncated>true</ListBucketResult>", "not well formed"},
	};
	for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
		CHECK(list(bad[i].xml, out, &tr, next, msg) == TFS_ERR_FORMAT && strstr(msg, bad[i].want),
		      "bad listing %zu: %s", i, msg);
	char code[64];
	const char *err = "<?xml version=\"1.0\"?><Error><Code>SlowDown</Code><Message>x</Message></Error>";
	tfs_s3_error_code(err, strlen(err), code, sizeof code);
	CHECK(!strcmp(code, "SlowDown"), "error code: %s", code);
	tfs_s3_error_code("nothing", 7, code, sizeof code);
	CHECK(!*code, "no error code");
}

/* ---- the Hub and HTTP ---- */

static void test_hub_and_http(void)
{
	struct tfs_hub_ref r;
	struct tfs_diag d;
	CHECK(tfs_hub_parse_ref("hf://datasets/org/name@refs%2Fpr%2F1/sub/x.safetensors", &r, &d) == TFS_OK &&
		      !strcmp(r.type, "datasets") && !strcmp(r.repo, "org/name") &&
		      !strcmp(r.rev, "refs/pr/1") && !strcmp(r.path, "sub/x.safetensors"),
	      "a full reference");
	CHECK(tfs_hub_parse_ref("hf://org/name", &r, &d) == TFS_OK && !strcmp(r.type, "models") &&
		      !strcmp(r.rev, "main") && !*r.path,
	      "defaults");
	CHECK(tfs_hub_parse_ref("hf://org/name/dir/", &r, &d) == TFS_OK && !strcmp(r.path, "dir"),
	      "a directory");
	const char *bad[] = {"hf://",
			     "hf://org",
			     "hf://org/",
			     "hf://org/na me",
			     "hf://org/name@",
			     "hf://../x",
			     "hf://org/name/a/../b",
			     "hf://org/name/a//b",
			     "hf://org/name@%zz",
			     "hf://org/name@a%0ab"};
	for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
		CHECK(tfs_hub_parse_ref(bad[i], &r, &d) == TFS_ERR_INVAL, "refused: %s", bad[i]);
	struct tfs_dirlist l = {0};
	const char *tree =
		"[{\"type\":\"file\",\"path\":\"a.json\",\"size\":3},{\"type\":\"directory\",\"path\":\"d\"},"
		"{\"type\":\"file\",\"path\":\"d/m.safetensors\",\"size\":134,\"lfs\":{\"size\":9999}}]";
	CHECK(tfs_hub_parse_tree(tree, strlen(tree), &l, &d) == TFS_OK && l.n == 2 && l.size[1] == 9999,
	      "a tree page: the LFS size");
	tfs_dirlist_free(&l);
	const char *evil[] = {"[{\"type\":\"file\",\"path\":\"../x\",\"size\":1}]",
			      "[{\"type\":\"file\",\"path\":\"/etc\",\"size\":1}]",
			      "[{\"type\":\"file\",\"path\":\"a\\u0000b\",\"size\":1}]",
			      "{\"not\":\"a list\"}",
			      "[{\"type\":\"file\",\"path\":\"a\"}]",
			      "[1] x"};
	for (size_t i = 0; i < sizeof evil / sizeof evil[0]; i++) {
		CHECK(tfs_hub_parse_tree(evil[i], strlen(evil[i]), &l, &d) == TFS_ERR_FORMAT,
		      "refused tree %zu", i);
		tfs_dirlist_free(&l);
	}
	char sha[41];
	const char *rev = "{\"sha\":\"0123456789abcdef0123456789abcdef01234567\"}";
	CHECK(tfs_hub_parse_revision(rev, strlen(rev), sha, &d) == TFS_OK &&
		      !strcmp(sha, "0123456789abcdef0123456789abcdef01234567"),
	      "a revision");
	CHECK(tfs_hub_parse_revision("{\"sha\":\"main\"}", 14, sha, &d) == TFS_ERR_FORMAT, "not a commit");

	struct tfs_http_resp rs;
	memset(&rs, 0, sizeof rs);
	const char *lines[] = {"HTTP/1.1 206 Partial\r\n", "Content-Range: bytes 10-19/100\r\n",
			       "Link: <http://h/p?c=2>; rel=\"next\", <http://h/p?c=0>; rel=\"prev\"\r\n",
			       "Retry-After: 7\r\n", "X-Linked-Size: 42\r\n"};
	for (size_t i = 0; i < 5; i++)
		tfs_http_header_line(&rs, lines[i], strlen(lines[i]));
	CHECK(rs.status == 206 && rs.has_range == 1 && rs.range_start == 10 && rs.range_end == 19 &&
		      rs.range_total == 100 && !strcmp(rs.next_link, "http://h/p?c=2") &&
		      rs.retry_after == 7 && rs.has_linked_size && rs.linked_size == 42,
	      "header lines");
	const char *cr[] = {"Content-Range: bytes 20-10/100\r\n", "Content-Range: bytes 0-100/100\r\n",
			    "Content-Range: bytes 0-1/2x\r\n", "Content-Range: items 0-1/2\r\n"};
	for (size_t i = 0; i < 4; i++) {
		tfs_http_header_line(&rs, lines[1], strlen(lines[1]));
		tfs_http_header_line(&rs, cr[i], strlen(cr[i]));
		CHECK(rs.has_range == 0, "a bad Content-Range leaves none: %s", cr[i]);
	}
	/* Content-Encoding: the first coding that is not identity, kept for
	 * the message with only a token's characters; a new response (a
	 * redirect's, a 100's) starts without one. */
	const char *ce[][2] = {{"Content-Encoding: identity\r\n", ""},
			       {"Content-Encoding: gzip\r\n", "gzip"},
			       {"content-encoding:  Identity , br\r\n", "br"},
			       {"Content-Encoding: x\x01y\"z\r\n", "x?y?z"},
			       {"Content-Encoding: ,\r\n", ""},
			       {"Content-Encoding: aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa\r\n",
				"aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"}};
	for (size_t i = 0; i < sizeof ce / sizeof ce[0]; i++) {
		tfs_http_header_line(&rs, lines[0], strlen(lines[0]));
		tfs_http_header_line(&rs, ce[i][0], strlen(ce[i][0]));
		CHECK(!strcmp(rs.encoding, ce[i][1]), "Content-Encoding %zu: '%s'", i, rs.encoding);
	}
	tfs_http_header_line(&rs, lines[0], strlen(lines[0]));
	CHECK(!*rs.encoding, "a new response has no encoding");
	char red[200];
	tfs_url_redact("https://u:p@host/x@y", red, sizeof red);
	CHECK(!strcmp(red, "https://host/x@y"), "redact: %s", red);
	tfs_url_redact("dir@x/file", red, sizeof red);
	CHECK(!strcmp(red, "dir@x/file"), "a path is left alone: %s", red);
}

/* One redaction for every URL: the password masked in place (within an -o
 * list too), and every remembered user:password@ out of every message,
 * even one cut inside it. */
static void test_url_secrets(void)
{
	struct tfs_diag d0;
	char argv_o[] = "ro,hf_endpoint=http://al:s3cr3t@h:1/x,endpoint=http://bo@h2";
	char *v = strstr(argv_o, "http://al");
	tfs_url_hide_n(v, strcspn(v, ","));
	CHECK(!strcmp(argv_o, "ro,hf_endpoint=http://*********@h:1/x,endpoint=http://bo@h2"), "hide_n: %s",
	      argv_o);
	char u[] = "https://user:pw@host/a:b@c";
	tfs_url_hide(u);
	CHECK(!strcmp(u, "https://*******@host/a:b@c"), "hide: %s", u);
	/* A token as the user name (http://TOKEN@host/) is a secret too. */
	char tok[] = "http://hf_T0KEN@host:80/m@x", tok_o[] = "proxy=http://PTOK@px:3128,ro";
	tfs_url_hide(tok);
	CHECK(!strcmp(tok, "http://********@host:80/m@x"), "a user name alone: %s", tok);
	tfs_url_hide_n(tok_o + 6, strcspn(tok_o + 6, ","));
	CHECK(!strcmp(tok_o, "proxy=http://****@px:3128,ro"), "a user name alone in a list: %s", tok_o);
	char bare[] = "http://host/a@b";
	tfs_url_hide(bare);
	CHECK(!strcmp(bare, "http://host/a@b"), "no userinfo: %s", bare);
	CHECK(tfs_url_secret("http://al:s3cr3t@h:1/x") == 0 && tfs_url_secret("/a/path@x") == 0, "secret");
	CHECK(tfs_url_secret("http://hf_T0KEN@h:2/") == 0, "a user name alone");
	tfs_fail(&d0, TFS_ERR_IO, "no answer from http://hf_T0KEN@h:2/m");
	CHECK(!strcmp(d0.msg, "no answer from http://h:2/m"), "a user name alone scrubbed: %s", d0.msg);
	struct tfs_diag d;
	tfs_fail(&d, TFS_ERR_IO, "no answer from http://al:s3cr3t@h:1/x/api nor http://al:s3cr3t@h:1/y");
	CHECK(!strcmp(d.msg, "no answer from http://h:1/x/api nor http://h:1/y"), "scrubbed: %s", d.msg);
	char cut[] = "a long line ending in http://al:s3c";
	tfs_url_scrub(cut);
	CHECK(!strcmp(cut, "a long line ending in http://"), "a cut secret: %s", cut);
	char kept[] = "hf://org/repo@main and http://h:1/";
	tfs_url_scrub(kept);
	CHECK(!strcmp(kept, "hf://org/repo@main and http://h:1/"), "nothing else: %s", kept);
}

/* ---- the Hub token wiped when dropped ---- */

/* Every block freed is looked at first (not under ASan, whose free this
 * would replace): whether it still holds the marked token. */
#ifndef __SANITIZE_ADDRESS__
#include <malloc.h>
void __libc_free(void *p);
static int freed_with_token;
void free(void *p)
{
	if (p && memmem(p, malloc_usable_size(p), "hf_WIPE_", 8))
		freed_with_token++;
	__libc_free(p);
}

static void test_hf_token_wiped(void)
{
	char path[] = "/tmp/tfs-unit-tok-XXXXXX";
	int fd = mkstemp(path);
	const char line[] = "hf_WIPE_0123456789abcdef0123456789abcdef\n";
	CHECK(fd >= 0 && write(fd, line, sizeof line - 1) == (ssize_t)(sizeof line - 1), "a token file");
	close(fd);
	struct tfs_diag d = {""};
	char *auth = NULL, *from = NULL, *auth2 = NULL;
	struct tfs_hf_api a = {0};
	pthread_mutex_init(&a.auth_lock, NULL);
	freed_with_token = 0;
	CHECK(tfs_hf_token(NULL, path, &auth, &from, NULL, &d) == TFS_OK && auth && strstr(auth, "hf_WIPE_"),
	      "read: %s", d.msg);
	CHECK(freed_with_token == 0, "the file's bytes freed unwiped (%d)", freed_with_token);
	CHECK(tfs_hf_token(NULL, path, &auth2, NULL, NULL, &d) == TFS_OK, "read again: %s", d.msg);
	tfs_hf_set_token(&a, auth, from, 0);
	tfs_hf_set_token(&a, auth2, NULL, 0); /* the first one replaced */
	CHECK(freed_with_token == 0, "a replaced token freed unwiped (%d)", freed_with_token);
	tfs_hf_api_free(&a);
	CHECK(freed_with_token == 0, "the token freed unwiped at the end (%d)", freed_with_token);
	auth = strdup("Authorization: Bearer hf_WIPE_x");
	tfs_hf_token_free(auth);
	tfs_hf_token_free(NULL);
	CHECK(freed_with_token == 0, "tfs_hf_token_free (%d)", freed_with_token);
	unlink(path);
}
#else
static void test_hf_token_wiped(void)
{
}
#endif

/* ---- the Hub token's length ---- */

/* A token longer than a request's Authorization line holds is refused
 * where it is read, naming where it came from; and were one held, the
 * credentials of a request to the Hub fail rather than carry it cut. */
static void test_hf_token_length(void)
{
	struct tfs_diag d = {""};
	char *auth = NULL, *from = NULL;
	size_t max = TFS_HF_TOKEN_MAX;
	char *tok = malloc(max + 2);
	memset(tok, 'a', max + 1);
	tok[max] = 0;
	setenv("HF_TOKEN", tok, 1);
	CHECK(tfs_hf_token("/nonexistent", NULL, &auth, &from, NULL, &d) == TFS_OK && auth &&
		      strlen(auth) == max + strlen("Authorization: Bearer ") &&
		      strlen(auth) < TFS_HTTP_CRED_MAX,
	      "the longest token: %s", d.msg);
	free(auth);
	free(from);
	tok[max] = 'a';
	tok[max + 1] = 0;
	setenv("HF_TOKEN", tok, 1);
	auth = NULL;
	CHECK(tfs_hf_token("/nonexistent", NULL, &auth, &from, NULL, &d) == TFS_ERR_INVAL && !auth &&
		      strstr(d.msg, "HF_TOKEN: refused: the token is 8170 bytes") && !strstr(d.msg, "aaaa"),
	      "one byte more: %s", d.msg);
	unsetenv("HF_TOKEN");

	struct tfs_hf_api a = {0};
	struct tfs_http_creds *c = calloc(1, sizeof *c);
	snprintf(a.origin, sizeof a.origin, "http://hub");
	pthread_mutex_init(&a.auth_lock, NULL);
	a.auth = malloc(TFS_HTTP_CRED_MAX + 16);
	memset(a.auth, 'b', TFS_HTTP_CRED_MAX + 15);
	a.auth[TFS_HTTP_CRED_MAX + 15] = 0;
	d.msg[0] = 0;
	CHECK(tfs_hf_authorize(&a, "http://hub/x", c, &d) != TFS_OK && !c->auth[0] &&
		      strstr(d.msg, "longer than a request carries"),
	      "a held token too long: %s", d.msg);
	memset(c, 0, sizeof *c);
	CHECK(tfs_hf_authorize(&a, "http://cdn/x", c, &d) == TFS_OK && !c->auth[0], "not the Hub's host");
	a.auth[100] = 0;
	CHECK(tfs_hf_authorize(&a, "http://hub/x", c, &d) == TFS_OK && strlen(c->auth) == 100, "a short one");
	tfs_hf_api_free(&a);
	free(c);
	free(tok);
}

int main(int argc, char **argv)
{
	check_args(argc, argv);
	RUN(test_ini);
	RUN(test_credentials);
	RUN(test_s3_listing);
	RUN(test_hub_and_http);
	RUN(test_hf_token_length);
	RUN(test_hf_token_wiped);
	RUN(test_url_secrets);
	return check_report();
}
