/* The unit tests' one harness: CHECK(cond, fmt, ...) counts a check and
 * prints a failed one's line on stderr (with the group `current` names,
 * when a test sets it); check_report() prints the last line,
 * "N passed, M failed", which scripts/run-checks.sh reads, and gives the
 * exit status. Included once, by the test's one file. */
#ifndef TFS_TEST_CHECK_H
#define TFS_TEST_CHECK_H

#include <stdio.h>

static int passed, failed;
static const char *current;

#define CHECK(cond, ...)                                                                                     \
	do {                                                                                                 \
		if (cond) {                                                                                  \
			passed++;                                                                            \
		} else {                                                                                     \
			failed++;                                                                            \
			fprintf(stderr, "FAIL %s:%d%s%s%s: ", __FILE__, __LINE__, current ? " [" : "",       \
				current ? current : "", current ? "]" : "");                                 \
			fprintf(stderr, __VA_ARGS__);                                                        \
			fputc('\n', stderr);                                                                 \
		}                                                                                            \
	} while (0)

static inline int check_report(void)
{
	printf("%d passed, %d failed\n", passed, failed);
	return failed ? 1 : 0;
}

#endif
