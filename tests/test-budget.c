/* SPDX-License-Identifier: MIT */
/* What one user's eventfd writes may cost the scanner (daemon/budget.c). */
#undef NDEBUG
#include <check.h>
#include <stdint.h>
#include <stdlib.h>

#include "budget.h"
#include "unit-run.h"

/* Scanner passes: each write below is in a pass of its own unless a test
 * says otherwise. */
static uint64_t pass;

#define US 1000u
#define MS 1000000u

/* The daemon's defaults, unscaled (a sanitizer build scales them). */
#define CFG(cap)                                                                           \
	((struct write_budget_cfg){ .cap_ns = (cap), .allowance_ns = 20 * US,                \
				    .pass_allowance_ns = 200 * US, .suspect_for_ns = 1000 * MS })

START_TEST(test_cheap_writes_are_free)
{
	struct write_budget b = { 0 };
	struct write_budget_cfg cfg = CFG(5 * MS);
	uint64_t t = 1000 * MS;

	/* 200 000 writes at the allowance: never over, never a suspect. */
	for (int i = 0; i < 200000; i++, t += 1 * US)
		ck_assert_int_eq(budget_charge(&b, &cfg, 20 * US, 0, t, ++pass), 0);
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
	ck_assert_int_eq(budget_charge(&b, &cfg, 40 * MS, 0, t, ++pass), 0);
	ck_assert_uint_eq(b.level_ns, 0);
	ck_assert(budget_suspect(&b, t + 1));
	/* The CPU clock then says the writes are cheap: nothing charged. */
	for (int i = 0; i < 1000; i++)
		ck_assert_int_eq(budget_charge(&b, &cfg, 5 * US, 1, t + (uint64_t)i * US, ++pass), 0);
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
	ck_assert_int_eq(budget_charge(&b, &cfg, 1300 * US, 0, t, ++pass), 0); /* suspect */
	while (!budget_charge(&b, &cfg, 1300 * US, 1, t += 1300 * US, ++pass))
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
	 * ones, for ever, is never charged (a 300 us one every 20 ms, 200 us
	 * ones, within the allowances, as often as every 20 us). */
	ck_assert_int_eq(budget_charge(&b, &cfg, 1 * MS, 0, t, ++pass), 0);
	for (int i = 0; i < 10000; i++) {
		ck_assert_int_eq(budget_charge(&b, &cfg, 200 * US, 1, t += 10 * US, ++pass), 0);
		ck_assert_int_eq(budget_charge(&b, &cfg, 5 * US, 1, t += 10 * US, ++pass), 0);
		if (i % 500 == 0)
			ck_assert_int_eq(budget_charge(&b, &cfg, 300 * US, 1, t += 10 * US, ++pass),
					 0);
		ck_assert_int_eq(budget_charge(&b, &cfg, 2 * US, 1, t += 10 * US, ++pass), 0);
	}
	ck_assert_uint_eq(b.level_ns, 0);
}
END_TEST

START_TEST(test_huge_writes_dropped_on_the_streak)
{
	struct write_budget b = { 0 };
	struct write_budget_cfg cfg = CFG(2 * MS);
	uint64_t t = 1000 * MS;

	/* 90 000 watchers: 6 ms of CPU a write. The first (wall-timed) makes a
	 * suspect; the third CPU-timed one in a row is charged, over the 2 ms
	 * budget at once. */
	ck_assert_int_eq(budget_charge(&b, &cfg, 6 * MS, 0, t, ++pass), 0);
	ck_assert_int_eq(budget_charge(&b, &cfg, 6 * MS, 1, t += 6 * MS, ++pass), 0);
	ck_assert_int_eq(budget_charge(&b, &cfg, 6 * MS, 1, t += 6 * MS, ++pass), 0);
	ck_assert_int_eq(budget_charge(&b, &cfg, 6 * MS, 1, t += 6 * MS, ++pass), 1);
}
END_TEST

