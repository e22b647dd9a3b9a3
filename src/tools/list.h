/* tensorfs --list: the caller's tensorfs mounts, with each daemon's PID
 * (for kill -USR1 and SIGTERM), its options and a remote mount's counters. */
#ifndef TFS_LIST_H
#define TFS_LIST_H

#include <stdio.h>

#include "tools/tools.h"

/* Prints one entry per mount of the caller's in this mount namespace.
 * A daemon that does not answer within a second is named so, never waited
 * for. Returns an exit code (TFS_EXIT_OK; TFS_EXIT_INTERNAL when
 * /proc/self/mountinfo cannot be read), after one line on stderr. */
int tfs_list_mounts(FILE *out);

#endif
