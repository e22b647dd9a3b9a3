/* The tools: --inspect, --verify, --stats, diff and --list as library
 * functions over checkpoints opened through the one pipeline
 * (fs/mount.h: struct tfs_mount), each writing its results to a stream the
 * caller gives and returning its exit class (core/exit.h; diff's is
 * diff(1)'s). No FUSE: the unit tests call them with no mount
 * (tests/unit/test_tools.c). The command line (cli/main.c) opens what a
 * tool asks for and dispatches from the table tfs_tools; a new tool is
 * its file here and one line in tools/registry.c. */
#ifndef TFS_TOOLS_H
#define TFS_TOOLS_H

#include <stdio.h>

#include "core/exit.h"
#include "core/opts.h"

struct tfs_mount;

#define INSPECT_USAGE "tensorfs --inspect [--json] [-o OPTIONS] SOURCE"
#define VERIFY_USAGE "tensorfs --verify [--xxh64] [--json] [-o OPTIONS] SOURCE [MANIFEST]"
#define STATS_USAGE "tensorfs --stats [--json] [-o OPTIONS] SOURCE"
#define DIFF_USAGE "tensorfs diff [--json] [-o OPTIONS] A B"
#define LIST_USAGE "tensorfs --list"

/* What a run found, beside what it wrote (for a caller that reads no
 * text: the tests). */
struct tfs_tool_result {
	uint64_t tensors; /* tensors listed, measured, hashed or compared */
	uint64_t checked; /* --verify: hashes checked (manifest lines, files the server vouches for) */
	uint64_t differ;  /* --verify: mismatches; diff: tensors that differ (values, shape, dtype) */
	uint64_t missing; /* --verify: manifest names not in the checkpoint; diff: tensors on one side only */
};

struct tfs_tool_args {
	/* The checkpoints the tool opened (tfs_tool.sources of them; the
	 * model with the edits applied, and the flat tree of the -o options
	 * for a tool that reads files: tfs_tool.tree). */
	struct tfs_mount *a, *b;
	const char *shown, *shown_b; /* their SOURCE as messages name them */
	const char *manifest;        /* --verify's MANIFEST, or NULL */
	const struct tfs_opts *opts; /* the views' and drivers' -o options */
	int json, xxh64;
	FILE *out;                      /* the results; one line per failure goes to stderr */
	struct tfs_tool_result *result; /* filled in when not NULL */
};

struct tfs_tool {
	const char *name;  /* as the command line names it: "--inspect", "diff" */
	const char *usage; /* "tensorfs --inspect [--json] [-o OPTIONS] SOURCE" */
	unsigned sources;  /* checkpoints it opens: 0 (--list), 1, 2 (diff) */
	unsigned args_max; /* words after the options: SOURCE [MANIFEST], A B */
	int index_only_ok; /* an index whose shards are missing is enough */
	int manifest;      /* its second word is a file to read (--verify's MANIFEST) */
	int tree;          /* it reads the files of a flat mount with the -o options (tfs_mount.tree) */
	int trouble;       /* the exit code when a source cannot be opened; 0: the class */
	/* Of two tools given at once (a mistake, said once), the one whose
	 * name and usage the message shows: the higher. */
	int rank;
	int (*run)(const struct tfs_tool_args *a);
};

/* Every tool, NULL-terminated (tools/registry.c). */
extern const struct tfs_tool *const tfs_tools[];

/* The tool named `name` ("--verify", "diff"), or NULL. */
const struct tfs_tool *tfs_tool_named(const char *name);

#endif
