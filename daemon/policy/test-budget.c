/* SPDX-License-Identifier: MIT */
/* When one user's eventfd writes are an attack (daemon/policy/budget.c). */
#undef NDEBUG
#include <check.h>
#include <stdint.h>
#include <stdlib.h>

#include "policy/budget.h"
#include "unit-run.h"

#define US 1000ull
#define MS 1000000ull

/* The daemon's allowance, unscaled (a sanitizer build scales it). */
#define ALLOW (250 * US)
#define CFG(cap)                                                                           \
	((struct write_budget_cfg){ .cap_ns = (cap), .allowance_ns = ALLOW,                  \
				    .suspect_for_ns = 1000 * MS })

/* One write as the write police makes it: timed on the CPU clock when its
 * user is a suspect (cpu_ns), else on the wall clock (wall_ns), at *t, which
 * then moves on by the wall time. */
static int write_at(struct write_budget *b, const struct write_budget_cfg *cfg, uint64_t *t,
		    uint64_t wall_ns, uint64_t cpu_ns)
{
	int cpu = budget_suspect(b, *t);

	*t += wall_ns;
	return budget_charge(b, cfg, cpu ? cpu_ns : wall_ns, cpu, *t);
}

/* Writes of cost_ns each (wall and CPU), one after the other: how many
 * went by before the one that dropped the user (fewer than ten). */
static int writes_before_drop(struct write_budget *b, const struct write_budget_cfg *cfg,
			      uint64_t *t, uint64_t cost_ns)
{
	int writes = 0;

	while (!write_at(b, cfg, t, cost_ns, cost_ns))
		ck_assert_int_lt(++writes, 10);
	return writes;
}

START_TEST(test_cheap_writes_are_free)
{
	struct write_budget b = { 0 };
	struct write_budget_cfg cfg = CFG(2 * MS);
	uint64_t t = 1000 * MS;

	/* 200 000 writes at the allowance: never charged, never a suspect. */
	for (int i = 0; i < 200000; i++)
		ck_assert_int_eq(write_at(&b, &cfg, &t, ALLOW, ALLOW), 0);
	ck_assert_uint_eq(b.level_ns, 0);
	ck_assert(!budget_suspect(&b, t));
}
END_TEST

START_TEST(test_costly_wakeups_are_free)
{
	struct write_budget b = { 0 };
	struct write_budget_cfg cfg = CFG(2 * MS);
	uint64_t t = 1000 * MS;

	/* Each write wakes a thread on the other CPU of a virtual machine:
	 * 15-25 us of the writer's CPU, a hundred or more now and then, a
	 * thousand writes a pass, for 6 s (a suspect all along: the wall
	 * clock saw a preempted write now and then). */
	ck_assert_int_eq(budget_charge(&b, &cfg, 3 * MS, 0, t), 0);
	ck_assert(budget_suspect(&b, t + 1));
	for (int i = 0; i < 300000; i++) {
		uint64_t c = i % 97 == 0 ? 120 * US : (15 + (uint64_t)(i % 11)) * US;
		uint64_t wall = i % 5003 == 0 ? 4 * MS : c;
		ck_assert_int_eq(write_at(&b, &cfg, &t, wall, c), 0);
	}
	ck_assert_uint_eq(b.level_ns, 0);
}
END_TEST

START_TEST(test_preempted_write_not_charged)
{
	struct write_budget b = { 0 };
	struct write_budget_cfg cfg = CFG(2 * MS);
	uint64_t t = 1000 * MS;

	/* 40 ms on the wall clock: preempted, or slow. Only a suspect. */
	ck_assert_int_eq(budget_charge(&b, &cfg, 40 * MS, 0, t), 0);
	ck_assert_uint_eq(b.level_ns, 0);
	ck_assert(budget_suspect(&b, t + 1));
	/* The CPU clock then says the writes are cheap: nothing charged,
	 * however slow the wall clock finds them. */
	for (int i = 0; i < 1000; i++)
		ck_assert_int_eq(write_at(&b, &cfg, &t, 3 * MS, 5 * US), 0);
	ck_assert_uint_eq(b.level_ns, 0);
	/* And a second after the last slow one it is no suspect any more. */
	ck_assert(budget_suspect(&b, t));
	ck_assert(!budget_suspect(&b, t + 1001 * MS));
}
END_TEST

START_TEST(test_costly_writes_dropped)
{
	struct write_budget b = { 0 };
	struct write_budget_cfg cfg = CFG(2 * MS);
	uint64_t t = 1000 * MS;

	/* One eventfd in 18 000 epolls: 1.3 ms every write, one after the
	 * other (the fair share gives the user a write every few passes).
	 * The first, on the wall clock, makes the suspect; three on the CPU
	 * clock drop it. */
	ck_assert_int_eq(writes_before_drop(&b, &cfg, &t, 1300 * US), 3);
	ck_assert_uint_eq(b.held, 3);
	ck_assert_uint_eq(b.streak, 3);
	ck_assert_uint_eq(budget_costly_lately(&b, t), 3);
	ck_assert_uint_eq(b.last_costly_ns, 1300 * US);
}
END_TEST

