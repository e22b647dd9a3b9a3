/* The opcodes are those of CPython's Lib/pickletools.py (protocols 2-5);
 * the set accepted follows what torch.save writes and what PyTorch's own
 * weights-only unpickler accepts. Opcodes that import or call by
 * themselves (INST, OBJ, EXT*, NEWOBJ_EX) and the text opcodes of
 * protocol 0 are refused. */
#include "formats/pickle.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/jscan.h"
#include "core/mem.h"

#define CHUNK (64u << 10)

struct chunk {
	struct chunk *next;
	size_t used, cap;
	max_align_t data[];
};

struct tfs_pk {
	struct chunk *chunks;
	size_t bytes, cap;
	struct tfs_pk_obj **stack;
	size_t sp, scap;
	size_t *marks;
	size_t mp, mcap;
	struct tfs_pk_obj **memo;
	size_t nmemo, memocap;
	/* Immutable values made once: small ints (sizes, strides, offsets),
	 * None, the booleans and the empty tuple, which a state dict's
	 * pickle names for every tensor. */
	struct tfs_pk_obj small[256], none, bools[2], empty;
	size_t nobjects;
};

size_t tfs_pk_objects(const struct tfs_pk *vm)
{
	return vm->nobjects;
}

void *tfs_pk_alloc(struct tfs_pk *vm, size_t len)
{
	len = (len + 15) & ~(size_t)15;
	struct chunk *c = vm->chunks;
	if (!c || c->cap - c->used < len) {
		/* Chunks grow with what is used so far (a state dict's objects
		 * take about five times its pickle), and large ones are backed
		 * by huge pages where the kernel allows: first touches of fresh
		 * pages are much of the cost of a large pickle. */
		size_t cap = vm->bytes > CHUNK ? vm->bytes : CHUNK;
		if (cap > vm->cap - vm->bytes)
			cap = vm->cap - vm->bytes;
		if (cap < len)
			cap = len;
		if (vm->bytes + cap > vm->cap)
			return NULL;
		c = tfs_malloc_big(sizeof *c + cap);
		if (!c)
			return NULL;
		c->used = 0;
		c->cap = cap;
		c->next = vm->chunks;
		vm->chunks = c;
		vm->bytes += cap;
	}
	void *p = (char *)c->data + c->used;
	c->used += len;
	return p;
}

struct tfs_pk_obj *tfs_pk_new(struct tfs_pk *vm, enum tfs_pk_kind kind)
{
	struct tfs_pk_obj *o = tfs_pk_alloc(vm, sizeof *o);
	if (o) {
		vm->nobjects++;
		memset(o, 0, sizeof *o);
		o->kind = (uint8_t)kind;
	}
	return o;
}

void tfs_pk_free(struct tfs_pk *vm)
{
	if (!vm)
		return;
	for (struct chunk *c = vm->chunks, *n; c; c = n) {
		n = c->next;
		free(c);
	}
	free(vm->stack);
	free(vm->marks);
	free(vm->memo);
	free(vm);
}

/* Grows an array kept outside the arena, counting it against the cap. */
static int grow(struct tfs_pk *vm, void **p, size_t *cap, size_t need, size_t elem)
{
	if (need <= *cap)
		return 0;
	size_t nc = *cap ? *cap * 2 : 64;
	while (nc < need)
		nc *= 2;
	if (vm->bytes + (nc - *cap) * elem > vm->cap)
		return -1;
	void *q = realloc(*p, nc * elem);
	if (!q)
		return -1;
	vm->bytes += (nc - *cap) * elem;
	*p = q;
	*cap = nc;
	return 0;
}

