#include "sources/hub.h"

#include <json.h>
#include <stdio.h>
#include <string.h>

#include "core/jscan.h"
#include "core/hex.h"

static int is_name_char(char c)
{
	return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-' ||
	       c == '_' || c == '.';
}

tfs_err tfs_hub_parse_ref(const char *spec, struct tfs_hub_ref *r, struct tfs_diag *d)
{
	memset(r, 0, sizeof *r);
	if (strncmp(spec, "hf://", 5) != 0)
		return tfs_fail(d, TFS_ERR_INVAL, "not an hf:// reference");
	const char *p = spec + 5;
	snprintf(r->type, sizeof r->type, "models");
	if (strncmp(p, "models/", 7) == 0) {
		p += 7;
	} else if (strncmp(p, "datasets/", 9) == 0) {
		snprintf(r->type, sizeof r->type, "datasets");
		p += 9;
	}
	/* ORG/REPO, each a Hub name; then @REV up to the next '/' */
	const char *slash = strchr(p, '/');
	if (!slash || slash == p)
		return tfs_fail(d, TFS_ERR_INVAL, "expected hf://ORG/REPO[@REV][/PATH]");
	const char *name = slash + 1;
	const char *end = name + strcspn(name, "/@");
	if (end == name)
		return tfs_fail(d, TFS_ERR_INVAL, "expected hf://ORG/REPO[@REV][/PATH]");
	for (const char *q = p; q < end; q++)
		if (q != slash && !is_name_char(*q))
			return tfs_fail(d, TFS_ERR_INVAL,
					"a repository is ORG/REPO of letters, digits, '-', '_' and '.'");
	if ((size_t)(end - p) >= sizeof r->repo || !tfs_hub_safe_path(p, (size_t)(end - p)))
		return tfs_fail(d, TFS_ERR_INVAL, "not a repository name");
	memcpy(r->repo, p, (size_t)(end - p));
	p = end;
	size_t o = 0;
	if (*p == '@') {
		p++;
		while (*p && *p != '/') {
			int c = (unsigned char)*p;
			if (c == '%') {
				int h = tfs_hexval(p[1]), l = h >= 0 ? tfs_hexval(p[2]) : -1;
				if (l < 0)
					return tfs_fail(d, TFS_ERR_INVAL, "bad %%-escape in the revision");
				c = h << 4 | l;
				p += 2;
			}
			if (c < 0x20 || c == 0x7f || o + 1 >= sizeof r->rev)
				return tfs_fail(d, TFS_ERR_INVAL, "not a revision name");
			r->rev[o++] = (char)c;
			p++;
		}
		if (o == 0)
			return tfs_fail(d, TFS_ERR_INVAL, "an empty revision after '@'");
	} else {
		memcpy(r->rev, "main", 5);
	}
	if (*p == '/') {
		p++;
		size_t n = strlen(p);
		while (n && p[n - 1] == '/')
			n--; /* a trailing slash names a directory all the same */
		if (n) {
			if (n >= sizeof r->path || !tfs_hub_safe_path(p, n))
				return tfs_fail(d, TFS_ERR_INVAL, "not a path in a repository");
			memcpy(r->path, p, n);
		}
	}
	return TFS_OK;
}

int tfs_hub_safe_path(const char *p, size_t n)
{
	if (n == 0 || n > 4096 || p[0] == '/')
		return 0;
	size_t seg = 0;
	for (size_t i = 0; i <= n; i++) {
		if (i == n || p[i] == '/') {
			size_t len = i - seg;
			if (len == 0 || (len == 1 && p[seg] == '.') ||
			    (len == 2 && p[seg] == '.' && p[seg + 1] == '.'))
				return 0;
			seg = i + 1;
			continue;
		}
		unsigned char c = (unsigned char)p[i];
		if (c < 0x20 || c == 0x7f)
			return 0;
	}
	return 1;
}

int tfs_hub_is_commit(const char *s)
{
	size_t i = 0;
	for (; s[i]; i++)
		if (!((s[i] >= '0' && s[i] <= '9') || (s[i] >= 'a' && s[i] <= 'f')))
			return 0;
	return i == 40;
}

