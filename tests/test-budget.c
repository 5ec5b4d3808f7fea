/* SPDX-License-Identifier: MIT */
/* What one user's eventfd writes may cost the scanner (daemon/budget.c). */
#undef NDEBUG
#include <check.h>
#include <stdint.h>
#include <stdlib.h>

#include "budget.h"
#include "unit-run.h"

#define US 1000u
#define MS 1000000u

/* The daemon's defaults, unscaled (a sanitizer build scales them). */
#define CFG(cap)                                                                           \
	((struct write_budget_cfg){ .cap_ns = (cap), .allowance_ns = 20 * US,                \
				    .suspect_ns = 50 * US, .suspect_for_ns = 1000 * MS })

START_TEST(test_cheap_writes_are_free)
{
	struct write_budget b = { 0 };
	struct write_budget_cfg cfg = CFG(5 * MS);
	uint64_t t = 1000 * MS;

	/* 200 000 writes at the allowance: never over, never a suspect. */
	for (int i = 0; i < 200000; i++, t += 1 * US)
		ck_assert_int_eq(budget_charge(&b, &cfg, 20 * US, 0, t), 0);
	ck_assert_uint_eq(b.level_ns, 0);
	ck_assert(!budget_suspect(&b, t));
}
END_TEST

START_TEST(test_preempted_write_not_charged)
{
	struct write_budget b = { 0 };
	struct write_budget_cfg cfg = CFG(5 * MS);
	uint64_t t = 1000 * MS;

	/* 40 ms on the wall clock: preempted, or slow. Only a suspect. */
	ck_assert_int_eq(budget_charge(&b, &cfg, 40 * MS, 0, t), 0);
	ck_assert_uint_eq(b.level_ns, 0);
	ck_assert(budget_suspect(&b, t + 1));
	/* The CPU clock then says the writes are cheap: nothing charged. */
	for (int i = 0; i < 1000; i++)
		ck_assert_int_eq(budget_charge(&b, &cfg, 5 * US, 1, t + (uint64_t)i * US), 0);
	ck_assert_uint_eq(b.level_ns, 0);
	/* And a second later it is no suspect any more. */
	ck_assert(!budget_suspect(&b, t + 2000 * MS));
}
END_TEST

START_TEST(test_costly_writes_dropped)
{
	struct write_budget b = { 0 };
	struct write_budget_cfg cfg = CFG(5 * MS);
	uint64_t t = 1000 * MS;
	int writes = 0;

	/* 19 000 epoll watchers: 1.3 ms of CPU per write, back to back. */
	ck_assert_int_eq(budget_charge(&b, &cfg, 1300 * US, 0, t), 0); /* suspect */
	while (!budget_charge(&b, &cfg, 1300 * US, 1, t += 1300 * US))
		ck_assert_int_lt(++writes, 10);
	/* Over 5 ms within a handful of writes: two in a row let go, then
	 * charged until over. */
	ck_assert_int_ge(writes, 4);
	ck_assert_int_le(writes, 7);
}
END_TEST

START_TEST(test_sporadic_costly_writes_free)
{
	struct write_budget b = { 0 };
	struct write_budget_cfg cfg = CFG(5 * MS);
	uint64_t t = 1000 * MS;

	/* A virtual CPU taken away now and then: a costly write between cheap
	 * ones, for ever, is never charged. */
	ck_assert_int_eq(budget_charge(&b, &cfg, 1 * MS, 0, t), 0);
	for (int i = 0; i < 10000; i++) {
		ck_assert_int_eq(budget_charge(&b, &cfg, 200 * US, 1, t += 10 * US), 0);
		ck_assert_int_eq(budget_charge(&b, &cfg, 5 * US, 1, t += 10 * US), 0);
		ck_assert_int_eq(budget_charge(&b, &cfg, 300 * US, 1, t += 10 * US), 0);
		ck_assert_int_eq(budget_charge(&b, &cfg, 2 * US, 1, t += 10 * US), 0);
	}
	ck_assert_uint_eq(b.level_ns, 0);
}
END_TEST

START_TEST(test_huge_write_charged_at_once)
{
	struct write_budget b = { 0 };
	struct write_budget_cfg cfg = CFG(2 * MS);
	uint64_t t = 1000 * MS;

	/* 90 000 watchers: 6 ms of CPU a write. The first (wall-timed) makes a
	 * suspect; the next is over the 2 ms budget alone. */
	ck_assert_int_eq(budget_charge(&b, &cfg, 6 * MS, 0, t), 0);
	ck_assert_int_eq(budget_charge(&b, &cfg, 6 * MS, 1, t + 6 * MS), 1);
}
END_TEST

START_TEST(test_drains_at_a_tenth)
{
	struct write_budget b = { 0 };
	struct write_budget_cfg cfg = CFG(5 * MS);
	uint64_t t = 1000 * MS;

	/* 100 us of CPU every ms (10 %): sustainable for ever. */
	ck_assert_int_eq(budget_charge(&b, &cfg, 1 * MS, 0, t), 0);
	for (int i = 0; i < 100000; i++)
		ck_assert_int_eq(budget_charge(&b, &cfg, 120 * US, 1, t += 1 * MS), 0);
	/* 20 %: over before long. */
	int i = 0;
	while (!budget_charge(&b, &cfg, 220 * US, 1, t += 1 * MS))
		ck_assert_int_lt(++i, 1000);
	ck_assert_int_gt(i, 10);
}
END_TEST

int main(void)
{
	const TTest *const tests[] = { test_cheap_writes_are_free,
				       test_preempted_write_not_charged,
				       test_costly_writes_dropped, test_sporadic_costly_writes_free,
				       test_huge_write_charged_at_once,
				       test_drains_at_a_tenth, NULL };
	return unit_run("budget", tests);
}