static int add_item(struct tfs_pk *vm, struct tfs_pk_obj *c, struct tfs_pk_obj *x)
{
	if (c->n == c->cap) {
		uint32_t nc = c->cap ? c->cap * 2 : 4;
		if (nc < c->cap)
			return -1;
		struct tfs_pk_obj **v = tfs_pk_alloc(vm, (size_t)nc * sizeof *v);
		if (!v)
			return -1;
		if (c->n)
			memcpy(v, c->u.v, c->n * sizeof *v);
		c->u.v = v;
		c->cap = nc;
	}
	c->u.v[c->n++] = x;
	return 0;
}

static const char *kind_name(const struct tfs_pk_obj *o)
{
	static const char *const names[] = {
		"None",  "bool", "int",  "float", "str",    "bytes",
		"tuple", "list", "dict", "set",   "global", "object",
	};
	return o->kind < sizeof names / sizeof names[0] ? names[o->kind] : "object";
}

struct run {
	struct tfs_pk *vm;
	const unsigned char *p, *base, *end;
	const struct tfs_pk_ops *ops;
	struct tfs_diag *d;
	size_t at; /* the current opcode's position */
	unsigned op;
};

static tfs_err bad(struct run *r, const char *fmt, const char *arg)
{
	char what[256];
	snprintf(what, sizeof what, fmt, arg);
	return tfs_fail(r->d, TFS_ERR_FORMAT, "pickle: %s (opcode 0x%02x at byte %zu of data.pkl)", what,
			r->op, r->at);
}

static tfs_err nomem(struct run *r)
{
	return tfs_fail(
		r->d, TFS_ERR_FORMAT,
		"pickle: over tensorfs's memory bound for a %zu-byte pickle (opcode at byte %zu); a hostile or damaged file",
		(size_t)(r->end - r->base), r->at);
}

static tfs_err push(struct run *r, struct tfs_pk_obj *o)
{
	if (o && r->vm->sp < r->vm->scap) {
		r->vm->stack[r->vm->sp++] = o;
		return TFS_OK;
	}
	if (!o)
		return nomem(r);
	if (grow(r->vm, (void **)&r->vm->stack, &r->vm->scap, r->vm->sp + 1, sizeof *r->vm->stack))
		return nomem(r);
	r->vm->stack[r->vm->sp++] = o;
	return TFS_OK;
}

static tfs_err pop(struct run *r, struct tfs_pk_obj **o)
{
	size_t floor = r->vm->mp ? r->vm->marks[r->vm->mp - 1] : 0;
	if (r->vm->sp <= floor)
		return bad(r, "%s", "the stack is empty");
	*o = r->vm->stack[--r->vm->sp];
	return TFS_OK;
}

static tfs_err top(struct run *r, struct tfs_pk_obj **o)
{
	size_t floor = r->vm->mp ? r->vm->marks[r->vm->mp - 1] : 0;
	if (r->vm->sp <= floor)
		return bad(r, "%s", "the stack is empty");
	*o = r->vm->stack[r->vm->sp - 1];
	return TFS_OK;
}

/* The items above the last MARK, which is removed. */
static tfs_err pop_mark(struct run *r, struct tfs_pk_obj ***items, size_t *n)
{
	if (!r->vm->mp)
		return bad(r, "%s", "no MARK to pop to");
	size_t m = r->vm->marks[--r->vm->mp];
	*items = m < r->vm->sp ? r->vm->stack + m : NULL; /* the stack may be unallocated */
	*n = r->vm->sp - m;
	r->vm->sp = m;
	return TFS_OK;
}

static int take(struct run *r, size_t n, const unsigned char **q)
{
	if ((size_t)(r->end - r->p) < n)
		return -1;
	*q = r->p;
	r->p += n;
	return 0;
}

static uint64_t le(const unsigned char *q, int n)
{
	uint64_t v = 0;
	for (int i = n - 1; i >= 0; i--)
		v = v << 8 | q[i];
	return v;
}