START_TEST(test_costly_round_dropped)
{
	struct write_budget b = { 0 };
	struct write_budget_cfg cfg = CFG(2 * MS);
	uint64_t t = 1000 * MS;
	uint64_t round = ++pass;

	/* 18 000 watchers on one eventfd of 1024 slots: each write 1.3 ms, so
	 * each pays for many passes of its share, and the passes between carry
	 * its writes: one round of the user's (fair-share.h). Dropped at its
	 * third CPU-timed write: the round is over by the budget without the
	 * costliest. */
	ck_assert_int_eq(budget_charge(&b, &cfg, 1300 * US, 0, t, round), 0);
	ck_assert_int_eq(budget_charge(&b, &cfg, 1300 * US, 1, t += 30 * MS, round), 0);
	ck_assert_int_eq(budget_charge(&b, &cfg, 1300 * US, 1, t += 30 * MS, round), 0);
	ck_assert_int_eq(budget_charge(&b, &cfg, 1300 * US, 1, t += 30 * MS, round), 1);

	/* An honest round of 33 writes, 994 us of CPU in all (a loaded 2-CPU
	 * virtual machine: 20-300 us each now and then), is free. */
	struct write_budget c = { 0 };
	round = ++pass;
	ck_assert_int_eq(budget_charge(&c, &cfg, 300 * US, 0, t, round), 0);
	for (int i = 0; i < 32; i++)
		ck_assert_int_eq(budget_charge(&c, &cfg, (i % 4 ? 15 : 60) * US, 1, t += 1 * MS, round), 0);
	ck_assert_uint_eq(c.level_ns, 0);
	/* And one of 7 writes, 2.5 ms in all (test-load-shapes' client, the
	 * machine loaded with two tests at once). */
	struct write_budget e = { 0 };
	round = ++pass;
	ck_assert_int_eq(budget_charge(&e, &cfg, 900 * US, 0, t, round), 0);
	ck_assert_int_eq(budget_charge(&e, &cfg, 800 * US, 1, t += 1 * MS, round), 0);
	for (int i = 0; i < 6; i++)
		ck_assert_int_eq(budget_charge(&e, &cfg, 280 * US, 1, t += 1 * MS, round), 0);
	ck_assert_uint_eq(e.level_ns, 0);
}
END_TEST

START_TEST(test_costly_between_cheap_dropped)
{
	struct write_budget b = { 0 };
	struct write_budget_cfg cfg = CFG(2 * MS);
	uint64_t t = 1000 * MS;
	int costly = 0;

	/* 35 000 watchers on one eventfd, a cheap one beside it: a 2.5 ms
	 * write, then a cheap pass, so no two costly passes are in a row; its
	 * share lets the costly one in every 3 ms. Dropped by the fourth. */
	ck_assert_int_eq(budget_charge(&b, &cfg, 2500 * US, 0, t, ++pass), 0);
	for (;;) {
		ck_assert_int_lt(costly, 4);
		ck_assert_int_eq(budget_charge(&b, &cfg, 2 * US, 1, t += 500 * US, ++pass), 0);
		costly++;
		if (budget_charge(&b, &cfg, 2500 * US, 1, t += 2500 * US, ++pass))
			break;
	}
	ck_assert_int_eq(costly, 4);

	/* Honest passes a little over, many a second, cheap ones between (a
	 * loaded VM: 10 writes of 509 us in all, over by 109 us): free. */
	struct write_budget h = { 0 };
	ck_assert_int_eq(budget_charge(&h, &cfg, 509 * US, 0, t, ++pass), 0);
	for (int i = 0; i < 1000; i++) {
		for (int k = 0; k < 10; k++)
			ck_assert_int_eq(budget_charge(&h, &cfg, 51 * US, 1, t += 60 * US, pass), 0);
		ck_assert_int_eq(budget_charge(&h, &cfg, 2 * US, 1, t += 5 * MS, ++pass), 0);
		++pass;
	}
	ck_assert_uint_eq(h.level_ns, 0);
}
END_TEST

START_TEST(test_two_slow_honest_writes_free)
{
	struct write_budget b = { 0 };
	struct write_budget_cfg cfg = CFG(2 * MS);
	uint64_t t = 1000 * MS;

	/* Seen on a loaded 2-CPU virtual machine: an honest write slow on the
	 * wall clock, and the next, CPU-timed, 2.3 ms of the thread's CPU; then
	 * cheap again. Not charged, once a second for ever (a suspect from
	 * then on: every write CPU-timed). */
	for (int i = 0; i < 1000; i++) {
		ck_assert_int_eq(budget_charge(&b, &cfg, 3 * MS, i > 0, t += 1000 * MS, ++pass), 0);
		ck_assert_int_eq(budget_charge(&b, &cfg, 2300 * US, 1, t += 3 * MS, ++pass), 0);
		ck_assert_int_eq(budget_charge(&b, &cfg, 2 * US, 1, t += 10 * US, ++pass), 0);
	}
	ck_assert_uint_eq(b.level_ns, 0);
}
END_TEST

