/* Manifests for --verify and the line -o sums writes (compute/manifest.h). */
#include "compute/manifest.h"

#include <stdlib.h>
#include <string.h>

#include "core/hex.h"

static int is_hex(const char *s, size_t n)
{
	return strspn(s, "0123456789abcdefABCDEF") >= n;
}

static int add_entry(struct tfs_manifest *m, enum tfs_digest_algo a, const char *hex, const char *name,
		     size_t nl)
{
	if (m->n == m->cap) {
		size_t cap = m->cap ? 2 * m->cap : 64;
		struct tfs_manifest_entry *e = realloc(m->e, cap * sizeof *e);
		if (!e)
			return -1;
		m->e = e;
		m->cap = cap;
	}
	struct tfs_manifest_entry *x = &m->e[m->n];
	memset(x, 0, sizeof *x);
	x->a = (uint8_t)a;
	x->line = (uint32_t)m->lines;
	size_t hl = tfs_digest_hex_len(a);
	for (size_t i = 0; i < hl; i += 2)
		x->d[i / 2] = (unsigned char)(tfs_hexval(hex[i]) << 4 | tfs_hexval(hex[i + 1]));
	x->node = m->resolve ? m->resolve(m->ctx, name, nl) : 0;
	x->name = UINT32_MAX;
	if (!x->node) {
		/* Kept to be reported: not in the checkpoint (or no resolver).
		 * Its length first, as the name may hold a NUL. */
		uint32_t len = (uint32_t)nl;
		size_t need = sizeof len + nl + 1;
		if (m->nlen + need > UINT32_MAX)
			return -1;
		if (m->nlen + need > m->ncap) {
			size_t cap = m->ncap ? m->ncap : 4096;
			while (cap < m->nlen + need)
				cap *= 2;
			char *b = realloc(m->names, cap);
			if (!b)
				return -1;
			m->names = b;
			m->ncap = cap;
		}
		memcpy(m->names + m->nlen, &len, sizeof len);
		memcpy(m->names + m->nlen + sizeof len, name, nl);
		m->names[m->nlen + sizeof len + nl] = 0;
		x->name = (uint32_t)m->nlen;
		m->nlen += need;
	}
	m->n++;
	return 0;
}

void tfs_manifest_hex(const struct tfs_manifest_entry *x, char *hex)
{
	static const char digits[] = "0123456789abcdef";
	size_t hl = tfs_digest_hex_len((enum tfs_digest_algo)x->a);
	for (size_t i = 0; i < hl; i++)
		hex[i] = digits[i % 2 ? x->d[i / 2] & 15 : x->d[i / 2] >> 4];
	hex[hl] = 0;
}

const char *tfs_manifest_name(const struct tfs_manifest *m, const struct tfs_manifest_entry *x, size_t *len)
{
	uint32_t l = 0;
	if (x->name == UINT32_MAX)
		return NULL;
	memcpy(&l, m->names + x->name, sizeof l);
	*len = l;
	return m->names + x->name + sizeof l;
}

/* sha256sum / xxh64sum: HEX, a space, ' ' or '*', NAME; a line starting
 * with '\' has "\\" and "\n" escaped in NAME. An empty NAME (which
 * sha256sum refuses) is taken as the empty tensor name; tensorfs writes
 * that one's file name, "%empty". NAME is every byte to the end of the
 * line, a NUL too: a tensor's name may hold one, and a line is never taken
 * for a shorter name than it holds (sha256sum -c reads up to the NUL). */
static int coreutils_line(struct tfs_manifest *m, char *s, size_t n)
{
	char *end = s + n;
	int esc = *s == '\\';
	s += esc;
	size_t hl = strspn(s, "0123456789abcdefABCDEF");
	if ((hl != 64 && hl != 16) || s[hl] != ' ' || (s[hl + 1] != ' ' && s[hl + 1] != '*'))
		return 0;
	char *name = s + hl + 2, *o = name;
	for (char *p = name; p < end; p++) {
		if (esc && *p == '\\' && p + 1 < end && (p[1] == '\\' || p[1] == 'n' || p[1] == 'r')) {
			p++;
			*o++ = *p == 'n' ? '\n' : *p == 'r' ? '\r' : '\\';
		} else {
			*o++ = *p;
		}
	}
	enum tfs_digest_algo a = hl == 64 ? TFS_DIGEST_SHA256 : TFS_DIGEST_XXH64;
	return add_entry(m, a, s, name, (size_t)(o - name)) ? -1 : 1;
}

/* llama-gguf-hash: ALGO  HEX  FILE:TENSOR (and a trailing "-  Ok" when it
 * checked); the whole model's line (no ':') and other algorithms are
 * skipped. */
