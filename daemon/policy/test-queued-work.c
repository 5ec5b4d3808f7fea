/* SPDX-License-Identifier: MIT */
/*
 * The idle policy on work queued on a device that runs one piece at a time
 * (daemon/policy/idle-policy.c, idle_note_pass_done): it waits for the
 * quickest interval between completions instead of spinning across each
 * slot's spread, bounds a spin on work that is due and has not landed, and
 * gives the interval up where completions land side by side or get quicker.
 */
#undef NDEBUG
#include <check.h>
#include <stdint.h>

#include "policy/idle-policy.h"
#include "unit-run.h"

#define US 1000ull
#define MS 1000000ull
#define LEAD (20 * US)

static const struct idle_cfg adaptive = { .mode = SCANNER_ADAPTIVE, .spin_ns = 50 * US,
					  .pending_spin_ns = 10 * MS, .pending_poll_ns = 250 * US,
					  .backstop_ns = 1 * MS };

/* One wait for the interval a completion: a backstop longer than it. */
static const struct idle_cfg long_backstop = { .mode = SCANNER_ADAPTIVE, .spin_ns = 50 * US,
					       .pending_spin_ns = 10 * MS,
					       .pending_poll_ns = 250 * US, .backstop_ns = 2 * MS };

/* A pass at now with work pending whose earliest slot says: look at at. */
static struct idle_decision pending_cfg(const struct idle_cfg *cfg, struct idle_state *st,
					uint64_t now, uint64_t at, uint64_t sweep_at)
{
	return idle_decide(cfg, st,
			   &(struct idle_view){ .now_ns = now, .npending = 8, .progress = 0,
						.look_at_ns = at, .lead_ns = LEAD,
						.sweep_at_ns = sweep_at });
}

static struct idle_decision pending(struct idle_state *st, uint64_t now, uint64_t at,
				    uint64_t sweep_at)
{
	return pending_cfg(&adaptive, st, now, at, sweep_at);
}

/* n completions, one every gap, each seen by a pass 1 us after the one
 * before it; per of them seen by the same pass. Returns the last pass. */
static uint64_t one_after_another(struct idle_state *st, uint64_t t, uint64_t gap, int n, int per)
{
	for (int i = 0; i < n; i++) {
		t += gap;
		idle_note_pass_done(st, t - 1 * US, t, (uint64_t)per);
	}
	return t;
}

START_TEST(test_queued_work_waits_for_the_interval)
{
	struct idle_state st = { 0 };
	uint64_t t = one_after_another(&st, 1000 * MS, 1400 * US, IDLE_GAP_LEARN - 1, 1);
	struct idle_decision d;

	/* Not yet known: the slot's own look (at once) is taken. */
	ck_assert_uint_eq(st.gap_low_ns, 0);
	ck_assert_int_eq(pending(&st, t + 10 * US, t + 10 * US, 0).action, IDLE_SPIN);
	t = one_after_another(&st, t, 1400 * US, 32, 1);
	ck_assert_uint_eq(st.gap_low_ns, 1400 * US);
	/* A slot that says "spin now" (its spread is the queue's): the next
	 * completion cannot come before the interval, so wait (no longer
	 * than the backstop), then a lead before it. */
	d = pending(&st, t + 10 * US, t + 10 * US, 0);
	ck_assert_int_ne(d.action, IDLE_SPIN);
	ck_assert_uint_eq(d.until_ns, t + 10 * US + 1 * MS);
	d = pending(&st, t + 1010 * US, t + 1010 * US, 0);
	ck_assert_int_ne(d.action, IDLE_SPIN);
	ck_assert_uint_eq(d.until_ns, t - 1 * US + 1400 * US - LEAD);
	/* From there the slot's look: spin. */
	ck_assert_int_eq(pending(&st, t + 1400 * US - LEAD, t, 0).action, IDLE_SPIN);
	/* A later look than the interval stays the slot's. */
	d = pending(&st, t + 10 * US, t + 1300 * US, 0);
	ck_assert_uint_eq(d.until_ns, t + 10 * US + 1 * MS);
	d = pending(&st, t + 1100 * US, t + 1500 * US, 0);
	ck_assert_uint_eq(d.until_ns, t + 1500 * US);
	/* No wait for the interval past the sweep's next slice. */
	d = pending(&st, t + 10 * US, t + 10 * US, t + 300 * US);
	ck_assert_int_ne(d.action, IDLE_SPIN);
	ck_assert_uint_eq(d.until_ns, t + 300 * US);
}
END_TEST

