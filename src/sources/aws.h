/* What S3 needs besides HTTP, without touching the network: credentials
 * found as the AWS tools find them (the environment, then the profile in
 * the shared credentials and config files), the INI syntax of those files,
 * and the ListObjectsV2 answer. Parsed strictly: they are input from the
 * user's files and from the network. The s3:// driver (sources/s3.c) uses
 * them; unit tests and the fuzzer feed them directly. */
#ifndef TFS_AWS_H
#define TFS_AWS_H

#include <stddef.h>
#include <stdint.h>

#include "core/err.h"

/* Calls entry(section, key, value) for every "key = value" line, in order:
 * sections are "[name]"; ';' and '#' start comment lines; keys and values
 * are trimmed; a line that is none of these fails with its number. */
typedef tfs_err (*tfs_ini_fn)(void *ctx, const char *section, const char *key, const char *value);
tfs_err tfs_ini_parse(const char *text, size_t n, tfs_ini_fn entry, void *ctx, struct tfs_diag *d);

struct tfs_aws_creds {
	char key[256], secret[256], token[4096];
	char region[64];
	char profile[128]; /* where they came from, for messages */
	int from_env;
};

/* AWS_ACCESS_KEY_ID/AWS_SECRET_ACCESS_KEY/AWS_SESSION_TOKEN, else the
 * profile AWS_PROFILE (default "default") in AWS_SHARED_CREDENTIALS_FILE
 * (~/.aws/credentials) and AWS_CONFIG_FILE (~/.aws/config, where a
 * profile's section is "[profile NAME]"); the region from AWS_REGION,
 * AWS_DEFAULT_REGION, the profile, else us-east-1. With need_key false
 * (no_sign_request) only the region is looked for. A file that cannot be
 * parsed fails with its name and line; missing keys fail with what to set. */
tfs_err tfs_aws_credentials(struct tfs_aws_creds *c, int need_key, struct tfs_diag *d);
/* The shared credentials and config files the two above read
 * (AWS_SHARED_CREDENTIALS_FILE, AWS_CONFIG_FILE, else ~/.aws/), each in
 * n bytes. */
void tfs_aws_files(char *cred, char *conf, size_t n);
/* The same with the profile named (-o aws_profile=, for an fstab line,
 * which cannot set the environment): it is read even when the
 * environment holds keys. NULL or "": as above. */
tfs_err tfs_aws_credentials_of(struct tfs_aws_creds *c, int need_key, const char *profile,
			       struct tfs_diag *d);

/* One page of a ListObjectsV2 answer: every <Contents> (key, size, ETag)
 * goes to object() (<CommonPrefixes>, the subdirectories, are not read);
 * *truncated and next (NextContinuationToken) say whether a page follows. The five
 * XML entities and character references are decoded; anything else that
 * is not well formed fails. */
struct tfs_s3_list_cb {
	tfs_err (*object)(void *ctx, const char *key, uint64_t size, const char *etag);
	void *ctx;
};
tfs_err tfs_s3_parse_list(const char *xml, size_t n, const struct tfs_s3_list_cb *cb, int *truncated,
			  char *next, size_t nextsz, struct tfs_diag *d);

/* The text of the first <Code> of an S3 error body, or "". */
void tfs_s3_error_code(const char *xml, size_t n, char *out, size_t outsz);

#endif
