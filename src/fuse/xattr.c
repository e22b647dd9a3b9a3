/* The extended attributes of tensor files: dtype, shape, name, offsets and
 * where the bytes come from (README: Extended attributes). */
#include "fuse/fuse_i.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/xattr.h>

#include "views/digest.h"
#include "views/tensor.h"

/* Linux refuses xattr values over 64 KiB (linux/limits.h XATTR_SIZE_MAX). */
#define TFS_XATTR_MAX 65536

enum {
	XA_DTYPE,
	XA_SHAPE,
	XA_NAME,
	XA_OFFSETS,
	XA_SOURCE,
	XA_SOURCE_DTYPE,
	XA_ETAG,
	XA_REVISION,
	XA_COMMENT,
	XA_COUNT
};
static const char *const xa_names[XA_COUNT] = {
	"user.dtype",
	"user.shape",
	"user.name",
	"user.offsets",
	"user.source",
	"user.source_dtype", /* only on tensors served converted */
	"user.etag",
	"user.revision", /* only where the source pins a version */
	/* freedesktop's comment attribute, which file managers can show in a
	 * column: "BF16 [4096, 4096], 32 MiB" */
	"user.xdg.comment",
};

/* user.xdg.comment's value: the dtype as served, the shape, the size. */
static size_t comment(const struct tfs_fs *fs, const struct tfs_node *n, char *out, size_t cap)
{
	size_t dl;
	const char *dt = tfs_node_dtype(fs->tree, n, &dl);
	const struct tfs_table *h = &fs->m->shards[n->shard].h;
	const struct tfs_tensor *t = &h->t[n->ref];
	size_t o = (size_t)snprintf(out, cap, "%.*s [", (int)(dl < 64 ? dl : 64), dt);
	for (uint32_t i = 0; i < t->ndim && o < cap - 40; i++)
		o += (size_t)snprintf(out + o, cap - o, "%s%llu", i ? ", " : "",
				      (unsigned long long)h->dims[t->dims_off + i]);
	static const char *const units[] = {"bytes", "KiB", "MiB", "GiB", "TiB"};
	double v = (double)tfs_node_size(fs->tree, n);
	int u = 0;
	while (v >= 1024 && u < 4) {
		v /= 1024;
		u++;
	}
	o += (size_t)snprintf(out + o, cap - o, u ? (v < 10 ? "], %.1f %s" : "], %.0f %s") : "], %.0f %s", v,
			      units[u]);
	return o < cap ? o : cap - 1;
}

static void reply_value(fuse_req_t req, size_t size, const char *v, size_t len);

/* user.hash.ALGO: the digest of the bytes the file serves, worked out when
 * asked for by name (a size query is answered from the length alone) and
 * kept; listed only once known, so that getfattr -d, file managers and
 * backup tools that copy every listed attribute never read a tensor. */
static const char *const hash_names[TFS_DIGEST_COUNT] = {"user.hash.sha256", "user.hash.xxh64"};

static int hash_xattr(fuse_req_t req, struct tfs_fs *fs, fuse_ino_t ino, const char *name, size_t size)
{
	for (int a = 0; a < TFS_DIGEST_COUNT; a++) {
		if (strcmp(name, hash_names[a]) != 0)
			continue;
		char hex[80];
		size_t len = tfs_digest_hex_len((enum tfs_digest_algo)a);
		struct tfs_diag d;
		tfs_err e = TFS_OK;
		if (size != 0)
			e = tfs_digest_node(fs->tree, (uint32_t)ino, (enum tfs_digest_algo)a, hex, &d);
		if (e)
			fuse_reply_err(req, tfs_errno(e));
		else
			reply_value(req, size, hex, len);
		return 1;
	}
	return 0;
}

/* Whether a tensor has the attribute. */
static int xa_present(const struct tfs_fs *fs, const struct tfs_node *n, int which)
{
	const struct tfs_source *src = fs->m->shards[n->shard].src;
	switch (which) {
	case XA_SOURCE_DTYPE:
		return tfs_node_converted(fs->tree, n);
	case XA_ETAG:
		return src->etag != NULL;
	case XA_REVISION:
		return src->revision != NULL;
	default:
		return 1;
	}
}

/* Hands a value to the kernel following the getxattr size protocol. */
static void reply_value(fuse_req_t req, size_t size, const char *v, size_t len)
{
	if (len > TFS_XATTR_MAX)
		fuse_reply_err(req, E2BIG);
	else if (size == 0)
		fuse_reply_xattr(req, len);
	else if (size < len)
		fuse_reply_err(req, ERANGE);
	else
		fuse_reply_buf(req, v, len);
}

