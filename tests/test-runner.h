/* SPDX-License-Identifier: MIT */
/*
 * Self-registering tests: `TEST(name) { ... }` defines a test and puts it on
 * the program's list (a linker section), so main() never keeps a list by
 * hand. test_run() runs them in the order they are written and checks after
 * each that this process, and the daemon under test, hold as many fds as
 * before the first: a leak shows up in the test that made it.
 */
#ifndef CUFLAG_TEST_RUNNER_H
#define CUFLAG_TEST_RUNNER_H

#include "harness.h"

struct test {
	const char *name;
	void (*run)(void);
	int line; /* where it is written: the order it runs in */
};

#define TEST(fn)                                                                           \
	static void fn(void);                                                              \
	static const struct test test_entry_##fn                                           \
		__attribute__((used, section("cuflag_tests"), aligned(sizeof(void *)))) = { \
			#fn, fn, __LINE__                                                  \
		};                                                                         \
	static void fn(void)

struct test_env {
	/* The daemon whose fds must come back after each test, or NULL. */
	const struct daemon_proc *daemon;
	/* Called while waiting for the fds to come back (to drain a log pipe
	 * the daemon might block on), or NULL. */
	void (*settle)(void);
};

/*
 * Run the tests named in argv[1..] (every test when there are none) with
 * env; print a line per test; abort at the first failed check or at fds that
 * do not come back within 5 s to the counts taken (once steady) before the
 * first test. Returns 0 (exit status); 2 for a name that is no test, after
 * listing them.
 */
int test_run(const struct test_env *env, int argc, char **argv);

#endif