static tfs_err tuple_of(struct run *r, struct tfs_pk_obj **items, size_t n)
{
	if (!n)
		return push(r, &r->vm->empty);
	struct tfs_pk_obj *t = tfs_pk_new(r->vm, TFS_PK_TUPLE);
	if (!t)
		return nomem(r);
	if (n) {
		t->u.v = tfs_pk_alloc(r->vm, n * sizeof *t->u.v);
		if (!t->u.v)
			return nomem(r);
		memcpy(t->u.v, items, n * sizeof *items);
		t->n = t->cap = (uint32_t)n;
	}
	return push(r, t);
}

static tfs_err text(struct run *r, size_t lenbytes, enum tfs_pk_kind kind)
{
	const unsigned char *q;
	if (take(r, lenbytes, &q))
		return bad(r, "%s", "truncated");
	uint64_t n = le(q, (int)lenbytes);
	if (n > (uint64_t)(r->end - r->p))
		return bad(r, "%s", "a string longer than the pickle");
	const unsigned char *s = r->p;
	r->p += n;
	if (kind == TFS_PK_STR && tfs_utf8_check(s, (size_t)n) != n)
		return bad(r, "%s", "a string that is not UTF-8");
	struct tfs_pk_obj *o = tfs_pk_new(r->vm, kind);
	if (!o)
		return nomem(r);
	o->u.str.s = (const char *)s;
	o->u.str.len = (size_t)n;
	return push(r, o);
}

static tfs_err integer(struct run *r, int64_t v, enum tfs_pk_kind kind)
{
	if (kind == TFS_PK_INT && v >= 0 && v < 256)
		return push(r, &r->vm->small[v]);
	if (kind == TFS_PK_BOOL)
		return push(r, &r->vm->bools[v != 0]);
	struct tfs_pk_obj *o = tfs_pk_new(r->vm, kind);
	if (!o)
		return nomem(r);
	o->u.i = v;
	return push(r, o);
}

static tfs_err global(struct run *r, const char *mod, size_t ml, const char *name, size_t nl)
{
	int gid = r->ops->global(r->ops->ctx, mod, ml, name, nl);
	if (gid < 0) {
		char full[300], q[340];
		snprintf(full, sizeof full, "%.*s.%.*s", (int)(ml > 140 ? 140 : ml), mod,
			 (int)(nl > 140 ? 140 : nl), name);
		tfs_quote(q, sizeof q, full, strlen(full));
		/* torch.save(model) pickles the model's classes (torch.nn's, or
		 * the user's own in __main__): the weights are in its
		 * state_dict(), which is what loaders want anyway. */
		int whole = (ml >= 8 && memcmp(mod, "torch.nn", 8) == 0) ||
			    (ml == 8 && memcmp(mod, "__main__", 8) == 0);
		return tfs_fail(
			r->d, TFS_ERR_FORMAT,
			"pickle: refused the global %s (byte %zu of data.pkl): it is not on tensorfs's allow-list; nothing was imported or run%s",
			q, r->at,
			whole ? " (a whole model saved with torch.save(model)? save model.state_dict() instead)"
			      : "");
	}
	struct tfs_pk_obj *o = tfs_pk_new(r->vm, TFS_PK_GLOBAL);
	if (!o)
		return nomem(r);
	o->u.gid = gid;
	return push(r, o);
}

static tfs_err call(struct run *r, struct tfs_pk_obj *f, struct tfs_pk_obj *args)
{
	if (f->kind != TFS_PK_GLOBAL)
		return bad(r, "a call of a %s", kind_name(f));
	if (args->kind != TFS_PK_TUPLE)
		return bad(r, "a call whose arguments are a %s, not a tuple", kind_name(args));
	struct tfs_pk_obj *out = NULL;
	tfs_err e = r->ops->call(r->ops->ctx, r->vm, f->u.gid, args, &out, r->d);
	if (e)
		return e;
	return push(r, out);
}