/* Parses JSON text that must be valid UTF-8 and of bounded depth. */
static json_object *parse(const char *json, size_t n, const char *what, struct tfs_diag *d)
{
	if (tfs_utf8_check((const unsigned char *)json, n) != n || n > (size_t)INT32_MAX) {
		tfs_fail(d, TFS_ERR_FORMAT, "the Hub's %s is not UTF-8 text", what);
		return NULL;
	}
	struct json_tokener *tok = json_tokener_new_ex(16);
	if (!tok) {
		tfs_fail(d, TFS_ERR_NOMEM, "out of memory");
		return NULL;
	}
	json_object *o = json_tokener_parse_ex(tok, json, (int)n);
	int rest = o ? (int)n - (int)json_tokener_get_parse_end(tok) : 0;
	for (; o && rest > 0; rest--) {
		char c = json[n - (size_t)rest];
		if (c != ' ' && c != '\n' && c != '\r' && c != '\t') {
			json_object_put(o);
			o = NULL;
		}
	}
	json_tokener_free(tok);
	if (!o)
		tfs_fail(d, TFS_ERR_FORMAT, "the Hub's %s is not valid JSON", what);
	return o;
}

static int get_size(json_object *e, uint64_t *v)
{
	json_object *lfs, *sz;
	if (json_object_object_get_ex(e, "lfs", &lfs) && json_object_is_type(lfs, json_type_object) &&
	    json_object_object_get_ex(lfs, "size", &sz) && json_object_is_type(sz, json_type_int) &&
	    json_object_get_int64(sz) >= 0) {
		*v = (uint64_t)json_object_get_int64(sz);
		return 0;
	}
	if (json_object_object_get_ex(e, "size", &sz) && json_object_is_type(sz, json_type_int) &&
	    json_object_get_int64(sz) >= 0) {
		*v = (uint64_t)json_object_get_int64(sz);
		return 0;
	}
	return -1;
}

tfs_err tfs_hub_parse_tree(const char *json, size_t n, struct tfs_dirlist *out, struct tfs_diag *d)
{
	json_object *a = parse(json, n, "tree listing", d);
	if (!a)
		return TFS_ERR_FORMAT;
	tfs_err e = TFS_OK;
	if (!json_object_is_type(a, json_type_array)) {
		e = tfs_fail(d, TFS_ERR_FORMAT, "the Hub's tree listing is not a JSON array");
		goto out;
	}
	size_t len = json_object_array_length(a);
	for (size_t i = 0; i < len && !e; i++) {
		json_object *ent = json_object_array_get_idx(a, i), *type, *path;
		if (!json_object_is_type(ent, json_type_object) ||
		    !json_object_object_get_ex(ent, "type", &type) ||
		    !json_object_object_get_ex(ent, "path", &path) ||
		    !json_object_is_type(type, json_type_string) ||
		    !json_object_is_type(path, json_type_string)) {
			e = tfs_fail(d, TFS_ERR_FORMAT,
				     "the Hub's tree listing has an entry without type and path");
			break;
		}
		const char *p = json_object_get_string(path);
		size_t pl = (size_t)json_object_get_string_len(path);
		if (strlen(p) != pl || !tfs_hub_safe_path(p, pl)) {
			char q[200];
			tfs_quote(q, sizeof q, p, pl);
			e = tfs_fail(d, TFS_ERR_FORMAT, "the Hub's tree listing holds the unsafe path %s", q);
			break;
		}
		if (strcmp(json_object_get_string(type), "file") != 0)
			continue;
		uint64_t size;
		if (get_size(ent, &size)) {
			e = tfs_fail(d, TFS_ERR_FORMAT, "the Hub's tree listing gives no size for a file");
			break;
		}
		if (tfs_dirlist_add(out, p, size))
			e = tfs_fail(d, TFS_ERR_NOMEM, "out of memory");
	}
out:
	json_object_put(a);
	return e;
}

tfs_err tfs_hub_parse_revision(const char *json, size_t n, char sha[41], struct tfs_diag *d)
{
	json_object *o = parse(json, n, "revision", d), *s;
	if (!o)
		return TFS_ERR_FORMAT;
	tfs_err e = TFS_OK;
	if (!json_object_is_type(o, json_type_object) || !json_object_object_get_ex(o, "sha", &s) ||
	    !json_object_is_type(s, json_type_string) || !tfs_hub_is_commit(json_object_get_string(s)))
		e = tfs_fail(d, TFS_ERR_FORMAT, "the Hub's revision answer has no commit \"sha\"");
	else
		memcpy(sha, json_object_get_string(s), 41);
	json_object_put(o);
	return e;
}
