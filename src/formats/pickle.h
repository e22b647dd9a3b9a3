/* A pickle reader that executes nothing: a stack machine over the opcodes
 * that protocol 2 writers (torch.save) and the protocol 3/4 additions use,
 * building plain values. A GLOBAL is looked up in the caller's allow-list
 * and never imported; any other is refused by name. Calls (REDUCE, NEWOBJ)
 * and persistent ids go to the caller, which builds its own objects from
 * the arguments. BUILD's state is checked and dropped (no __setstate__).
 *
 * Memory is bounded by the input: every object comes from one opcode, and
 * the whole machine is capped at a multiple of the pickle's size. */
#ifndef TFS_PICKLE_H
#define TFS_PICKLE_H

#include <stddef.h>
#include <stdint.h>

#include "core/err.h"

enum tfs_pk_kind {
	TFS_PK_NONE,
	TFS_PK_BOOL,
	TFS_PK_INT,
	TFS_PK_FLOAT,
	TFS_PK_STR,
	TFS_PK_BYTES,
	TFS_PK_TUPLE,
	TFS_PK_LIST,
	TFS_PK_DICT,
	TFS_PK_SET,
	TFS_PK_GLOBAL, /* an allowed global: `gid` */
	TFS_PK_USER,   /* the caller's object: `ukind`, `user` */
};

struct tfs_pk_obj {
	uint8_t kind;
	uint8_t ukind;
	uint32_t n, cap; /* tuple/list/set items; dict: pairs */
	union {
		int64_t i; /* BOOL, INT */
		double f;
		struct {
			const char *s; /* into the pickle, not NUL-terminated */
			size_t len;
		} str;                 /* STR (UTF-8), BYTES */
		struct tfs_pk_obj **v; /* TUPLE, LIST, SET; DICT: key, value, ... */
		int gid;
		void *user;
	} u;
};

struct tfs_pk;

struct tfs_pk_ops {
	/* The id (>= 0) of an allowed global, or -1: refused. */
	int (*global)(void *ctx, const char *mod, size_t ml, const char *name, size_t nl);
	/* REDUCE and NEWOBJ of an allowed global with a tuple of arguments. */
	tfs_err (*call)(void *ctx, struct tfs_pk *vm, int gid, const struct tfs_pk_obj *args,
			struct tfs_pk_obj **out, struct tfs_diag *d);
	/* BINPERSID: the object a persistent id stands for. */
	tfs_err (*persid)(void *ctx, struct tfs_pk *vm, const struct tfs_pk_obj *pid, struct tfs_pk_obj **out,
			  struct tfs_diag *d);
	void *ctx;
};

/* Runs the pickle in `p` (kept by the caller for the result's lifetime)
 * and gives the object STOP returns. The objects live in `*vmp` until
 * tfs_pk_free. On failure, one line in `d` saying which opcode at which
 * byte, or which global was refused. */
tfs_err tfs_pk_load(const unsigned char *p, size_t n, const struct tfs_pk_ops *ops, struct tfs_pk **vmp,
		    struct tfs_pk_obj **out, struct tfs_diag *d);

/* A new object owned by the machine (for callbacks), or NULL when the
 * memory cap is reached. */
struct tfs_pk_obj *tfs_pk_new(struct tfs_pk *vm, enum tfs_pk_kind kind);
/* Memory owned by the machine, freed with it; NULL at the cap. */
void *tfs_pk_alloc(struct tfs_pk *vm, size_t len);

/* How many objects the machine has made: a walk over what it returned
 * that visits more than these (plus the pickle's length) is going round
 * the same shared objects by ever more paths (x = (x, x) through the memo
 * doubles them at each level). */
size_t tfs_pk_objects(const struct tfs_pk *vm);

void tfs_pk_free(struct tfs_pk *vm);

#endif
