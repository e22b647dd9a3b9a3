/* Zip archives, as far as mapping stored entries needs (APPNOTE 6.3.x:
 * end of central directory, its ZIP64 locator and record, central and
 * local file headers, the ZIP64 extended information extra field). */
#include "formats/zip.h"

#include <stdlib.h>
#include <string.h>

#define SIG_LOCAL 0x04034b50u
#define SIG_CENTRAL 0x02014b50u
#define SIG_EOCD 0x06054b50u
#define SIG_EOCD64 0x06064b50u
#define SIG_LOC64 0x07064b50u
#define EOCD_LEN 22
#define CD_MAX (512u << 20)
#define LOCAL_WINDOW (256u << 10) /* a directory of about five million entries */

static uint16_t u16(const unsigned char *p)
{
	return (uint16_t)(p[0] | p[1] << 8);
}
static uint32_t u32(const unsigned char *p)
{
	return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}
static uint64_t u64(const unsigned char *p)
{
	return u32(p) | (uint64_t)u32(p + 4) << 32;
}

int tfs_zip_sniff(const unsigned char *head, size_t n, const char **name, uint32_t *nlen)
{
	if (n < 30 || u32(head) != SIG_LOCAL)
		return 0;
	uint32_t nl = u16(head + 26);
	if (30 + (size_t)nl > n)
		nl = (uint32_t)(n - 30);
	*name = (const char *)head + 30;
	*nlen = nl;
	return 1;
}

/* Where the directory is, from the end of central directory record and,
 * when a field is saturated, the ZIP64 record the locator points at. */
static tfs_err find_cd(struct tfs_source *src, uint64_t size, uint64_t *cd_off, uint64_t *cd_len,
		       uint64_t *count, uint64_t *cd_end, struct tfs_diag *d)
{
	if (size < EOCD_LEN)
		return tfs_fail(d, TFS_ERR_FORMAT,
				"not a zip archive: %llu bytes is shorter than its end record",
				(unsigned long long)size);
	size_t tl = size < EOCD_LEN + 65535 ? (size_t)size : EOCD_LEN + 65535;
	unsigned char *tail = malloc(tl);
	if (!tail)
		return tfs_fail(d, TFS_ERR_NOMEM, "out of memory");
	tfs_err e = tfs_source_read(src, tail, tl, size - tl, d);
	if (e) {
		free(tail);
		return e;
	}
	/* The last record whose comment length reaches the end exactly. */
	size_t at = (size_t)-1;
	for (size_t i = tl - EOCD_LEN + 1; i-- > 0;)
		if (u32(tail + i) == SIG_EOCD && i + EOCD_LEN + u16(tail + i + 20) == tl) {
			at = i;
			break;
		}
	if (at == (size_t)-1) {
		free(tail);
		return tfs_fail(
			d, TFS_ERR_FORMAT,
			"no zip end-of-central-directory record: the file is truncated or not a zip archive");
	}
	const unsigned char *r = tail + at;
	uint64_t eocd = size - tl + at;
	uint16_t disk = u16(r + 4), cdisk = u16(r + 6);
	uint64_t n_disk = u16(r + 8);
	*count = u16(r + 10);
	*cd_len = u32(r + 12);
	*cd_off = u32(r + 16);
	*cd_end = eocd;
	int z64 = *count == 0xffff || *cd_len == 0xffffffffu || *cd_off == 0xffffffffu || disk == 0xffff ||
		  cdisk == 0xffff || n_disk == 0xffff;
	if (eocd >= 20 && (at >= 20 ? u32(r - 20) == SIG_LOC64 : 0)) {
		const unsigned char *l = r - 20;
		uint64_t off64 = u64(l + 8);
		unsigned char rec[56];
		if (off64 > eocd - 20 || eocd - 20 - off64 < sizeof rec) {
			free(tail);
			return tfs_fail(d, TFS_ERR_FORMAT, "the ZIP64 locator points outside the file");
		}
		if ((e = tfs_source_read(src, rec, sizeof rec, off64, d))) {
			free(tail);
			return e;
		}
		if (u32(rec) != SIG_EOCD64) {
			free(tail);
			return tfs_fail(d, TFS_ERR_FORMAT,
					"the ZIP64 locator does not point at a ZIP64 end record");
		}
		disk = cdisk = 0;
		if (u32(rec + 16) != 0 || u32(rec + 20) != 0 || u32(l + 16) > 1)
			disk = 1;
		n_disk = u64(rec + 24);
		*count = u64(rec + 32);
		*cd_len = u64(rec + 40);
		*cd_off = u64(rec + 48);
		*cd_end = off64;
		z64 = 0;
	}
	free(tail);
	if (z64)
		return tfs_fail(d, TFS_ERR_FORMAT,
				"a ZIP64 archive without its ZIP64 end record (truncated?)");
	if (disk || cdisk || n_disk != *count)
		return tfs_fail(d, TFS_ERR_FORMAT,
				"a multi-part (spanned) zip archive, which is not supported");
	if (*cd_off > *cd_end || *cd_len > *cd_end - *cd_off)
		return tfs_fail(
			d, TFS_ERR_FORMAT,
			"the zip central directory (%llu bytes at %llu) is not inside the file before its end record",
			(unsigned long long)*cd_len, (unsigned long long)*cd_off);
	if (*cd_len > CD_MAX)
		return tfs_fail(d, TFS_ERR_FORMAT, "the zip central directory is over %u bytes", CD_MAX);
	if (*count > *cd_len / 46)
		return tfs_fail(
			d, TFS_ERR_FORMAT,
			"the zip end record counts %llu entries, more than its %llu-byte directory can hold",
			(unsigned long long)*count, (unsigned long long)*cd_len);
	return TFS_OK;
}

