/* Unit tests of the file-system core (fs/fs.h) with no mount: lookups,
 * attributes and sizes, reads of every view's files (each read whole and
 * checked against its size, the tensors against their bytes),
 * extended attributes with the getxattr size protocol, and a source
 * changed under an open file. */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "fs/fs.h"
#include "core/names.h"
#include "core/opts.h"
#include "model/model.h"
#include "views/tree.h"
#include "views/view.h"

#include "check.h"

/* A safetensors file of four tensors: w (F32 2x3), h (BF16 4), b.c (F16
 * 2, a directory's tensor in the tree layout), z (70000 bytes: spliced). */
static const float W[6] = {1, 2, 3, 4, 5, 6};
static const unsigned short H[4] = {0x3f80, 0x4000, 0x4040, 0x4080}; /* 1 2 3 4 in BF16 */
static const unsigned short B[2] = {0x3c00, 0x4000};                 /* 1 2 in F16 */

static char path[64];
static size_t data_at;

static void make_file(void)
{
	const char *hd = "{\"__metadata__\":{\"format\":\"pt\"},"
			 "\"w\":{\"dtype\":\"F32\",\"shape\":[2,3],\"data_offsets\":[0,24]},"
			 "\"h\":{\"dtype\":\"BF16\",\"shape\":[4],\"data_offsets\":[24,32]},"
			 "\"b.c\":{\"dtype\":\"F16\",\"shape\":[2],\"data_offsets\":[32,36]},"
			 "\"z\":{\"dtype\":\"U8\",\"shape\":[70000],\"data_offsets\":[36,70036]}}";
	char hdr[512];
	size_t hl = strlen(hd), pad = (8 - hl % 8) % 8;
	memcpy(hdr, hd, hl);
	memset(hdr + hl, ' ', pad);
	hl += pad;
	unsigned char len8[8];
	for (int i = 0; i < 8; i++)
		len8[i] = (unsigned char)((uint64_t)hl >> (8 * i));
	strcpy(path, "/tmp/tfs-test-fs-XXXXXX");
	int fd = mkstemp(path);
	if (fd < 0 || write(fd, len8, 8) != 8 || write(fd, hdr, hl) != (ssize_t)hl ||
	    write(fd, W, 24) != 24 || write(fd, H, 8) != 8 || write(fd, B, 4) != 4 ||
	    ftruncate(fd, (off_t)(8 + hl + 70036)) != 0) {
		perror("test file");
		exit(1);
	}
	close(fd);
	data_at = 8 + hl;
}

struct mount {
	struct tfs_model m;
	struct tfs_tree t;
	struct tfs_opts o;
	struct tfs_fs_core c;
};

/* The model and a tree with the options "k=v,k,..." (NULL: the tools'). */
static int mount_with(struct mount *mt, enum tfs_layout layout, const char *opts)
{
	memset(mt, 0, sizeof *mt);
	struct tfs_model_opts mo = {0};
	struct tfs_model_diag md;
	if (tfs_model_open(path, &mo, &mt->m, &md) != TFS_OK) {
		fprintf(stderr, "open: %s\n", md.d.msg);
		return -1;
	}
	char copy[256];
	snprintf(copy, sizeof copy, "%s", opts ? opts : "");
	for (char *k = strtok(copy, ","); k; k = strtok(NULL, ",")) {
		char *eq = strchr(k, '=');
		tfs_opts_add(&mt->o, k, eq ? (size_t)(eq - k) : strlen(k), eq ? eq + 1 : NULL);
	}
	struct tfs_tree_opts to = {.layout = layout, .opts = opts ? &mt->o : NULL};
	struct tfs_diag d;
	if (tfs_views_check(&mt->o, &d) || tfs_tree_build(&mt->m, &to, &mt->t, &d)) {
		fprintf(stderr, "tree: %s\n", d.msg);
		return -1;
	}
	mt->c = (struct tfs_fs_core){.m = &mt->m, .tree = &mt->t, .uid = 1, .gid = 2};
	return 0;
}

