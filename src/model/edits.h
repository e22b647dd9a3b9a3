/* -o edits=FILE: metadata edits, applied to the tables once they are read
 * and before anything shows them, so __metadata__.json and every generated
 * file (-o export's, model.gguf, the re-sharded set) carry them and agree.
 * The source is never written. docs/views.md, "Editing metadata", has the rules. */
#ifndef TFS_EDITS_H
#define TFS_EDITS_H

#include "core/err.h"
#include "core/table.h"

struct tfs_edits;

/* Reads and checks FILE on its own (a JSON object; each value null to
 * delete the key, a plain JSON value, or {"type": T, "value": V} with
 * "element_type" for an ARRAY). Messages name the file and the key. */
tfs_err tfs_edits_load(const char *path, struct tfs_edits **out, struct tfs_diag *d);
/* The same for the file's text (the fuzz target's way in); `path` names
 * it in messages. */
tfs_err tfs_edits_parse(const char *text, size_t len, const char *path, struct tfs_edits **out,
			struct tfs_diag *d);
void tfs_edits_free(struct tfs_edits *ed);

/* Applies them to one table: typed metadata (a GGUF's) gets each value in
 * its key's type, or the natural one for a new key; string pairs take
 * strings only. Refuses (TFS_ERR_INVAL, one line) a value that does not
 * fit or would make the file invalid; the table is then unchanged. */
tfs_err tfs_edits_apply(const struct tfs_edits *ed, struct tfs_table *t, struct tfs_diag *d);

#endif