/* ZIP64 extended information: the saturated fields, in this order. */
static int zip64_extra(const unsigned char *x, size_t xl, struct tfs_zip_entry *t, int need_u, int need_c,
		       int need_o)
{
	while (xl >= 4) {
		uint16_t id = u16(x), len = u16(x + 2);
		if ((size_t)len + 4 > xl)
			return -1;
		if (id == 1) {
			const unsigned char *p = x + 4;
			size_t left = len;
			if (need_u) {
				if (left < 8)
					return -1;
				t->usize = u64(p), p += 8, left -= 8;
			}
			if (need_c) {
				if (left < 8)
					return -1;
				t->csize = u64(p), p += 8, left -= 8;
			}
			if (need_o) {
				if (left < 8)
					return -1;
				t->lho = u64(p);
			}
			return 0;
		}
		x += 4 + len;
		xl -= 4 + (size_t)len;
	}
	return need_u || need_c || need_o ? -1 : 0;
}

static void quote_entry(char *out, size_t cap, const struct tfs_zip_entry *t)
{
	tfs_quote(out, cap, t->name, t->nlen);
}

static uint64_t name_hash(const char *p, size_t n)
{
	uint64_t h = 0xcbf29ce484222325ull; /* FNV-1a */
	for (size_t i = 0; i < n; i++)
		h = (h ^ (unsigned char)p[i]) * 0x100000001b3ull;
	return h;
}

static int lho_cmp(const void *a, const void *b, void *ctx)
{
	const struct tfs_zip_entry *e = ctx, *x = &e[*(const uint32_t *)a], *y = &e[*(const uint32_t *)b];
	return (x->lho > y->lho) - (x->lho < y->lho);
}