static void unmount(struct mount *mt)
{
	tfs_tree_free(&mt->t);
	tfs_model_free(&mt->m);
	tfs_opts_free(&mt->o);
}

/* The inode of a path under the root ("a/b"), or 0. */
static uint64_t walk(const struct mount *mt, const char *p)
{
	uint64_t ino = TFS_TREE_ROOT;
	char copy[256];
	struct stat st;
	snprintf(copy, sizeof copy, "%s", p);
	for (char *s = strtok(copy, "/"); s; s = strtok(NULL, "/"))
		if (tfs_fs_lookup(&mt->c, ino, s, &ino, &st) != TFS_OK)
			return 0;
	return ino;
}

/* A reply's bytes into out (memory as it is; file ranges read). */
static size_t gather(const struct tfs_reply *r, char *out)
{
	size_t o = 0;
	for (unsigned i = 0; i < r->n; i++) {
		const struct tfs_iov *p = &r->part[i];
		if (p->p)
			memcpy(out + o, p->p, p->len);
		else if (pread(p->fd, out + o, p->len, (off_t)p->foff) != (ssize_t)p->len)
			return (size_t)-1;
		o += p->len;
	}
	return o;
}

/* File ino read whole in requests of `step` bytes into *out (malloc'd);
 * its length, or -1. */
static long read_all(const struct mount *mt, uint64_t ino, size_t step, char **out)
{
	struct tfs_handle *h;
	struct stat st;
	if (tfs_fs_attr(&mt->c, ino, &st) || tfs_fs_open(&mt->c, ino, O_RDONLY, &h))
		return -1;
	char *buf = malloc((size_t)st.st_size + step);
	static struct tfs_reply r;
	size_t got = 0;
	tfs_err e = TFS_OK;
	for (;;) {
		e = tfs_fs_read(&mt->c, h, got, step, &r);
		size_t n = e ? 0 : gather(&r, buf + got);
		tfs_fs_read_done(&r);
		if (e || n == (size_t)-1 || n == 0)
			break;
		got += n;
	}
	tfs_fs_release(&mt->c, h);
	if (e || got != (size_t)st.st_size) {
		free(buf);
		return -1;
	}
	*out = buf;
	return (long)got;
}

