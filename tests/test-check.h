/* SPDX-License-Identifier: MIT */
/*
 * The one assertion style of the tests that do not run under check (the
 * integration, ops, gpu and fuzz programs): a failed check prints where and
 * what, and aborts. Alive in every build, NDEBUG or not.
 */
#ifndef CUFLAG_TEST_CHECK_H
#define CUFLAG_TEST_CHECK_H

#include <stdio.h>
#include <stdlib.h>

/* cond must hold; else "file:line: check failed: cond" and abort. */
#define CHECK(cond) CHECK_MSG(cond, "check failed: %s", #cond)

/* expr must be 0 (a call's return code); else what it returned, and abort. */
#define CHECK_RC(expr)                                                                     \
	do {                                                                               \
		int rc_ = (expr);                                                          \
		CHECK_MSG(rc_ == 0, "%s returned %d", #expr, rc_);                         \
	} while (0)

/* cond must hold; else "file:line: " and the printf-style message, and abort. */
#define CHECK_MSG(cond, ...)                                                               \
	do {                                                                               \
		if (!(cond)) {                                                             \
			fprintf(stderr, "%s:%d: ", __FILE__, __LINE__);                    \
			fprintf(stderr, __VA_ARGS__);                                      \
			fputc('\n', stderr);                                               \
			abort();                                                           \
		}                                                                          \
	} while (0)

/* Print "file:line: " and the printf-style message, and abort. */
#define CHECK_FAIL(...) CHECK_MSG(0, __VA_ARGS__)

#endif