START_TEST(test_dropped_again_at_once)
{
	struct write_budget b = { 0 };
	struct write_budget_cfg cfg = CFG(2 * MS);
	uint64_t t = 1000 * MS;

	ck_assert_int_eq(writes_before_drop(&b, &cfg, &t, 1300 * US), 3);
	/* Reconnected with the same watchers, 5 s later (its level long
	 * empty): a suspect still, its cheap writes pass, the first costly
	 * one drops. */
	t += 5000 * MS;
	ck_assert(budget_suspect(&b, t));
	ck_assert_int_eq(write_at(&b, &cfg, &t, 20 * US, 20 * US), 0);
	ck_assert_uint_eq(b.level_ns, 0);
	ck_assert_int_eq(write_at(&b, &cfg, &t, 1300 * US, 1300 * US), 1);
	/* 10 s on, it takes three again. */
	t += 11000 * MS;
	ck_assert_int_eq(writes_before_drop(&b, &cfg, &t, 1300 * US), 3);
}
END_TEST

START_TEST(test_huge_writes_dropped)
{
	struct write_budget b = { 0 };
	struct write_budget_cfg cfg = CFG(2 * MS);
	uint64_t t = 1000 * MS;

	/* Writes of 50 ms each, 100 ms apart: no two within the log's 50 ms,
	 * but the level never empties between them. The first is a suspect,
	 * one more is no proof, the third drops. */
	ck_assert_int_eq(write_at(&b, &cfg, &t, 50 * MS, 50 * MS), 0);
	t += 50 * MS;
	ck_assert_int_eq(write_at(&b, &cfg, &t, 50 * MS, 50 * MS), 0);
	t += 50 * MS;
	ck_assert_int_eq(write_at(&b, &cfg, &t, 50 * MS, 50 * MS), 0);
	t += 50 * MS;
	ck_assert_int_eq(write_at(&b, &cfg, &t, 50 * MS, 50 * MS), 1);
}
END_TEST

START_TEST(test_slow_honest_writes_free)
{
	struct write_budget b = { 0 };
	struct write_budget_cfg cfg = CFG(2 * MS);
	uint64_t t = 1000 * MS;

	/* A loaded virtual machine: a write of 3 ms on the wall clock, then
	 * one of 2.3 ms of the thread's CPU (interrupts taken inside it) and
	 * another of 1 ms; then wake-ups. Again a second later, a hundred
	 * times: costly writes that far apart are no attack. */
	for (int i = 0; i < 100; i++) {
		ck_assert_int_eq(write_at(&b, &cfg, &t, 3 * MS, 3 * MS), 0);
		ck_assert_int_eq(write_at(&b, &cfg, &t, 2300 * US, 2300 * US), 0);
		ck_assert_int_eq(write_at(&b, &cfg, &t, 1 * MS, 1 * MS), 0);
		for (int k = 0; k < 1000; k++)
			ck_assert_int_eq(write_at(&b, &cfg, &t, 30 * US, 20 * US), 0);
		t += 1000 * MS;
	}
}
END_TEST

START_TEST(test_costly_between_cheap_dropped)
{
	struct write_budget b = { 0 };
	struct write_budget_cfg cfg = CFG(2 * MS);
	uint64_t t = 1000 * MS;
	int costly = 0;

	/* One slot bound to an eventfd in 18 000 epolls, another with a cheap
	 * one, completed in turn 3 ms apart: the cheap writes end each streak,
	 * the level holds the costly ones all the same. */
	while (!write_at(&b, &cfg, &t, 1300 * US, 1300 * US)) {
		ck_assert_int_lt(++costly, 20);
		t += 3 * MS;
		ck_assert_int_eq(write_at(&b, &cfg, &t, 2 * US, 2 * US), 0);
		ck_assert_uint_eq(b.streak, 0);
		t += 3 * MS;
	}
	ck_assert_int_ge(costly, 3);
	ck_assert_int_le(costly, 8);
}
END_TEST

/* The verdict as the scanner gives it (scanner/drain.c efd_write): the user's
 * budget, then the client's own count. Whether the client is dropped. */
static int over_budget; /* the user's budget alone would have dropped it */

static int client_write(struct write_budget *b, struct write_tally *own,
			const struct write_budget_cfg *cfg, uint64_t *t, uint64_t wall_ns,
			uint64_t cpu_ns)
{
	int cpu = budget_suspect(b, *t);
	int over = write_at(b, cfg, t, wall_ns, cpu_ns);

	over_budget |= over;
	budget_tally(own, cpu ? cpu_ns : (wall_ns < ALLOW ? wall_ns : ALLOW), ALLOW);
	return over && budget_own_costly(own, b->repeat);
}