static tfs_err memo_put(struct run *r, uint64_t idx)
{
	struct tfs_pk_obj *o;
	tfs_err e = top(r, &o);
	if (e)
		return e;
	/* Writers number memo entries from 0 up; an index no pickle of this
	 * size could reach is hostile. */
	if (idx < r->vm->nmemo) {
		r->vm->memo[idx] = o;
		return TFS_OK;
	}
	if (idx >= (uint64_t)(r->end - r->base))
		return bad(r, "%s", "a memo index larger than the pickle");
	if (grow(r->vm, (void **)&r->vm->memo, &r->vm->memocap, (size_t)idx + 1, sizeof *r->vm->memo))
		return nomem(r);
	while (r->vm->nmemo <= idx)
		r->vm->memo[r->vm->nmemo++] = NULL;
	r->vm->memo[idx] = o;
	return TFS_OK;
}

static tfs_err memo_get(struct run *r, uint64_t idx)
{
	if (idx >= r->vm->nmemo || !r->vm->memo[idx])
		return bad(r, "%s", "a memo entry that was never stored");
	return push(r, r->vm->memo[idx]);
}

/* The opcodes that push a constant: None, booleans, integers, floats,
 * strings and bytes. */
static tfs_err op_constant(struct run *r)
{
	const unsigned char *q;
	switch (r->op) {
	case 'N':
		return push(r, &r->vm->none);
	case 0x88:
	case 0x89: /* NEWTRUE, NEWFALSE */
		return integer(r, r->op == 0x88, TFS_PK_BOOL);
	case 'J': /* BININT */
		if (take(r, 4, &q))
			return bad(r, "%s", "truncated");
		return integer(r, (int32_t)(uint32_t)le(q, 4), TFS_PK_INT);
	case 'K':
	case 'M': /* BININT1, BININT2 */
		if (take(r, r->op == 'K' ? 1 : 2, &q))
			return bad(r, "%s", "truncated");
		return integer(r, (int64_t)le(q, r->op == 'K' ? 1 : 2), TFS_PK_INT);
	case 0x8a:
	case 0x8b: { /* LONG1, LONG4: little-endian two's complement */
		if (take(r, r->op == 0x8a ? 1 : 4, &q))
			return bad(r, "%s", "truncated");
		uint64_t len = le(q, r->op == 0x8a ? 1 : 4);
		if (len > 8)
			return bad(r, "%s", "an integer wider than 64 bits");
		if (take(r, (size_t)len, &q))
			return bad(r, "%s", "truncated");
		uint64_t v = le(q, (int)len);
		if (len && len < 8 && (q[len - 1] & 0x80))
			v |= ~(uint64_t)0 << (8 * len);
		return integer(r, (int64_t)v, TFS_PK_INT);
	}
	case 'G': { /* BINFLOAT: big-endian */
		if (take(r, 8, &q))
			return bad(r, "%s", "truncated");
		uint64_t v = 0;
		for (int i = 0; i < 8; i++)
			v = v << 8 | q[i];
		struct tfs_pk_obj *o = tfs_pk_new(r->vm, TFS_PK_FLOAT);
		if (!o)
			return nomem(r);
		memcpy(&o->u.f, &v, 8);
		return push(r, o);
	}
	case 'X':
		return text(r, 4, TFS_PK_STR); /* BINUNICODE */
	case 0x8c:
		return text(r, 1, TFS_PK_STR); /* SHORT_BINUNICODE */
	case 0x8d:
		return text(r, 8, TFS_PK_STR); /* BINUNICODE8 */
	case 'U':
		return text(r, 1, TFS_PK_BYTES); /* SHORT_BINSTRING */
	case 'T':
		return text(r, 4, TFS_PK_BYTES); /* BINSTRING */
	case 'C':
		return text(r, 1, TFS_PK_BYTES); /* SHORT_BINBYTES */
	case 'B':
		return text(r, 4, TFS_PK_BYTES); /* BINBYTES */
	case 0x8e:
	case 0x96:
		return text(r, 8, TFS_PK_BYTES); /* BINBYTES8, BYTEARRAY8 */
	default:
		return bad(r, "%s",
			   "an opcode tensorfs does not read (protocol 0/1 text opcodes or unknown)");
	}
}

