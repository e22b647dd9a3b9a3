/* What a mount shows, before any FUSE: one checkpoint file, or the shards
 * of a sharded checkpoint (an index file, a directory holding one index, or a
 * directory of checkpoint files), each read and validated by its format's
 * driver, and the shards checked against each other and against the index. */
#ifndef TFS_MODEL_H
#define TFS_MODEL_H

#include <stdint.h>

#include "core/err.h"
#include "core/format.h"
#include "core/source.h"

struct tfs_shard {
	char *name;     /* file name as the index or directory gives it */
	char *sname;    /* its name in the store */
	char *path;     /* as the user would write it, for messages */
	char *location; /* absolute path or URL: user.source */
	struct tfs_source *src;
	struct tfs_table h;
	int missing;            /* index_only: the file is not there */
	int lfs_pointer;        /* index_only: a Git LFS pointer is there instead */
	uint64_t index_tensors; /* index_only: weight_map entries for it */
};

enum tfs_model_kind { TFS_MODEL_FILE, TFS_MODEL_INDEX, TFS_MODEL_DIR };

struct tfs_model {
	enum tfs_model_kind kind;
	struct tfs_shard *shards;
	uint32_t nshards;
	char *index_path; /* the index file, when there is one */
	char *index_json; /* the index, pretty-printed, or NULL */
	size_t index_len;
	struct tfs_store *store; /* where the files are */
	/* What its sources share (the remote layer: its cache, its HTTP
	 * client), the model's own: freed with it, after its sources. */
	struct tfs_sources *sources;
	struct tfs_identity id; /* of the file, index or directory given */
	uint64_t ntensors;
	/* Set only with tfs_model_opts.index_only_ok, when shards are
	 * missing: the model is what the index alone tells (tensor counts per
	 * shard, its metadata), with no headers; it cannot be mounted. */
	int index_only;
	char *index_meta; /* the index's "metadata" member as JSON, or NULL */
};

/* Where a message is about, so the CLI can print "tensorfs: WHERE: MSG". */
struct tfs_model_diag {
	char where[1024];
	struct tfs_diag d;
};

typedef void (*tfs_model_warn_fn)(void *ctx, const char *where, const char *msg);

struct tfs_model_opts {
	unsigned parse_flags;            /* TFS_PARSE_* */
	const struct tfs_format *format; /* -o input=: this driver for every file */
	tfs_model_warn_fn warn;
	void *warn_ctx;
	unsigned threads;            /* table readers; 0 picks 4 per core, up to
				      * TFS_MODEL_READERS */
	const struct tfs_opts *opts; /* the source drivers' options */
	int index_only_ok;           /* an index whose shards are missing gives an
				      * index_only model, not an error */
};

#define TFS_MODEL_READERS 16

/* Opens SOURCE through the source driver that claims it. */
tfs_err tfs_model_open(const char *source, const struct tfs_model_opts *o, struct tfs_model *m,
		       struct tfs_model_diag *md);
void tfs_model_free(struct tfs_model *m);

/* A one-file model over an already parsed header (tests, the fuzzer). It
 * takes ownership of `src` and of the header's contents. */
tfs_err tfs_model_single(struct tfs_model *m, struct tfs_source *src, struct tfs_table *h);

/* __metadata__.json for the model: the one file's __metadata__; for shards,
 * their __metadata__ when all agree, else an object keyed by shard name. */
tfs_err tfs_model_meta_json(const struct tfs_model *m, char **out, size_t *len);

#endif