static void test_lookup_attr(void)
{
	struct mount mt;
	if (mount_with(&mt, TFS_LAYOUT_TREE, "") != 0) {
		CHECK(0, "mount");
		return;
	}
	struct stat st;
	uint64_t ino;
	CHECK(tfs_fs_attr(&mt.c, TFS_TREE_ROOT, &st) == TFS_OK && S_ISDIR(st.st_mode) && st.st_nlink == 3,
	      "root: a directory with one subdirectory");
	CHECK(tfs_fs_lookup(&mt.c, TFS_TREE_ROOT, "w", &ino, &st) == TFS_OK && S_ISREG(st.st_mode) &&
		      st.st_size == 24 && st.st_uid == 1 && st.st_gid == 2 && (st.st_mode & 0777) == 0444,
	      "w: 24 bytes, read-only, the mount's owner");
	CHECK(walk(&mt, "b/c") != 0, "b/c in the tree layout");
	CHECK(tfs_fs_lookup(&mt.c, TFS_TREE_ROOT, "nothing", &ino, &st) == TFS_ERR_NOFILE, "missing");
	CHECK(tfs_fs_lookup(&mt.c, walk(&mt, "w"), "x", &ino, &st) == TFS_ERR_NOTDIR, "under a file");
	char lng[300];
	memset(lng, 'a', sizeof lng - 1);
	lng[sizeof lng - 1] = 0;
	CHECK(tfs_fs_lookup(&mt.c, TFS_TREE_ROOT, lng, &ino, &st) == TFS_ERR_NAMETOOLONG, "name too long");
	CHECK(tfs_fs_attr(&mt.c, 0, &st) == TFS_ERR_NOFILE &&
		      tfs_fs_attr(&mt.c, 1u << 30, &st) == TFS_ERR_NOFILE,
	      "no such inode");
	CHECK(tfs_fs_opendir(&mt.c, walk(&mt, "w")) == TFS_ERR_NOTDIR && tfs_fs_opendir(&mt.c, 1) == TFS_OK,
	      "opendir");
	/* The listing: ".", "..", the table and metadata first, then the rest. */
	const char *name;
	char namebuf[TFS_NAME_MAX + 1];
	uint64_t cino;
	mode_t type;
	int n = 0, saw_table = 0, saw_dir = 0;
	for (uint64_t at = 0; tfs_fs_dirent(&mt.c, 1, at, namebuf, &name, &cino, &type); at++, n++) {
		saw_table += strcmp(name, "__tensors__.tsv") == 0;
		saw_dir += strcmp(name, "b") == 0 && type == S_IFDIR;
	}
	CHECK(n == 2 + 6 && saw_table == 1 && saw_dir == 1, "root lists . .. metadata table w h b z: %d", n);
	struct statvfs sv;
	tfs_fs_statfs(&mt.c, &sv);
	CHECK((sv.f_flag & ST_RDONLY) && sv.f_files == mt.t.nnodes - 1, "statfs");
	struct tfs_handle *h;
	CHECK(tfs_fs_open(&mt.c, walk(&mt, "w"), O_RDWR, &h) == TFS_ERR_ROFS, "no writing");
	CHECK(tfs_fs_open(&mt.c, walk(&mt, "b"), O_RDONLY, &h) == TFS_ERR_ISDIR, "no reading a directory");
	unmount(&mt);
}

/* File ino read whole, in small and large requests alike. */
static void read_one(const struct mount *mt, uint64_t ino, const char *what, const char *name)
{
	char *a = NULL, *b = NULL;
	struct tfs_node tmp;
	long la = read_all(mt, ino, 7, &a), lb = read_all(mt, ino, 1 << 20, &b);
	const struct tfs_view_ops *v = tfs_view_of_kind(tfs_tree_node(&mt->t, ino, &tmp)->kind);
	CHECK(la >= 0 && la == lb && memcmp(a, b, (size_t)la) == 0, "%s: %s's %s reads whole", what, v->name,
	      name);
	free(a);
	free(b);
}

/* Every file of a tree read whole: the nodes', and a generated
 * directory's entries, found by listing it. */
static void read_every_file(const struct mount *mt, const char *what)
{
	int files = 0;
	for (uint32_t i = 2; i < mt->t.nnodes; i++) {
		const struct tfs_node *n = &mt->t.nodes[i];
		char buf[TFS_NAME_MAX + 1];
		const char *name;
		uint64_t ino;
		mode_t type;
		for (uint64_t at = 2; n->gen && tfs_fs_dirent(&mt->c, i, at, buf, &name, &ino, &type); at++) {
			read_one(mt, ino, what, name);
			files++;
		}
		if (n->kind != TFS_NODE_DIR) {
			read_one(mt, i, what, n->fname);
			files++;
		}
	}
	CHECK(files > 3, "%s: files", what);
}