/* The opcodes that make or fill tuples, lists, dicts and sets. */
static tfs_err op_container(struct run *r)
{
	struct tfs_pk_obj *a, *b, *c, **items;
	size_t n;
	tfs_err e;
	switch (r->op) {
	case ')': /* EMPTY_TUPLE */
		return tuple_of(r, NULL, 0);
	case 't': /* TUPLE */
		return (e = pop_mark(r, &items, &n)) ? e : tuple_of(r, items, n);
	case 0x85:
	case 0x86:
	case 0x87: { /* TUPLE1..3 */
		n = r->op - 0x84;
		size_t floor = r->vm->mp ? r->vm->marks[r->vm->mp - 1] : 0;
		if (r->vm->sp - floor < n)
			return bad(r, "%s", "the stack holds too few items");
		r->vm->sp -= n;
		return tuple_of(r, r->vm->stack + r->vm->sp, n);
	}
	case ']':
		return push(r, tfs_pk_new(r->vm, TFS_PK_LIST)); /* EMPTY_LIST */
	case '}':
		return push(r, tfs_pk_new(r->vm, TFS_PK_DICT)); /* EMPTY_DICT */
	case 0x8f:
		return push(r, tfs_pk_new(r->vm, TFS_PK_SET)); /* EMPTY_SET */
	case 'l':
	case 'd':
	case 0x91: { /* LIST, DICT, FROZENSET from the marked items */
		if ((e = pop_mark(r, &items, &n)))
			return e;
		if (r->op == 'd' && n % 2)
			return bad(r, "%s", "DICT with an odd number of items");
		c = tfs_pk_new(r->vm, r->op == 'l' ? TFS_PK_LIST : r->op == 'd' ? TFS_PK_DICT : TFS_PK_SET);
		if (!c)
			return nomem(r);
		for (size_t i = 0; i < n; i++)
			if (add_item(r->vm, c, items[i]))
				return nomem(r);
		return push(r, c);
	}
	case 'a': /* APPEND */
		if ((e = pop(r, &a)) || (e = top(r, &c)))
			return e;
		if (c->kind != TFS_PK_LIST)
			return bad(r, "APPEND to a %s", kind_name(c));
		return add_item(r->vm, c, a) ? nomem(r) : TFS_OK;
	case 'e':
	case 0x90: /* APPENDS, ADDITEMS */
		if ((e = pop_mark(r, &items, &n)) || (e = top(r, &c)))
			return e;
		if (c->kind != (r->op == 'e' ? TFS_PK_LIST : TFS_PK_SET))
			return bad(r, "adding items to a %s", kind_name(c));
		for (size_t i = 0; i < n; i++)
			if (add_item(r->vm, c, items[i]))
				return nomem(r);
		return TFS_OK;
	case 's': /* SETITEM */
		if ((e = pop(r, &b)) || (e = pop(r, &a)) || (e = top(r, &c)))
			return e;
		if (c->kind != TFS_PK_DICT)
			return bad(r, "SETITEM on a %s", kind_name(c));
		return add_item(r->vm, c, a) || add_item(r->vm, c, b) ? nomem(r) : TFS_OK;
	case 'u': /* SETITEMS */
		if ((e = pop_mark(r, &items, &n)) || (e = top(r, &c)))
			return e;
		if (c->kind != TFS_PK_DICT)
			return bad(r, "SETITEMS on a %s", kind_name(c));
		if (n % 2)
			return bad(r, "%s", "SETITEMS with an odd number of items");
		for (size_t i = 0; i < n; i++)
			if (add_item(r->vm, c, items[i]))
				return nomem(r);
		return TFS_OK;
	default:
		return bad(r, "%s",
			   "an opcode tensorfs does not read (protocol 0/1 text opcodes or unknown)");
	}
}

