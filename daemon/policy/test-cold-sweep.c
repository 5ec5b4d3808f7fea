/* SPDX-License-Identifier: MIT */
/*
 * Which pending slots a pass reads (daemon/policy/cold-sweep.c): a sweep reads
 * every cold slot once a period, in slices no pass exceeds, waking the
 * scanner only for slices worth a pass; hot slots go cold when awaited long,
 * predicted far ahead, or past their user's hot share.
 */
#undef NDEBUG
#include <check.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "policy/cold-sweep.h"
#include "unit-run.h"

#define US 1000ull
#define MS 1000000ull

/*
 * Drive a sweep of n slots with passes every step_ns (and, step_ns 0, only
 * at the times the plan asks), for two periods from t0; note when each slot
 * was read, the longest gap between two reads of one slot (from t0 for the
 * first), the largest slice and how many passes read nothing.
 */
struct run {
	uint64_t max_gap, max_slice, passes, empty;
};

static struct run drive(uint64_t n, uint64_t step_ns, uint64_t span_ns)
{
	struct cold_sweep sw = { 0 };
	uint64_t t0 = 1000 * MS, t = t0;
	uint64_t *last = calloc(n, sizeof(*last));
	struct run r = { 0 };

	ck_assert_ptr_nonnull(last);
	for (uint64_t i = 0; i < n; i++)
		last[i] = t0;
	cold_plan(&sw, 0, t0); /* the set was empty until now */
	while (t < t0 + span_ns) {
		struct cold_slice sl = cold_plan(&sw, n, t);

		r.passes++;
		r.empty += !sl.count;
		if (sl.count > r.max_slice)
			r.max_slice = sl.count;
		ck_assert_uint_le(sl.from + sl.count, n);
		for (uint64_t i = sl.from; i < sl.from + sl.count; i++) {
			if (t - last[i] > r.max_gap)
				r.max_gap = t - last[i];
			last[i] = t;
		}
		ck_assert_uint_ge(sl.next_ns, t);
		t = step_ns ? t + step_ns : (sl.next_ns > t ? sl.next_ns : t + 1);
	}
	for (uint64_t i = 0; i < n; i++)
		if (t - last[i] > r.max_gap)
			r.max_gap = t - last[i];
	free(last);
	return r;
}

START_TEST(test_every_slot_read_once_a_period)
{
	/* 200 000 cold slots, a scanner that passes every 20 us. */
	struct run r = drive(200000, 20 * US, 10 * COLD_SWEEP_NS);

	ck_assert_uint_le(r.max_gap, COLD_SWEEP_NS + 2 * 20 * US + COLD_SLICE_MIN * 20 * US);
	ck_assert_uint_le(r.max_slice, COLD_SLICE_MAX);
}
END_TEST

START_TEST(test_a_sleeping_scanner_wakes_for_slices_worth_it)
{
	/* The scanner passes only when the plan asks: every wake reads a
	 * slice of at least COLD_SLICE_MIN, every slot within a period. */
	struct run r = drive(200000, 0, 10 * COLD_SWEEP_NS);

	ck_assert_uint_le(r.max_gap, COLD_SWEEP_NS + 10 * US);
	ck_assert_uint_le(r.max_slice, COLD_SLICE_MAX);
	/* Passes that read nothing: the ones at the end of each sweep that
	 * wait for the next period. */
	ck_assert_uint_le(r.empty, 12);
	/* A large set in a few large slices, not a wake-up every few us. */
	ck_assert_uint_le(r.passes, 10 * (200000 / COLD_SLICE_MAX + 3));
	r = drive(20000, 0, 10 * COLD_SWEEP_NS);
	ck_assert_uint_le(r.passes, 10 * (COLD_SWEEP_NS / COLD_SLICE_GAP_NS + 2));
}
END_TEST

START_TEST(test_few_slots_are_read_together_once_a_period)
{
	struct run r = drive(10, 0, 10 * COLD_SWEEP_NS);

	ck_assert_uint_le(r.max_gap, COLD_SWEEP_NS + 1 * US);
	ck_assert_uint_eq(r.max_slice, 10);
	ck_assert_uint_le(r.passes, 2 * 11);
}
END_TEST