static void test_reads(void)
{
	static const struct {
		enum tfs_layout layout;
		const char *opts;
		const char *must; /* a view's file the options make */
	} cases[] = {
		{TFS_LAYOUT_FLAT, "", "__tensors__.tsv"},
		{TFS_LAYOUT_FLAT, "export,sums,originals", "model.safetensors"},
		{TFS_LAYOUT_TREE, "export,stats,pictures", "b.safetensors"},
		{TFS_LAYOUT_FLAT, "format=npy,convert=f32,max_shard_size=16", "__shards__"},
		{TFS_LAYOUT_TREE, "format=npy,sums,stats", "__sha256sums__.txt"},
		{TFS_LAYOUT_TREE, "zarr,zarr_chunk_size=4K,convert=f32", "__zarr__/z/17"},
	};
	for (size_t k = 0; k < sizeof cases / sizeof *cases; k++) {
		struct mount mt;
		if (mount_with(&mt, cases[k].layout, cases[k].opts) != 0) {
			CHECK(0, "mount %s", cases[k].opts);
			continue;
		}
		CHECK(walk(&mt, cases[k].must) != 0, "%s: %s", cases[k].opts, cases[k].must);
		read_every_file(&mt, cases[k].opts);
		unmount(&mt);
	}
	/* The bytes: raw as stored, .npy after its header, f32 decoded. */
	struct mount mt;
	char *got;
	if (mount_with(&mt, TFS_LAYOUT_FLAT, "convert=f32") == 0) {
		CHECK(read_all(&mt, walk(&mt, "w"), 5, &got) == 24 && memcmp(got, W, 24) == 0, "w raw");
		free(got);
		float f[4];
		CHECK(read_all(&mt, walk(&mt, "h"), 3, &got) == 16, "h as f32: 16 bytes");
		memcpy(f, got, 16);
		CHECK(f[0] == 1 && f[1] == 2 && f[2] == 3 && f[3] == 4, "h decoded");
		free(got);
		unmount(&mt);
	}
	if (mount_with(&mt, TFS_LAYOUT_FLAT, "format=npy") == 0) {
		long n = read_all(&mt, walk(&mt, "w.npy"), 4096, &got);
		CHECK(n > 24 && memcmp(got, "\x93NUMPY", 6) == 0 && memcmp(got + n - 24, W, 24) == 0,
		      "w.npy");
		free(got);
		unmount(&mt);
	}
}

/* Whether attribute `name` of node ino is exactly `want`. */
/* -o zarr's arrays: directories whose entries are made when asked, one
 * node each, however many chunks (z: 70,000 of a byte). */
static void test_generated(void)
{
	current = "generated directories";
	struct mount mt;
	if (mount_with(&mt, TFS_LAYOUT_FLAT, "zarr,zarr_chunk_size=1") != 0) {
		CHECK(0, "mount");
		return;
	}
	uint64_t z = walk(&mt, "__zarr__/z"), ino, c;
	struct stat st;
	CHECK(z && z < mt.t.nnodes && mt.t.nnodes < 64, "one node for 70,003 entries (%u nodes)",
	      mt.t.nnodes);
	CHECK(tfs_fs_attr(&mt.c, z, &st) == TFS_OK && S_ISDIR(st.st_mode) && st.st_nlink == 2, "a directory");
	char buf[TFS_NAME_MAX + 1];
	const char *name;
	mode_t type;
	uint64_t n = 0, last = 0;
	int ok = 1;
	for (uint64_t at = 0; tfs_fs_dirent(&mt.c, z, at, buf, &name, &c, &type); at++, n++) {
		if (at < 2)
			continue;
		ok &= type == S_IFREG && c > UINT32_MAX && c != last;
		if (at % 9973 == 0 || at == 2 || at == 70004)
			ok &= tfs_fs_lookup(&mt.c, z, name, &ino, &st) == TFS_OK && ino == c &&
			      st.st_ino == (ino_t)c && S_ISREG(st.st_mode);
		last = c;
	}
	CHECK(n == 2 + 3 + 70000 && ok, "listed, each found again by name: %llu", (unsigned long long)n);
	CHECK(tfs_fs_lookup(&mt.c, z, "69999", &c, &st) == TFS_OK && st.st_size == 1, "the last chunk");
	static const char *const bad[] = {"70000",
					  "00",
					  "01",
					  "-1",
					  "+1",
					  "1.0",
					  "",
					  "1 ",
					  " 1",
					  "0x1",
					  "18446744073709551616",
					  "99999999999999999999999",
					  ".zgroup"};
	for (size_t k = 0; k < sizeof bad / sizeof *bad; k++)
		CHECK(tfs_fs_lookup(&mt.c, z, bad[k], &ino, &st) == TFS_ERR_NOFILE, "no entry '%s'", bad[k]);
	CHECK(tfs_fs_lookup(&mt.c, c, "x", &ino, &st) == TFS_ERR_NOTDIR &&
		      tfs_fs_opendir(&mt.c, c) == TFS_ERR_NOTDIR,
	      "an entry is a file");
	CHECK(tfs_fs_attr(&mt.c, tfs_tree_gen_ino((uint32_t)z, 70003), &st) == TFS_ERR_NOFILE &&
		      tfs_fs_attr(&mt.c, tfs_tree_gen_ino(1, 0), &st) == TFS_ERR_NOFILE &&
		      tfs_fs_attr(&mt.c, (uint64_t)mt.t.nnodes << 32, &st) == TFS_ERR_NOFILE &&
		      tfs_fs_attr(&mt.c, UINT64_MAX, &st) == TFS_ERR_NOFILE,
	      "no other inode");
	char *got;
	CHECK(read_all(&mt, walk(&mt, "__zarr__/w/1.0"), 5, &got) == 12 && memcmp(got, W + 3, 12) == 0,
	      "a chunk's bytes");
	free(got);
	long k = read_all(&mt, walk(&mt, "__zarr__/z/.zarray"), 3, &got);
	CHECK(k > 0 && memmem(got, (size_t)k, "\"chunks\": [1]", 13), "its metadata");
	free(got);
	struct statvfs sv;
	tfs_fs_statfs(&mt.c, &sv);
	CHECK(sv.f_files == mt.t.nnodes - 1 + mt.t.generated && mt.t.generated > 70000, "statfs counts them");
	unmount(&mt);
}