/* The opcodes that name or call a class (through the allow-list only) and
 * that load a persistent reference (a storage). */
static tfs_err op_object(struct run *r)
{
	struct tfs_pk_obj *a, *b;
	tfs_err e;
	switch (r->op) {
	case 'c': { /* GLOBAL: "module\nname\n" */
		const unsigned char *m = r->p, *nl1 = memchr(m, '\n', (size_t)(r->end - m));
		if (!nl1)
			return bad(r, "%s", "truncated");
		const unsigned char *nm = nl1 + 1, *nl2 = memchr(nm, '\n', (size_t)(r->end - nm));
		if (!nl2)
			return bad(r, "%s", "truncated");
		r->p = nl2 + 1;
		return global(r, (const char *)m, (size_t)(nl1 - m), (const char *)nm, (size_t)(nl2 - nm));
	}
	case 0x93: /* STACK_GLOBAL */
		if ((e = pop(r, &b)) || (e = pop(r, &a)))
			return e;
		if (a->kind != TFS_PK_STR || b->kind != TFS_PK_STR)
			return bad(r, "%s", "STACK_GLOBAL of something other than two strings");
		return global(r, a->u.str.s, a->u.str.len, b->u.str.s, b->u.str.len);
	case 'R': /* REDUCE */
		if ((e = pop(r, &b)) || (e = pop(r, &a)))
			return e;
		return call(r, a, b);
	case 0x81: /* NEWOBJ: cls.__new__(cls, *args), the same allow-list */
		if ((e = pop(r, &b)) || (e = pop(r, &a)))
			return e;
		return call(r, a, b);
	case 'b': /* BUILD: the state is dropped, nothing is set */
		if ((e = pop(r, &b)) || (e = top(r, &a)))
			return e;
		if (a->kind != TFS_PK_DICT && a->kind != TFS_PK_USER)
			return bad(r, "BUILD on a %s", kind_name(a));
		return TFS_OK;
	case 'Q': { /* BINPERSID */
		if ((e = pop(r, &a)))
			return e;
		struct tfs_pk_obj *out = NULL;
		if ((e = r->ops->persid(r->ops->ctx, r->vm, a, &out, r->d)))
			return e;
		return push(r, out);
	}
	default:
		return bad(r, "%s",
			   "an opcode tensorfs does not read (protocol 0/1 text opcodes or unknown)");
	}
}

static tfs_err step(struct run *r, int *done)
{
	const unsigned char *q;
	struct tfs_pk_obj *a, **items;
	size_t n;
	tfs_err e;
	r->at = (size_t)(r->p - r->base);
	r->op = *r->p++;
	switch (r->op) {
	case 0x80: /* PROTO */
		if (take(r, 1, &q))
			return bad(r, "%s", "truncated");
		if (*q > 5)
			return bad(r, "%s", "a protocol newer than 5");
		return TFS_OK;
	case 0x95: /* FRAME: a size hint */
		return take(r, 8, &q) ? bad(r, "%s", "truncated") : TFS_OK;
	case '.': /* STOP */
		*done = 1;
		return TFS_OK;
	case '(': /* MARK */
		if (grow(r->vm, (void **)&r->vm->marks, &r->vm->mcap, r->vm->mp + 1, sizeof *r->vm->marks))
			return nomem(r);
		r->vm->marks[r->vm->mp++] = r->vm->sp;
		return TFS_OK;
	case '0': /* POP */
		return pop(r, &a);
	case '1': /* POP_MARK */
		return pop_mark(r, &items, &n);
	case '2': /* DUP */
		return (e = top(r, &a)) ? e : push(r, a);
	case 'N':
	case 0x88:
	case 0x89:
	case 'J':
	case 'K':
	case 'M':
	case 0x8a:
	case 0x8b:
	case 'G':
	case 'X':
	case 0x8c:
	case 0x8d:
	case 'U':
	case 'T':
	case 'C':
	case 'B':
	case 0x8e:
	case 0x96:
		return op_constant(r);
	case ')':
	case 't':
	case 0x85:
	case 0x86:
	case 0x87:
	case ']':
	case '}':
	case 0x8f:
	case 'l':
	case 'd':
	case 0x91:
	case 'a':
	case 'e':
	case 0x90:
	case 's':
	case 'u':
		return op_container(r);
	case 'c':
	case 0x93:
	case 'R':
	case 0x81:
	case 'b':
	case 'Q':
		return op_object(r);
	case 'q':
	case 'h': /* BINPUT, BINGET */
		if (take(r, 1, &q))
			return bad(r, "%s", "truncated");
		return r->op == 'q' ? memo_put(r, *q) : memo_get(r, *q);
	case 'r':
	case 'j': /* LONG_BINPUT, LONG_BINGET */
		if (take(r, 4, &q))
			return bad(r, "%s", "truncated");
		return r->op == 'r' ? memo_put(r, le(q, 4)) : memo_get(r, le(q, 4));
	case 0x94: /* MEMOIZE */
		return memo_put(r, r->vm->nmemo);
	case 'i':
	case 'o':
	case 0x92:
	case 0x82:
	case 0x83:
	case 0x84:
		return bad(
			r, "%s",
			"an opcode that imports or calls a class by itself (INST, OBJ, NEWOBJ_EX, EXT); refused, nothing run");
	default:
		return bad(r, "%s",
			   "an opcode tensorfs does not read (protocol 0/1 text opcodes or unknown)");
	}
}

