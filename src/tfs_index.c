/* Shard indexes (model.safetensors.index.json, pytorch_model.bin.index.json):
 * read with the strict scanner, without building a document tree, so that
 * a million-entry weight_map is cheap. */
#include "tfs_index.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tfs_jscan.h"
#include "tfs_table.h"

static tfs_err scan_weight_map(struct tfs_jscan *s, const struct tfs_index_cb *cb)
{
	tfs_err e;
	tfs_js_ws(s);
	if (tfs_js_peek(s) != '{')
		return tfs_fail(s->d, TFS_ERR_FORMAT, "not a safetensors index: \"weight_map\" is not an object");
	if ((e = tfs_js_enter(s)))
		return e;
	if (tfs_js_close_if_empty(s, '}'))
		return TFS_OK;
	/* The name is decoded into s->tmp, which the shard's decoding would
	 * overwrite: keep a copy when it had escapes. */
	char *keep = NULL;
	size_t keepcap = 0;
	int r;
	do {
		struct tfs_jstr name, shard;
		tfs_js_ws(s);
		if (tfs_js_peek(s) != '"') {
			e = tfs_js_err(s, "expected a string key");
			break;
		}
		if ((e = tfs_js_string(s, &name)))
			break;
		if (name.p == s->tmp) {
			if (tfs_grow((void **)&keep, &keepcap, name.len + 1, 1)) {
				e = tfs_js_nomem(s);
				break;
			}
			memcpy(keep, name.p, name.len);
			name.p = keep;
		}
		if ((e = tfs_js_expect(s, ':', "expected ':'")))
			break;
		tfs_js_ws(s);
		if (tfs_js_peek(s) != '"') {
			char q[160], msg[256];
			tfs_quote(q, sizeof q, name.p, name.len);
			snprintf(msg, sizeof msg, "weight_map entry %s is not a shard file name", q);
			e = tfs_fail(s->d, TFS_ERR_FORMAT, "%s", msg);
			break;
		}
		if ((e = tfs_js_string(s, &shard)) ||
		    (e = cb->entry(cb->ctx, name.p, name.len, shard.p, shard.len, s->d)))
			break;
	} while ((r = tfs_js_next(s, '}', &e)) > 0);
	free(keep);
	return e;
}

tfs_err tfs_index_scan(const char *text, size_t n, const struct tfs_index_cb *cb,
		       struct tfs_diag *d)
{
	struct tfs_jscan s;
	tfs_err e = TFS_OK;
	int seen_wm = 0;
	size_t bad = tfs_utf8_check((const unsigned char *)text, n);
	if (bad != n)
		return tfs_fail(d, TFS_ERR_FORMAT, "the index is not valid UTF-8 (at byte %zu)", bad);
	tfs_js_init(&s, "index", text, n, TFS_INDEX_NESTING_MAX, d);
	tfs_js_ws(&s);
	if (tfs_js_peek(&s) != '{') {
		e = tfs_js_err(&s, "the index must be a JSON object");
		goto out;
	}
	if ((e = tfs_js_enter(&s)))
		goto out;
	int r = 0;
	if (!tfs_js_close_if_empty(&s, '}')) {
		do {
			struct tfs_jstr key;
			char *kcopy;
			tfs_js_ws(&s);
			if (tfs_js_peek(&s) != '"') {
				e = tfs_js_err(&s, "expected a string key");
				goto out;
			}
			if ((e = tfs_js_string(&s, &key)) || (e = tfs_js_expect(&s, ':', "expected ':'")))
				goto out;
			if (TFS_JS_IS(&key, "weight_map")) {
				if (seen_wm++) {
					e = tfs_fail(d, TFS_ERR_FORMAT, "the index has two \"weight_map\" members");
					goto out;
				}
				if ((e = scan_weight_map(&s, cb)))
					goto out;
			} else {
				kcopy = malloc(key.len + 1);
				if (!kcopy) {
					e = tfs_js_nomem(&s);
					goto out;
				}
				memcpy(kcopy, key.p, key.len);
				kcopy[key.len] = 0;
				tfs_js_ws(&s);
				const unsigned char *v = s.p;
				e = tfs_js_skip(&s);
				if (!e)
					e = cb->other(cb->ctx, kcopy, key.len, (const char *)v, (size_t)(s.p - v), d);
				free(kcopy);
				if (e)
					goto out;
			}
		} while ((r = tfs_js_next(&s, '}', &e)) > 0);
		if (r < 0)
			goto out;
	}
	tfs_js_ws(&s);
	if (s.p != s.end) {
		e = tfs_js_err(&s, "unexpected text after the object");
		goto out;
	}
	if (!seen_wm)
		e = tfs_fail(d, TFS_ERR_FORMAT, "not a safetensors index: no \"weight_map\" object");
out:
	tfs_js_done(&s);
	return e;
}