static int xattr_is(struct mount *mt, uint64_t ino, const char *name, const char *want)
{
	char v[256];
	size_t len;
	return tfs_fs_getxattr(&mt->c, ino, name, v, sizeof v, &len) == TFS_OK && len == strlen(want) &&
	       memcmp(v, want, len) == 0;
}

static void test_xattrs(void)
{
	struct mount mt;
	if (mount_with(&mt, TFS_LAYOUT_FLAT, "convert=f32") != 0) {
		CHECK(0, "mount");
		return;
	}
	char v[256];
	size_t len;
	uint64_t w = walk(&mt, "w"), h = walk(&mt, "h");
	CHECK(xattr_is(&mt, w, "user.dtype", "F32"), "user.dtype");
	CHECK(xattr_is(&mt, w, "user.shape", "[2,3]"), "user.shape");
	CHECK(tfs_fs_getxattr(&mt.c, w, "user.shape", NULL, 0, &len) == TFS_OK && len == 5, "length only");
	CHECK(tfs_fs_getxattr(&mt.c, w, "user.shape", v, 2, &len) == TFS_ERR_RANGE, "too small a room");
	CHECK(tfs_fs_getxattr(&mt.c, w, "user.nothing", v, sizeof v, &len) == TFS_ERR_NODATA, "no such");
	CHECK(tfs_fs_getxattr(&mt.c, w, "security.selinux", v, sizeof v, &len) == TFS_ERR_NOTSUP,
	      "not user.");
	CHECK(tfs_fs_getxattr(&mt.c, w, "user.source_dtype", v, sizeof v, &len) == TFS_ERR_NODATA,
	      "w is not converted");
	CHECK(xattr_is(&mt, h, "user.source_dtype", "BF16"), "h is converted from BF16");
	CHECK(xattr_is(&mt, h, "user.dtype", "F32"), "h is served as F32");
	CHECK(tfs_fs_getxattr(&mt.c, w, "user.offsets", v, sizeof v, &len) == TFS_OK && len > 4, "offsets");
	/* A hash is listed once known, and its length needs no reading. */
	CHECK(tfs_fs_listxattr(&mt.c, w, v, sizeof v, &len) == TFS_OK && !memmem(v, len, "user.hash", 9) &&
		      memmem(v, len, "user.dtype", 11),
	      "list before hashing");
	CHECK(tfs_fs_getxattr(&mt.c, w, "user.hash.sha256", NULL, 0, &len) == TFS_OK && len == 64,
	      "hash length");
	CHECK(tfs_fs_getxattr(&mt.c, w, "user.hash.sha256", v, sizeof v, &len) == TFS_OK && len == 64 &&
		      memcmp(v, "24ae2dfe8df57c1b", 16) == 0, /* sha256 of W's 24 bytes */
	      "hash: %.*s", (int)len, v);
	CHECK(tfs_fs_listxattr(&mt.c, w, v, sizeof v, &len) == TFS_OK &&
		      memmem(v, len, "user.hash.sha256", 17),
	      "listed once known");
	CHECK(tfs_fs_listxattr(&mt.c, w, v, 3, &len) == TFS_ERR_RANGE, "list: too small a room");
	CHECK(tfs_fs_listxattr(&mt.c, 1, v, sizeof v, &len) == TFS_OK && len == 0, "a local root has none");
	CHECK(tfs_fs_getxattr(&mt.c, walk(&mt, "__metadata__.json"), "user.dtype", v, sizeof v, &len) ==
		      TFS_ERR_NODATA,
	      "the metadata has no dtype");
	unmount(&mt);
}

