/* The unit tests' one harness: CHECK(cond, fmt, ...) counts a check and
 * prints a failed one's line on stderr (with the group `current` names,
 * when a test sets it); check_report() prints the last line,
 * "N passed, M failed", which scripts/run-checks.sh reads, and gives the
 * exit status. Included once, by the test's one file.
 *
 * Each case is run through RUN(test_NAME): with no argument a binary runs
 * every case; `build/test_fs reads` (or test_reads) runs that case alone,
 * and a name that is no case fails (docs/testing.md). */
#ifndef TFS_TEST_CHECK_H
#define TFS_TEST_CHECK_H

#include <stdio.h>
#include <string.h>

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

static int check_argc, check_ran;
static char **check_argv;

/* The cases named on the command line (none: every case). */
static inline void check_args(int argc, char **argv)
{
	check_argc = argc;
	check_argv = argv;
}

static inline int check_wants(const char *fn)
{
	if (check_argc < 2)
		return 1;
	for (int i = 1; i < check_argc; i++)
		if (strcmp(check_argv[i], fn) == 0 ||
		    (strncmp(fn, "test_", 5) == 0 && strcmp(check_argv[i], fn + 5) == 0))
			return 1;
	return 0;
}

#define RUN(fn)                                                                                              \
	do {                                                                                                 \
		if (check_wants(#fn)) {                                                                      \
			check_ran++;                                                                         \
			fn();                                                                                \
		}                                                                                            \
	} while (0)

static inline int check_report(void)
{
	if (check_argc > 1 && !check_ran) {
		fprintf(stderr, "no such case: %s\n", check_argv[1]);
		failed++;
	}
	printf("%d passed, %d failed\n", passed, failed);
	return failed ? 1 : 0;
}

#endif