tfs_err tfs_pk_load(const unsigned char *p, size_t n, const struct tfs_pk_ops *ops, struct tfs_pk **vmp,
		    struct tfs_pk_obj **out, struct tfs_diag *d)
{
	struct tfs_pk *vm = calloc(1, sizeof *vm);
	*vmp = NULL;
	*out = NULL;
	if (!vm)
		return tfs_fail(d, TFS_ERR_NOMEM, "out of memory");
	for (int i = 0; i < 256; i++) {
		vm->small[i].kind = TFS_PK_INT;
		vm->small[i].u.i = i;
	}
	vm->none.kind = TFS_PK_NONE;
	vm->bools[0].kind = vm->bools[1].kind = TFS_PK_BOOL;
	vm->bools[1].u.i = 1;
	vm->empty.kind = TFS_PK_TUPLE;
	/* The memo is reserved, not touched: pages fault in as entries are
	 * stored, and it is never copied to grow (a torch pickle stores
	 * about one entry per 12 bytes). */
	vm->memocap = n / 8 + 64 < (1u << 26) ? n / 8 + 64 : (1u << 26);
	vm->memo = malloc(vm->memocap * sizeof *vm->memo);
	if (!vm->memo) {
		free(vm);
		return tfs_fail(d, TFS_ERR_NOMEM, "out of memory");
	}
	vm->bytes = vm->memocap * sizeof *vm->memo;
	/* A state dict's objects take about four times its pickle. */
	vm->cap = (n > SIZE_MAX / 32 ? SIZE_MAX / 2 : 16 * n) + (16u << 20);
	struct run r = {.vm = vm, .p = p, .base = p, .end = p + n, .ops = ops, .d = d};
	int done = 0;
	tfs_err e = TFS_OK;
	while (!e && !done) {
		if (r.p >= r.end) {
			e = tfs_fail(d, TFS_ERR_FORMAT,
				     "pickle: truncated (no STOP before byte %zu of data.pkl)", n);
			break;
		}
		e = step(&r, &done);
	}
	if (!e && vm->sp != 1)
		e = tfs_fail(d, TFS_ERR_FORMAT, "pickle: STOP with %zu objects on the stack, not one",
			     vm->sp);
	if (e) {
		tfs_pk_free(vm);
		return e;
	}
	*out = vm->stack[0];
	*vmp = vm;
	return TFS_OK;
}