/* The source rewritten in place while a file is open: opens fail, and a
 * spliced read of the open file fails rather than give the new bytes. */
static void test_changed(void)
{
	struct mount mt;
	if (mount_with(&mt, TFS_LAYOUT_FLAT, "export") != 0) {
		CHECK(0, "mount");
		return;
	}
	mt.c.splice = true;
	struct tfs_handle *h, *g;
	struct tfs_reply r;
	uint64_t w = walk(&mt, "w");
	CHECK(tfs_fs_open(&mt.c, w, O_RDONLY, &h) == TFS_OK, "open");
	char *got;
	CHECK(read_all(&mt, w, 64, &got) == 24, "read before");
	free(got);
	struct tfs_handle *z;
	CHECK(tfs_fs_open(&mt.c, walk(&mt, "z"), O_RDONLY, &z) == TFS_OK, "open z");
	CHECK(tfs_fs_read(&mt.c, z, 0, TFS_SPLICE_MIN, &r) == TFS_OK && r.n == 1 && r.files == 1 &&
		      r.part[0].foff == data_at + 36,
	      "a large read of a local file: one range to splice");
	tfs_fs_read_done(&r);
	int fd = open(path, O_WRONLY | O_APPEND);
	CHECK(fd >= 0 && write(fd, "xxxxxxxx", 8) == 8, "append");
	close(fd);
	CHECK(tfs_fs_open(&mt.c, w, O_RDONLY, &g) == TFS_ERR_IO, "open after the change");
	CHECK(tfs_fs_open(&mt.c, walk(&mt, "model.safetensors"), O_RDONLY, &g) == TFS_ERR_IO,
	      "a generated file: open after the change");
	/* A splice checks the source first: a short splice would pass for
	 * the end of the file, a rewritten one give its new bytes. */
	CHECK(tfs_fs_read(&mt.c, z, 0, TFS_SPLICE_MIN, &r) == TFS_ERR_IO, "spliced read after the change");
	tfs_fs_read_done(&r);
	tfs_fs_release(&mt.c, z);
	tfs_fs_release(&mt.c, h);
	unmount(&mt);
}

int main(int argc, char **argv)
{
	check_args(argc, argv);
	make_file();
	RUN(test_lookup_attr);
	RUN(test_reads);
	RUN(test_xattrs);
	RUN(test_generated);
	RUN(test_changed);
	unlink(path);
	return check_report();
}