START_TEST(test_an_early_wake_waits_for_the_slice)
{
	struct cold_sweep sw = { 0 };
	uint64_t t = 1000 * MS;
	struct cold_slice sl;

	/* 64 cold slots: one slice at the end of the period. A scanner woken
	 * early (an arm, a timer that ends long waits early) reads nothing
	 * and is not asked to pass again at once. */
	cold_plan(&sw, 0, t);
	for (uint64_t early = COLD_SWEEP_NS - 1; early > 0; early /= 2) {
		sl = cold_plan(&sw, 64, t + COLD_SWEEP_NS - early);
		ck_assert_uint_eq(sl.count, 0);
		ck_assert_uint_eq(sl.next_ns, t + COLD_SWEEP_NS);
	}
	sl = cold_plan(&sw, 64, t + COLD_SWEEP_NS);
	ck_assert_uint_eq(sl.count, 64);
}
END_TEST

START_TEST(test_a_late_pass_catches_up_in_bounded_slices)
{
	struct cold_sweep sw = { 0 };
	uint64_t t = 1000 * MS, n = 1000000, read = 0;
	struct cold_slice sl;

	cold_plan(&sw, 0, t); /* the set was empty until now */
	/* The scanner was away for a whole period: the sweep is all due,
	 * read in slices of at most COLD_SLICE_MAX, each asking for the
	 * next at once. */
	t += COLD_SWEEP_NS;
	do {
		sl = cold_plan(&sw, n, t);
		ck_assert_uint_le(sl.count, COLD_SLICE_MAX);
		ck_assert_uint_eq(sl.from, read);
		read += sl.count;
		if (read < n)
			ck_assert_uint_eq(sl.next_ns, t);
		t += 5 * US;
	} while (read < n);
	/* Done, late: the next sweep starts at once. */
	ck_assert_uint_eq(sl.next_ns, t - 5 * US);
	sl = cold_plan(&sw, n, t);
	ck_assert_uint_eq(sl.from, 0);
}
END_TEST

START_TEST(test_a_shrinking_set_ends_the_sweep)
{
	struct cold_sweep sw = { 0 };
	uint64_t t = 1000 * MS;
	struct cold_slice sl;

	cold_plan(&sw, 0, t);
	sl = cold_plan(&sw, 100000, t + COLD_SWEEP_NS / 2);
	ck_assert_uint_eq(sl.from, 0);
	ck_assert_uint_ge(sw.pos, COLD_SLICE_MAX);
	/* Slots made hot since: fewer than were read. A new sweep starts
	 * once the period is over, from the first slot. */
	sl = cold_plan(&sw, 100, t + COLD_SWEEP_NS / 2 + 1 * US);
	ck_assert_uint_eq(sl.count, 0);
	ck_assert_uint_eq(sl.next_ns, t + COLD_SWEEP_NS);
	sl = cold_plan(&sw, 100, t + COLD_SWEEP_NS);
	ck_assert_uint_eq(sl.from, 0);
	/* Its period starts now: nothing due yet but a slice's worth soon. */
	ck_assert_uint_le(sl.next_ns, t + 2 * COLD_SWEEP_NS);
}
END_TEST

START_TEST(test_a_growing_set_ends_its_sweep)
{
	struct cold_sweep sw = { 0 };
	uint64_t t = 1000 * MS, n = 5000, sweeps = 0, end = 0, start = 0;
	struct cold_slice sl;

	/* Slots go cold every pass (20 us apart, 25 a pass: a user's slots
	 * churning through the cold set). A sweep's part is fixed from its
	 * first slice: the slots that go cold meanwhile are the next sweep's,
	 * so that each sweep ends within its period and nobody's slot waits
	 * more than two. */
	cold_plan(&sw, 0, t);
	for (uint64_t k = 0; k < 20 * COLD_SWEEP_NS / (20 * US); k++, t += 20 * US, n += 25) {
		sl = cold_plan(&sw, n, t);
		ck_assert_uint_le(sl.from + sl.count, sw.end);
		ck_assert_uint_le(sw.end, n);
		if (sw.start_ns != start) {
			start = sw.start_ns;
			sweeps++;
			end = 0;
		}
		if (sw.pos) {
			if (end)
				ck_assert_uint_eq(sw.end, end);
			end = sw.end;
		}
		if (sw.pos < sw.end)
			ck_assert_uint_le(t - sw.start_ns, COLD_SWEEP_NS + 2 * 20 * US);
	}
	ck_assert_uint_ge(sweeps, 8);
	ck_assert_uint_gt(end, 5000);
}
END_TEST