static int gguf_hash_line(struct tfs_manifest *m, char *s)
{
	char *tok[3];
	int k = 0;
	char *save = NULL;
	for (char *p = strtok_r(s, " \t", &save); p && k < 3; p = strtok_r(NULL, " \t", &save))
		tok[k++] = p;
	if (k < 3)
		return 0;
	enum tfs_digest_algo a;
	if (strcmp(tok[0], "sha256") == 0 && strlen(tok[1]) == 64 && is_hex(tok[1], 64))
		a = TFS_DIGEST_SHA256;
	else if (strcmp(tok[0], "xxh64") == 0 && strlen(tok[1]) == 16 && is_hex(tok[1], 16))
		a = TFS_DIGEST_XXH64;
	else
		return strcmp(tok[0], "sha1") == 0 || strcmp(tok[0], "uuid") == 0 ||
				       strcmp(tok[0], "xxh3") == 0 || strcmp(tok[0], "manifest") == 0 ||
				       strcmp(tok[0], "sha256") == 0 || strcmp(tok[0], "xxh64") == 0
			       ? 2
			       : 0;
	char *colon = strchr(tok[2], ':');
	if (!colon)
		return 2; /* the whole model */
	return add_entry(m, a, tok[1], colon + 1, strlen(colon + 1)) ? -1 : 1;
}

tfs_err tfs_manifest_line(struct tfs_manifest *m, char *s, size_t n)
{
	m->lines++;
	while (n && s[n - 1] == '\r')
		n--;
	s[n] = 0; /* (the newline, or the caller's spare byte) */
	int r = !n || s[0] == '#' ? 2 : coreutils_line(m, s, n);
	/* llama-gguf-hash prints names with printf's %s: never a NUL. */
	if (r == 0 && !memchr(s, 0, n))
		r = gguf_hash_line(m, s);
	if (r < 0)
		return TFS_ERR_NOMEM;
	if (r == 0)
		m->bad++;
	return TFS_OK;
}

tfs_err tfs_manifest_done(struct tfs_manifest *m, struct tfs_diag *d)
{
	if (m->n == 0)
		return tfs_fail(
			d, TFS_ERR_INVAL,
			"the manifest holds no checksum line (sha256sum, xxh64sum or llama-gguf-hash output)");
	return TFS_OK;
}

tfs_err tfs_manifest_parse(char *text, size_t len, struct tfs_manifest *m, struct tfs_diag *d)
{
	memset(m, 0, sizeof *m);
	for (char *s = text, *end = text + len; s < end;) {
		char *nl = memchr(s, '\n', (size_t)(end - s));
		char *next = nl ? nl + 1 : end;
		if (tfs_manifest_line(m, s, (size_t)((nl ? nl : end) - s))) {
			tfs_manifest_free(m);
			return tfs_fail(d, TFS_ERR_NOMEM, "out of memory");
		}
		s = next;
	}
	tfs_err e = tfs_manifest_done(m, d);
	if (e)
		tfs_manifest_free(m);
	return e;
}

void tfs_manifest_free(struct tfs_manifest *m)
{
	free(m->e);
	free(m->names);
	m->e = NULL;
	m->names = NULL;
	m->n = m->cap = m->nlen = m->ncap = 0;
}

static int needs_escape(const char *s, size_t n)
{
	return memchr(s, '\\', n) || memchr(s, '\n', n) || memchr(s, '\r', n);
}

size_t tfs_sum_line_len(size_t hexlen, const char *name, size_t n)
{
	size_t len = hexlen + 2 + n + 1;
	if (needs_escape(name, n)) {
		len++; /* the leading backslash */
		for (size_t k = 0; k < n; k++)
			len += name[k] == '\\' || name[k] == '\n' || name[k] == '\r';
	}
	return len;
}

size_t tfs_sum_line(char *out, const char *hex, size_t hexlen, const char *name, size_t n)
{
	char *o = out;
	int esc = needs_escape(name, n);
	if (esc)
		*o++ = '\\';
	memcpy(o, hex, hexlen);
	o += hexlen;
	*o++ = ' ';
	*o++ = ' ';
	for (size_t k = 0; k < n; k++) {
		char ch = name[k];
		if (esc && (ch == '\\' || ch == '\n' || ch == '\r')) {
			*o++ = '\\';
			*o++ = ch == '\\' ? '\\' : ch == '\n' ? 'n' : 'r';
		} else {
			*o++ = ch;
		}
	}
	*o++ = '\n';
	return (size_t)(o - out);
}