START_TEST(test_descheduled_scanner_drops_nobody)
{
	struct write_budget b = { 0 };
	struct write_tally own = { 0 };
	struct write_budget_cfg cfg = CFG(2 * MS);
	uint64_t t = 1000 * MS;

	over_budget = 0;
	/* An honest poll() client, a completion every 200 us, on a virtual
	 * machine whose host accounts no steal time: now and then the
	 * scanner's virtual CPU is away in a write, 5-8 ms of it counted as
	 * the write's CPU time, three times within 40 ms. Its user's level
	 * runs over the budget, but by its own count its writes are cheap:
	 * never dropped, and its next connection neither. */
	for (int i = 0; i < 100000; i++) {
		int away = i % 2000 == 0 || i % 2000 == 100 || i % 2000 == 200;
		uint64_t c = away ? (5 + (uint64_t)i % 4) * MS : 3 * US;
		ck_assert_int_eq(client_write(&b, &own, &cfg, &t, c, c), 0);
		t += 200 * US;
		if (i == 50000)
			own = (struct write_tally){ 0 }; /* it connects again */
	}
	ck_assert_int_eq(over_budget, 1);
	ck_assert_uint_gt(own.costly, 0);
}
END_TEST

START_TEST(test_costly_client_dropped_by_its_count)
{
	struct write_budget b = { 0 };
	struct write_tally own = { 0 }, again = { 0 };
	struct write_budget_cfg cfg = CFG(2 * MS);
	uint64_t t = 1000 * MS;
	int writes = 0;

	/* An eventfd in 18 000 epolls: every write of the client's is costly
	 * by its own count, and it is dropped at its third... */
	while (!client_write(&b, &own, &cfg, &t, 1300 * US, 1300 * US))
		ck_assert_int_lt(++writes, 10);
	ck_assert_uint_ge(own.costly, WRITE_BUDGET_STREAK);
	/* ... and its next connection with the same watchers at its first. */
	t += 10 * MS;
	ck_assert_int_eq(client_write(&b, &again, &cfg, &t, 1300 * US, 1300 * US), 1);
	/* A client mixing cheap writes in (one costly in eight) still is. */
	struct write_budget b2 = { 0 };
	struct write_tally mixed = { 0 };
	int dropped = 0;
	for (int i = 0; i < 400 && !dropped; i++) {
		dropped = client_write(&b2, &mixed, &cfg, &t, i % 8 ? 2 * US : 1300 * US,
				       i % 8 ? 2 * US : 1300 * US);
		t += 100 * US;
	}
	ck_assert_int_eq(dropped, 1);
}
END_TEST

START_TEST(test_drains_at_a_tenth)
{
	struct write_budget b = { 0 };
	struct write_budget_cfg cfg = CFG(2 * MS);
	uint64_t t = 1000 * MS;
	int i = 0;

	/* 100 us over the allowance every millisecond: drained as fast as it
	 * comes (a tenth of real time). */
	for (; i < 10000; i++) {
		ck_assert_int_eq(write_at(&b, &cfg, &t, ALLOW + 100 * US, ALLOW + 100 * US), 0);
		t += 1 * MS - ALLOW - 100 * US;
	}
	ck_assert_uint_le(b.level_ns, 100 * US);
	/* Every half millisecond: it runs up, and the user is dropped. */
	for (i = 0; !write_at(&b, &cfg, &t, ALLOW + 100 * US, ALLOW + 100 * US); i++) {
		ck_assert_int_lt(i, 1000);
		t += 500 * US - ALLOW - 100 * US;
	}
	ck_assert_int_gt(i, 10);
}
END_TEST

START_TEST(test_low_budget)
{
	struct write_budget a = { 0 }, v = { 0 };
	struct write_budget_cfg cfg = CFG(100 * US);
	uint64_t t = 1000 * MS;

	/* --write-budget-us 100: 18 000 watchers on a machine where they cost
	 * a write 500 us are dropped at the third costly write ... */
	ck_assert_int_eq(writes_before_drop(&a, &cfg, &t, 500 * US), 3);
	/* ... while wake-ups, however costly, never are. */
	ck_assert_int_eq(budget_charge(&v, &cfg, 3 * MS, 0, t), 0);
	for (int i = 0; i < 100000; i++)
		ck_assert_int_eq(write_at(&v, &cfg, &t, 200 * US, i % 3 ? 20 * US : ALLOW), 0);
	ck_assert_uint_eq(v.level_ns, 0);
}
END_TEST

int main(void)
{
	const TTest *const tests[] = { test_cheap_writes_are_free,
				       test_costly_wakeups_are_free,
				       test_preempted_write_not_charged,
				       test_costly_writes_dropped,
				       test_dropped_again_at_once,
				       test_huge_writes_dropped,
				       test_slow_honest_writes_free,
				       test_costly_between_cheap_dropped,
				       test_drains_at_a_tenth,
				       test_descheduled_scanner_drops_nobody,
				       test_costly_client_dropped_by_its_count,
				       test_low_budget,
				       NULL };
	return unit_run("budget", tests);
}