START_TEST(test_moved_slots_a_pass_are_bounded)
{
	uint64_t at = 0;
	uint32_t n = 0, woken = 0;

	/* Another user waits: one user's moved slots, COLD_MOVED_PER_PASS a
	 * pass, the rest left for later sweeps; the count starts again with
	 * the next pass. */
	for (int i = 0; i < 10000; i++)
		woken += (uint32_t)cold_moved_may_wake(&at, &n, 7, 2);
	ck_assert_uint_eq(woken, COLD_MOVED_PER_PASS);
	ck_assert_int_eq(cold_moved_may_wake(&at, &n, 8, 2), 1);
	/* Alone, it slows nobody: every one. */
	woken = 0;
	for (int i = 0; i < 10000; i++)
		woken += (uint32_t)cold_moved_may_wake(&at, &n, 9, 1);
	ck_assert_uint_eq(woken, 10000);
}
END_TEST

START_TEST(test_which_slots_go_cold)
{
	uint64_t now = 1000 * MS;

	/* Young, nothing learned: hot. */
	ck_assert_int_eq(cold_should_go(now, now - 100 * US, 0, 0, 1, 2), COLD_STAY_HOT);
	/* Awaited long, nothing learned, or overdue: cold. */
	ck_assert_int_eq(cold_should_go(now, now - COLD_AFTER_NS, 0, 0, 1, 2), COLD_AGED);
	ck_assert_int_eq(cold_should_go(now, now - 50 * MS, now - 40 * MS, 1 * MS, 1, 2), COLD_AGED);
	/* Awaited long but due within COLD_AFTER_NS: the predictor looks. */
	ck_assert_int_eq(cold_should_go(now, now - 50 * MS, now + 1 * MS, 0, 1, 2), COLD_STAY_HOT);
	/* Late by less than its spread: still hot, the predictor spins
	 * across that window; late by more, cold. */
	ck_assert_int_eq(cold_should_go(now, now - 50 * MS, now - 100 * US, 200 * US, 1, 2),
			 COLD_STAY_HOT);
	ck_assert_int_eq(cold_should_go(now, now - 50 * MS, now - 300 * US, 200 * US, 1, 2),
			 COLD_AGED);
	/* Young but predicted far ahead (a training step): cold at once,
	 * hot again two sweeps before it is due. */
	ck_assert_int_eq(cold_should_go(now, now - 10 * US, now + 100 * MS, 0, 1, 2), COLD_AHEAD);
	ck_assert_uint_eq(cold_wake_at(COLD_AHEAD, now + 100 * MS),
			  now + 100 * MS - 2 * COLD_SWEEP_NS);
	ck_assert_uint_eq(cold_wake_at(COLD_AGED, 0), UINT64_MAX);
	/* Past its user's hot share: cold however young, hot again once the
	 * user has room. */
	ck_assert_int_eq(cold_should_go(now, now, 0, 0, COLD_HOT_PER_USER, 2), COLD_STAY_HOT);
	ck_assert_int_eq(cold_should_go(now, now, 0, 0, COLD_HOT_PER_USER + 1, 2), COLD_CROWDED);
	ck_assert_uint_eq(cold_wake_at(COLD_CROWDED, 0), 0);
	/* A user alone slows nobody: all its slots may be hot. */
	ck_assert_int_eq(cold_should_go(now, now, 0, 0, 100 * COLD_HOT_PER_USER, 1), COLD_STAY_HOT);
}
END_TEST

START_TEST(test_notice_delay_is_a_fraction_of_the_age)
{
	/* A slot cold by its age has been awaited COLD_AFTER_NS at least and
	 * is read within two sweep periods (one where it went cold before the
	 * sweep began): at most half of its age. */
	ck_assert_uint_le(2 * COLD_SWEEP_NS * 2, COLD_AFTER_NS);
}
END_TEST

int main(void)
{
	const TTest *const tests[] = { test_every_slot_read_once_a_period,
				       test_a_sleeping_scanner_wakes_for_slices_worth_it,
				       test_few_slots_are_read_together_once_a_period,
				       test_an_early_wake_waits_for_the_slice,
				       test_a_late_pass_catches_up_in_bounded_slices,
				       test_a_shrinking_set_ends_the_sweep,
				       test_a_growing_set_ends_its_sweep,
				       test_moved_slots_a_pass_are_bounded,
				       test_which_slots_go_cold,
				       test_notice_delay_is_a_fraction_of_the_age,
				       NULL };
	return unit_run("cold-sweep", tests);
}