START_TEST(test_suspect_pass_confirmed)
{
	struct write_budget b = { 0 };
	struct write_budget_cfg cfg = CFG(2 * MS);
	uint64_t t = 1000 * MS;

	/* 18 000 watchers: 1.3 ms a write, one a pass (a group's doorbell). The
	 * first, on the wall clock, makes a suspect; three on the CPU clock
	 * confirm it: the third is charged with the first, over the budget. */
	ck_assert_int_eq(budget_charge(&b, &cfg, 1300 * US, 0, t, ++pass), 0);
	ck_assert_int_eq(budget_charge(&b, &cfg, 1300 * US, 1, t += 1300 * US, ++pass), 0);
	ck_assert_int_eq(budget_charge(&b, &cfg, 1300 * US, 1, t += 1300 * US, ++pass), 0);
	ck_assert_int_eq(budget_charge(&b, &cfg, 1300 * US, 1, t += 1300 * US, ++pass), 1);

	/* A slow wall-clock pass that the CPU clock then shows cheap was
	 * preemption: forgotten, and the costly passes after are charged alone. */
	struct write_budget c = { 0 };
	ck_assert_int_eq(budget_charge(&c, &cfg, 5 * MS, 0, t, ++pass), 0);
	ck_assert_int_eq(budget_charge(&c, &cfg, 5 * US, 1, t += 10 * US, ++pass), 0);
	ck_assert_int_eq(budget_charge(&c, &cfg, 5 * US, 1, t += 10 * US, ++pass), 0);
	ck_assert_uint_eq(c.unconfirmed_ns, 0);
	for (int i = 0; i < 3; i++)
		ck_assert_int_eq(budget_charge(&c, &cfg, 1300 * US, 1, t += 1300 * US, ++pass), 0);
	ck_assert_uint_gt(c.level_ns, 0);
	ck_assert_uint_lt(c.level_ns, 1300 * US);
}
END_TEST

START_TEST(test_drains_at_a_tenth)
{
	struct write_budget b = { 0 };
	struct write_budget_cfg cfg = CFG(5 * MS);
	uint64_t t = 1000 * MS;

	/* 100 us of CPU over the allowances every ms (10 %): sustainable for
	 * ever. */
	ck_assert_int_eq(budget_charge(&b, &cfg, 1 * MS, 0, t, ++pass), 0);
	for (int i = 0; i < 100000; i++)
		ck_assert_int_eq(budget_charge(&b, &cfg, 320 * US, 1, t += 1 * MS, ++pass), 0);
	/* 20 %: over before long. */
	int i = 0;
	while (!budget_charge(&b, &cfg, 420 * US, 1, t += 1 * MS, ++pass))
		ck_assert_int_lt(++i, 1000);
	ck_assert_int_gt(i, 10);
}
END_TEST

START_TEST(test_many_small_writes_summed)
{
	struct write_budget b = { 0 };
	struct write_budget_cfg cfg = CFG(2 * MS);
	uint64_t t = 1000 * MS;
	int writes = 0, dropped = 0;

	/* 256 epolls on each of 1024 eventfds: no write costs much (40 us),
	 * a pass of them 40 ms. Caught within the first CPU-timed pass: each
	 * of its writes is over the allowance. */
	for (int p = 0; p < 3 && !dropped; p++) {
		++pass;
		for (int i = 0; i < 1024 && !dropped; i++, writes++) {
			int cpu = budget_suspect(&b, t);
			dropped = budget_charge(&b, &cfg, 40 * US, cpu, t += 40 * US, pass);
		}
	}
	ck_assert(dropped);
	ck_assert_int_lt(writes, 1024 + 200);
}
END_TEST

START_TEST(test_slow_honest_write_each_pass_free)
{
	struct write_budget b = { 0 };
	struct write_budget_cfg cfg = CFG(2 * MS);
	uint64_t t = 1000 * MS;

	/* One wake-up a pass that a loaded virtual machine makes cost 20-210 us
	 * of CPU, for ever: never charged. */
	ck_assert_int_eq(budget_charge(&b, &cfg, 1 * MS, 0, t, ++pass), 0);
	for (int i = 0; i < 100000; i++)
		ck_assert_int_eq(budget_charge(&b, &cfg, (20 + (uint64_t)(i % 20) * 10) * US, 1,
						t += 50 * US, ++pass),
				 0);
	ck_assert_uint_eq(b.level_ns, 0);
}
END_TEST

START_TEST(test_cheap_burst_free)
{
	struct write_budget b = { 0 };
	struct write_budget_cfg cfg = CFG(2 * MS);
	uint64_t t = 1000 * MS;

	/* 4096 slots done at once, 2 us a write, again and again. */
	for (int p = 0; p < 100; p++) {
		++pass;
		for (int i = 0; i < 4096; i++) {
			int cpu = budget_suspect(&b, t);
			ck_assert_int_eq(budget_charge(&b, &cfg, 2 * US, cpu, t += 2 * US, pass), 0);
		}
	}
	ck_assert_uint_eq(b.level_ns, 0);
	ck_assert(!budget_suspect(&b, t));
}
END_TEST

int main(void)
{
	const TTest *const tests[] = { test_cheap_writes_are_free,
				       test_preempted_write_not_charged,
				       test_costly_writes_dropped, test_sporadic_costly_writes_free,
				       test_huge_writes_dropped_on_the_streak, test_costly_round_dropped,
				       test_costly_between_cheap_dropped,
				       test_two_slow_honest_writes_free,
				       test_suspect_pass_confirmed,
				       test_drains_at_a_tenth, test_many_small_writes_summed,
				       test_slow_honest_write_each_pass_free, test_cheap_burst_free,
				       NULL };
	return unit_run("budget", tests);
}
