/* SPDX-License-Identifier: MIT */
/* The main() every check unit test shares: one suite, one test case. */
#ifndef CUFLAG_TEST_UNIT_RUN_H
#define CUFLAG_TEST_UNIT_RUN_H

#include <check.h>
#include <stdlib.h>

/* Run the test case tc (its timeout set here) as suite name; the exit
 * status. */
static inline int unit_run_case(const char *name, TCase *tc)
{
	Suite *s = suite_create(name);
	SRunner *sr;
	int failed;

	/* check's own 4 s is a timed test: a sanitizer build, or a program a
	 * test runs (promtool starts in seconds on a loaded 2-CPU machine),
	 * passes it by as much as the machine is busy. */
	tcase_set_timeout(tc, 120);
	suite_add_tcase(s, tc);
	sr = srunner_create(s);
	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}

/* Run the tests of a NULL-terminated list as suite name; the exit status. */
static inline int unit_run(const char *name, const TTest *const *tests)
{
	TCase *tc = tcase_create("core");

	for (; *tests; tests++)
		tcase_add_test(tc, *tests);
	return unit_run_case(name, tc);
}

#endif