/* Entry i of the central directory, at `c` with `room` bytes left in it. */
static tfs_err central_entry(const unsigned char *c, size_t room, uint64_t i, uint64_t cd_off,
			     struct tfs_zip_entry *t, size_t *used, struct tfs_diag *d)
{
	char q[160];
	if (room < 46 || u32(c) != SIG_CENTRAL)
		return tfs_fail(d, TFS_ERR_FORMAT, "zip central directory entry %llu is damaged",
				(unsigned long long)i);
	size_t nl = u16(c + 28), xl = u16(c + 30), cl = u16(c + 32);
	if (46 + nl + xl + cl > room)
		return tfs_fail(d, TFS_ERR_FORMAT, "zip central directory entry %llu runs past the directory",
				(unsigned long long)i);
	t->flags = u16(c + 8);
	t->method = u16(c + 10);
	t->csize = u32(c + 20);
	t->usize = u32(c + 24);
	t->lho = u32(c + 42);
	t->name = (const char *)c + 46;
	t->nlen = (uint32_t)nl;
	*used = 46 + nl + xl + cl;
#define Q (quote_entry(q, sizeof q, t), q)
	if (zip64_extra(c + 46 + nl, xl, t, t->usize == 0xffffffffu, t->csize == 0xffffffffu,
			t->lho == 0xffffffffu))
		return tfs_fail(d, TFS_ERR_FORMAT, "zip entry %s: damaged ZIP64 extra field", Q);
	if (u16(c + 34) != 0 && u16(c + 34) != 0xffff)
		return tfs_fail(d, TFS_ERR_FORMAT, "zip entry %s is on another disk of a spanned archive", Q);
	if (t->flags & 1)
		return tfs_fail(d, TFS_ERR_FORMAT, "zip entry %s is encrypted", Q);
	if (t->lho > cd_off || cd_off - t->lho < 30)
		return tfs_fail(d, TFS_ERR_FORMAT,
				"zip entry %s: its local header offset %llu is past the data area", Q,
				(unsigned long long)t->lho);
	return TFS_OK;
}

/* Checks the local header of t, at lh (`want` bytes of header and name
 * readable), against its central entry, and finds its data. */
static tfs_err local_entry(const unsigned char *lh, size_t want, uint64_t cd_off, struct tfs_zip_entry *t,
			   struct tfs_diag *d)
{
	char q[160];
	if (u32(lh) != SIG_LOCAL)
		return tfs_fail(d, TFS_ERR_FORMAT, "zip entry %s: no local header at offset %llu", Q,
				(unsigned long long)t->lho);
	uint64_t nl = u16(lh + 26), xl = u16(lh + 28);
	t->data = t->lho + 30 + nl + xl;
	if (nl != t->nlen || 30 + nl > want)
		return tfs_fail(d, TFS_ERR_FORMAT, "zip entry %s: its local header names another entry", Q);
	if (t->data > cd_off || t->csize > cd_off - t->data)
		return tfs_fail(
			d, TFS_ERR_FORMAT,
			"zip entry %s: its %llu bytes at offset %llu run past the data area (truncated file?)",
			Q, (unsigned long long)t->csize, (unsigned long long)t->data);
	if (memcmp(lh + 30, t->name, (size_t)nl) != 0)
		return tfs_fail(d, TFS_ERR_FORMAT, "zip entry %s: its local header names another entry", Q);
	return TFS_OK;
}
#undef Q

/* Local headers, in file order, each after the previous entry's data.
 * Headers close together (small records, as in a state dict of many small
 * tensors) come in one read; a header far from the next costs only its own
 * bytes, never the record between them. */
static tfs_err local_entries(struct tfs_source *src, struct tfs_zip *z, uint32_t *order, uint64_t cd_off,
			     unsigned char *lbuf, struct tfs_diag *d)
{
	qsort_r(order, z->n, sizeof *order, lho_cmp, z->e);
	uint64_t prev_end = 0;
	const struct tfs_zip_entry *prev = NULL;
	uint64_t wbeg = 0, wend = 0; /* the bytes lbuf holds */
	tfs_err e;
	for (uint32_t k = 0; k < z->n; k++) {
		struct tfs_zip_entry *t = &z->e[order[k]];
		if (t->lho < prev_end) {
			char q[160], q2[160];
			quote_entry(q, sizeof q, t);
			quote_entry(q2, sizeof q2, prev);
			return tfs_fail(d, TFS_ERR_FORMAT, "zip entries %s and %s overlap", q2, q);
		}
		size_t want = 30 + (size_t)t->nlen;
		if (want > cd_off - t->lho)
			want = (size_t)(cd_off - t->lho);
		if (t->lho < wbeg || t->lho + want > wend) {
			uint64_t end = t->lho + want;
			for (uint32_t j = k + 1; j < z->n; j++) {
				const struct tfs_zip_entry *u = &z->e[order[j]];
				uint64_t ue = u->lho + 30 + u->nlen;
				if (ue > cd_off || ue - t->lho > LOCAL_WINDOW)
					break;
				if (ue > end)
					end = ue;
			}
			if ((e = tfs_source_read(src, lbuf, (size_t)(end - t->lho), t->lho, d)))
				return e;
			wbeg = t->lho;
			wend = end;
		}
		if ((e = local_entry(lbuf + (t->lho - wbeg), want, cd_off, t, d)))
			return e;
		prev_end = t->data + t->csize;
		prev = t;
	}
	return TFS_OK;
}

