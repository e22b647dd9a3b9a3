/* The registry of tools: the one place that names them (tools/tools.h). */
#include "tools/tools.h"

#include <string.h>

extern const struct tfs_tool tfs_tool_inspect, tfs_tool_verify, tfs_tool_stats, tfs_tool_diff, tfs_tool_list;

const struct tfs_tool *const tfs_tools[] = {
	&tfs_tool_inspect, &tfs_tool_verify, &tfs_tool_stats, &tfs_tool_diff, &tfs_tool_list, NULL,
};

const struct tfs_tool *tfs_tool_named(const char *name)
{
	for (const struct tfs_tool *const *t = tfs_tools; *t; t++)
		if (strcmp((*t)->name, name) == 0)
			return *t;
	return NULL;
}