void tfs_fuse_getxattr(fuse_req_t req, fuse_ino_t ino, const char *name, size_t size)
{
	struct tfs_fs *fs = tfs_fs_of(req);
	const struct tfs_node *n = tfs_node_of(fs, ino);
	int which = -1;
	if (!n) {
		fuse_reply_err(req, ENOENT);
		return;
	}
	/* Only user.* exists here. EOPNOTSUPP for the other namespaces lets
	 * ls -l stop asking for security.selinux and POSIX ACLs after the
	 * first file (coreutils remembers it per device), which saves two
	 * round trips per file; the kernel disables getxattr only on ENOSYS. */
	if (strncmp(name, "user.", 5) != 0) {
		fuse_reply_err(req, EOPNOTSUPP);
		return;
	}
	uint64_t done, total;
	if (ino == FUSE_ROOT_ID && strcmp(name, "user.counters") == 0) {
		/* What the sources did so far: requests, bytes, cache. */
		struct tfs_counters c;
		char v[400];
		tfs_sources_counters(&c);
		int k = tfs_counters_line(&c, v, sizeof v);
		reply_value(req, size, v, (size_t)k);
		return;
	}
	if (ino == FUSE_ROOT_ID && strcmp(name, "user.warm") == 0) {
		/* The warm-up's progress: bytes cached and of all. */
		char v[48];
		if (!tfs_sources_warm(&done, &total)) {
			fuse_reply_err(req, ENODATA);
			return;
		}
		int k = snprintf(v, sizeof v, "%llu %llu", (unsigned long long)done,
				 (unsigned long long)total);
		reply_value(req, size, v, (size_t)k);
		return;
	}
	for (int i = 0; i < XA_COUNT; i++)
		if (strcmp(name, xa_names[i]) == 0)
			which = i;
	if (n->kind == TFS_NODE_TENSOR && hash_xattr(req, fs, ino, name, size))
		return;
	if (n->kind != TFS_NODE_TENSOR || which < 0 || !xa_present(fs, n, which)) {
		fuse_reply_err(req, ENODATA);
		return;
	}
	const struct tfs_shard *sh = &fs->m->shards[n->shard];
	const struct tfs_table *h = &sh->h;
	const struct tfs_tensor *t = &h->t[n->ref];
	size_t len;
	const char *v;
	char small[64];
	switch (which) {
	case XA_DTYPE:
		v = tfs_node_dtype(fs->tree, n, &len);
		reply_value(req, size, v, len);
		return;
	case XA_SOURCE_DTYPE:
		v = tfs_tensor_dtype(h, t, &len);
		reply_value(req, size, v, len);
		return;
	case XA_NAME:
		reply_value(req, size, tfs_tensor_name(h, t), t->name_len);
		return;
	case XA_SOURCE:
		reply_value(req, size, sh->location, strlen(sh->location));
		return;
	case XA_ETAG:
		reply_value(req, size, sh->src->etag, strlen(sh->src->etag));
		return;
	case XA_REVISION:
		reply_value(req, size, sh->src->revision, strlen(sh->src->revision));
		return;
	case XA_OFFSETS:
		len = tfs_node_offsets(fs->tree, n, small);
		reply_value(req, size, small, len);
		return;
	case XA_COMMENT: {
		char c[400];
		reply_value(req, size, c, comment(fs, n, c, sizeof c));
		return;
	}
	case XA_SHAPE: {
		/* Shapes are small but not bounded by the format: size the
		 * buffer per request. */
		char *b = malloc(tfs_node_shape_max(fs->tree, n));
		if (!b) {
			fuse_reply_err(req, ENOMEM);
			return;
		}
		reply_value(req, size, b, tfs_node_shape(fs->tree, n, b));
		free(b);
		return;
	}
	}
	fuse_reply_err(req, ENODATA);
}

void tfs_fuse_listxattr(fuse_req_t req, fuse_ino_t ino, size_t size)
{
	struct tfs_fs *fs = tfs_fs_of(req);
	const struct tfs_node *n = tfs_node_of(fs, ino);
	char list[256];
	size_t len = 0;
	if (!n) {
		fuse_reply_err(req, ENOENT);
		return;
	}
	uint64_t done, total;
	struct tfs_counters cn;
	if (ino == FUSE_ROOT_ID && (tfs_sources_counters(&cn), cn.requests > 0)) {
		/* Listed where there is something to count (a remote source);
		 * a local mount's root keeps no attribute. */
		memcpy(list, "user.counters", 14);
		len = 14;
	}
	if (ino == FUSE_ROOT_ID && tfs_sources_warm(&done, &total)) {
		memcpy(list + len, "user.warm", 10);
		len += 10;
	}
	if (n->kind == TFS_NODE_TENSOR) {
		for (int i = 0; i < XA_COUNT; i++) {
			if (!xa_present(fs, n, i))
				continue;
			size_t l = strlen(xa_names[i]) + 1;
			memcpy(list + len, xa_names[i], l);
			len += l;
		}
		char hex[80];
		for (int a = 0; a < TFS_DIGEST_COUNT; a++) {
			if (!tfs_digest_known(fs->tree, (uint32_t)ino, (enum tfs_digest_algo)a, hex))
				continue;
			size_t l = strlen(hash_names[a]) + 1;
			memcpy(list + len, hash_names[a], l);
			len += l;
		}
	}
	reply_value(req, size, list, len);
}