START_TEST(test_side_by_side_completions_bound_nothing)
{
	struct idle_state st = { 0 };
	/* Two a pass: they landed within the pass's 1 us of each other. */
	uint64_t t = one_after_another(&st, 1000 * MS, 1400 * US, 40, 2);

	ck_assert_uint_le(st.gap_low_ns, 1 * US);
	ck_assert_int_eq(pending(&st, t + 10 * US, t + 10 * US, 0).action, IDLE_SPIN);
}
END_TEST

START_TEST(test_a_stall_is_spun_then_stepped)
{
	struct idle_state st = { 0 };
	uint64_t t = one_after_another(&st, 1000 * MS, 1400 * US, 40, 1);
	uint64_t due = t + 1400 * US, now = due, wakes = 0, spun = 0;
	struct idle_decision d;

	/* Due and not landed for 3 ms: spun IDLE_STALL_SPIN_NS, then looked
	 * at in steps of a quarter of the stall, none longer than an eighth
	 * of the interval (each look a pass that made no progress). */
	while (now < due + 3 * MS) {
		d = pending(&st, now, now, 0);
		if (d.action == IDLE_SPIN) {
			now += 1 * US;
			spun += 1 * US;
			continue;
		}
		ck_assert_uint_le(d.until_ns - now, 1400 * US / IDLE_STALL_STEP_DIV);
		ck_assert_uint_le(d.until_ns - now, (now - due) / 4 + LEAD);
		now = d.until_ns;
		wakes++;
	}
	/* Spun IDLE_STALL_SPIN_NS and the steps shorter than a sleep is
	 * worth (a lead and IDLE_SLEEP_MIN_NS), not 3 ms. */
	ck_assert_uint_le(spun, 4 * (LEAD + IDLE_SLEEP_MIN_NS) + IDLE_STALL_SPIN_NS + 10 * US);
	ck_assert_uint_le(wakes, 3 * MS / (1400 * US / IDLE_STALL_STEP_DIV) + 12);
	/* Progress ends the stall: spun on again at first. */
	idle_decide(&adaptive, &st,
		    &(struct idle_view){ .now_ns = now, .npending = 8, .progress = 1,
					 .look_at_ns = now, .lead_ns = LEAD });
	ck_assert_int_eq(pending(&st, now + 1 * US, now + 1 * US, 0).action, IDLE_SPIN);
}
END_TEST

START_TEST(test_quicker_work_cuts_the_interval)
{
	struct idle_state st = { 0 };
	uint64_t t = one_after_another(&st, 1000 * MS, 1400 * US, 40, 1), before;
	struct idle_decision d;

	/* The work now takes 0.5 ms: each completion is found by the first
	 * look after a wait for the interval, which ended on time. */
	for (int i = 0; i < 40 && st.gap_low_ns > 600 * US; i++) {
		uint64_t now = t + 1 * US;
		before = st.gap_low_ns;
		d = pending(&st, now, now, 0);
		/* Spun (the interval ends too soon to wait): seen at once. */
		t = d.action == IDLE_SPIN ? now + 1 * US : d.until_ns;
		idle_note_pass_done(&st, now, t, 1);
		ck_assert_uint_le(st.gap_low_ns, before);
	}
	ck_assert_uint_le(st.gap_low_ns, 600 * US);
	/* A wake later than the lead is the timer's: no sign. Work every
	 * 1.4 ms as before, each wake 2 leads late, which finds it at once. */
	st = (struct idle_state){ 0 };
	t = one_after_another(&st, 1000 * MS, 1400 * US, 40, 1);
	{
		uint64_t land = t + 1400 * US, now = t + 1 * US;
		for (int i = 0; i < 10;) {
			d = pending_cfg(&long_backstop, &st, now, now, 0);
			uint64_t woke = d.action == IDLE_SPIN ? land : d.until_ns + 2 * LEAD;
			int found = woke >= land;
			idle_note_pass_done(&st, d.action == IDLE_SPIN ? woke - 1 * US : now, woke,
					    (uint64_t)found);
			now = woke + 1 * US;
			if (found) {
				land += 1400 * US;
				i++;
			}
		}
		ck_assert_uint_ge(st.gap_low_ns, 1300 * US);
	}
}
END_TEST

int main(void)
{
	const TTest *const tests[] = { test_queued_work_waits_for_the_interval,
				       test_side_by_side_completions_bound_nothing,
				       test_a_stall_is_spun_then_stepped,
				       test_quicker_work_cuts_the_interval, NULL };
	return unit_run("queued-work", tests);
}