/* The name index; a name twice is refused (which entry would a reader get?). */
static tfs_err index_names(struct tfs_zip *z, struct tfs_diag *d)
{
	for (uint32_t k = 0; k < z->n; k++) {
		const struct tfs_zip_entry *t = &z->e[k];
		if (tfs_zip_find(z, t->name, t->nlen)) {
			char q[160];
			quote_entry(q, sizeof q, t);
			return tfs_fail(d, TFS_ERR_FORMAT, "zip entry %s appears twice", q);
		}
		size_t i = (size_t)name_hash(t->name, t->nlen) & (z->nslots - 1);
		while (z->slots[i])
			i = (i + 1) & (z->nslots - 1);
		z->slots[i] = k + 1;
	}
	return TFS_OK;
}

tfs_err tfs_zip_open(struct tfs_source *src, struct tfs_zip *z, struct tfs_diag *d)
{
	uint64_t size = src->id.size, cd_off = 0, cd_len = 0, count = 0, cd_end = 0;
	uint32_t *order = NULL;
	unsigned char *lbuf = NULL;
	memset(z, 0, sizeof *z);
	tfs_err e = find_cd(src, size, &cd_off, &cd_len, &count, &cd_end, d);
	if (e)
		return e;
	z->cd = malloc(cd_len ? (size_t)cd_len : 1);
	z->e = calloc(count ? (size_t)count : 1, sizeof *z->e);
	z->nslots = 16;
	while (z->nslots < 2 * count)
		z->nslots *= 2;
	z->slots = calloc(z->nslots, sizeof *z->slots);
	order = malloc((count ? (size_t)count : 1) * sizeof *order);
	lbuf = malloc(LOCAL_WINDOW > 30 + 65535 ? LOCAL_WINDOW : 30 + 65535);
	if (!z->cd || !z->e || !z->slots || !order || !lbuf) {
		e = tfs_fail(d, TFS_ERR_NOMEM, "out of memory for a %llu-entry zip directory",
			     (unsigned long long)count);
		goto out;
	}
	if ((e = tfs_source_read(src, z->cd, (size_t)cd_len, cd_off, d)))
		goto out;
	size_t pos = 0;
	for (uint64_t i = 0; i < count; i++) {
		size_t used = 0;
		if ((e = central_entry(z->cd + pos, (size_t)cd_len - pos, i, cd_off, &z->e[i], &used, d)))
			goto out;
		pos += used;
		order[i] = (uint32_t)i;
	}
	z->n = (uint32_t)count;
	if (!(e = local_entries(src, z, order, cd_off, lbuf, d)))
		e = index_names(z, d);
out:
	free(order);
	free(lbuf);
	if (e)
		tfs_zip_free(z);
	return e;
}

const struct tfs_zip_entry *tfs_zip_find(const struct tfs_zip *z, const char *name, size_t len)
{
	if (!z->nslots)
		return NULL;
	for (size_t i = (size_t)name_hash(name, len) & (z->nslots - 1); z->slots[i];
	     i = (i + 1) & (z->nslots - 1)) {
		const struct tfs_zip_entry *t = &z->e[z->slots[i] - 1];
		if (t->nlen == len && memcmp(t->name, name, len) == 0)
			return t;
	}
	return NULL;
}

void tfs_zip_free(struct tfs_zip *z)
{
	free(z->e);
	free(z->cd);
	free(z->slots);
	memset(z, 0, sizeof *z);
}
