/* A source over bytes in memory, not copied (core/source.h,
 * tfs_source_open_mem): for tests and the fuzzers. */
#include "core/source.h"

#include <stdlib.h>
#include <string.h>

struct mem_source {
	struct tfs_source base;
	const unsigned char *data;
	size_t len;
};

static tfs_err mem_pread(struct tfs_source *s, void *buf, size_t len, uint64_t off)
{
	struct mem_source *m = (struct mem_source *)s;
	if (off > m->len || len > m->len - off)
		return TFS_ERR_SHORT;
	memcpy(buf, m->data + off, len);
	return TFS_OK;
}

static tfs_err mem_identity(struct tfs_source *s, struct tfs_identity *id)
{
	*id = s->id;
	return TFS_OK;
}

static void mem_close(struct tfs_source *s)
{
	free(s->location);
	free(s);
}

static const struct tfs_source_ops mem_ops = {
	.pread = mem_pread,
	.identity = mem_identity,
	.close = mem_close,
};

tfs_err tfs_source_open_mem(const void *data, size_t len, const char *name, struct tfs_source **out)
{
	struct mem_source *m = calloc(1, sizeof *m);
	if (!m)
		return TFS_ERR_NOMEM;
	m->base.ops = &mem_ops;
	m->base.fd = -1;
	m->base.location = strdup(name ? name : "(memory)");
	if (!m->base.location) {
		free(m);
		return TFS_ERR_NOMEM;
	}
	m->base.id.size = len;
	m->data = data;
	m->len = len;
	*out = &m->base;
	return TFS_OK;
}
