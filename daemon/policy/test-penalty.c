/* SPDX-License-Identifier: MIT */
/* The daemon's per-user cool-down after a client made a write block. */
#undef NDEBUG
#include <check.h>
#include <stdint.h>
#include <stdlib.h>

#include "policy/penalty.h"
#include "unit-run.h"

START_TEST(test_doubling)
{
	struct uid_penalties p = { 0 };
	uint64_t t = 5000;

	ck_assert_uint_eq(penalty_left_ms(&p, 1000, t), 0);
	/* Two are let go. */
	ck_assert_uint_eq(penalty_strike(&p, 1000, t), 0);
	ck_assert_uint_eq(penalty_strike(&p, 1000, t + 100), 0);
	ck_assert_uint_eq(penalty_left_ms(&p, 1000, t + 200), 0);
	/* The third costs 1 s, then doubling. */
	ck_assert_uint_eq(penalty_strike(&p, 1000, t + 200), 1000);
	ck_assert_uint_eq(penalty_left_ms(&p, 1000, t + 600), 600);
	ck_assert_uint_eq(penalty_left_ms(&p, 1000, t + 1200), 0);
	ck_assert_uint_eq(penalty_left_ms(&p, 1001, t + 600), 0); /* another user */
	ck_assert_uint_eq(penalty_strike(&p, 1000, t + 2000), 2000);
	ck_assert_uint_eq(penalty_strike(&p, 1000, t + 5000), 4000);
	for (int i = 0; i < 10; i++)
		t += 1000, penalty_strike(&p, 1000, t + 5000);
	ck_assert_uint_eq(penalty_strike(&p, 1000, t + 5000), 60000); /* capped */
	/* More than a minute after the last one: forgotten, two free again. */
	ck_assert_uint_eq(penalty_strike(&p, 1000, t + 5000 + 61000), 0);
}
END_TEST

START_TEST(test_table_full)
{
	struct uid_penalties p = { 0 };

	/* More users than entries: the oldest is replaced, nothing grows. */
	for (uid_t u = 0; u < 3 * PENALTY_USERS; u++)
		for (int k = 0; k < 3; k++)
			ck_assert_uint_eq(penalty_strike(&p, u, 100 + u), k < 2 ? 0 : 1000);
	ck_assert_uint_gt(penalty_left_ms(&p, 3 * PENALTY_USERS - 1, 200), 0);
	ck_assert_uint_eq(penalty_left_ms(&p, 0, 200), 0); /* replaced */
	/* The newest user's next strike still doubles. */
	ck_assert_uint_eq(penalty_strike(&p, 3 * PENALTY_USERS - 1, 300), 2000);
}
END_TEST

int main(void)
{
	const TTest *tests[] = {
		test_doubling,
		test_table_full,
		NULL,
	};

	return unit_run("penalty", tests);
}
