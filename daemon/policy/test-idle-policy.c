/* SPDX-License-Identifier: MIT */
/*
 * The scanner's idle policy and its predictor (daemon/policy/idle-policy.c,
 * daemon/policy/predictor.c), and each user's share of a pass (daemon/policy/fair-share.h):
 * given arm times, past completion times and the timer's lateness, when the
 * scanner wakes, spins and parks.
 */
#undef NDEBUG
#include <check.h>
#include <math.h>
#include <stdio.h>
#include <stdint.h>
#include <stdlib.h>

#include "policy/fair-share.h"
#include "policy/idle-policy.h"
#include "policy/predictor.h"
#include "unit-run.h"

#define US 1000ull
#define MS 1000000ull

static const struct idle_cfg adaptive = { .mode = SCANNER_ADAPTIVE, .spin_ns = 50 * US,
					  .pending_spin_ns = 10 * MS, .pending_poll_ns = 250 * US,
					  .backstop_ns = 1 * MS };
static const struct idle_cfg spin = { .mode = SCANNER_SPIN, .spin_ns = 50 * US,
				      .pending_spin_ns = 10 * MS, .pending_poll_ns = 250 * US,
				      .backstop_ns = 1 * MS };
#define LEAD (3 * US)
/* What the scanner tells the policy after a pass (struct idle_view). */
#define VIEW(now, n, moved, at, late)                                                  \
	(&(struct idle_view){ .now_ns = (now), .npending = (n), .progress = (moved),      \
			      .look_at_ns = (at), .lead_ns = (late) })

/* A slot that completed n times, each d after its arm, seen exactly. */
static struct slot_timing learned(uint64_t d, int n, uint64_t *t)
{
	struct slot_timing s = { 0 };

	for (int i = 0; i < n; i++) {
		predict_armed(&s, *t);
		*t += d;
		predict_completed(&s, *t - 1 * US, *t, PREDICT_SEEN_AWAKE);
		*t += 1 * MS;
	}
	return s;
}

/* Arm s at *t and see it complete d later, as seen says; then 1 ms on. */
static void complete_after(struct slot_timing *s, uint64_t *t, uint64_t d, enum predict_seen seen)
{
	predict_armed(s, *t);
	predict_completed(s, *t + d, *t + d, seen);
	*t += 1 * MS;
}

START_TEST(test_regular_work_sleeps_until_a_lead_before)
{
	uint64_t t = 1000 * MS;
	struct slot_timing s = learned(500 * US, 20, &t);
	struct timer_lateness l = { 0 };
	struct idle_state st = { 0 };
	uint64_t lead, at;
	struct idle_decision d;

	/* The timer woke 2 us late, always (the H200 host). */
	for (int i = 0; i < 50; i++)
		predict_lateness(&l, t, t + 2 * US);
	lead = predict_lead_ns(&l);
	ck_assert_uint_ge(lead, 2 * US);
	ck_assert_uint_le(lead, 4 * US);
	ck_assert_uint_lt(s.dev_ns, 20 * US);
	/* Armed now: looked at again a lead before the early side of the
	 * window, PREDICT_DUE_DEVS spreads before 500 us (at most the
	 * backstop away). */
	predict_armed(&s, t);
	at = predict_look_at(&s, t, lead, 1 * MS);
	ck_assert_uint_eq(at, t + s.lat_ns - PREDICT_DUE_DEVS * s.dev_ns - lead);
	ck_assert_uint_ge(at, t + 400 * US);
	/* No completion seen yet: any arm could be due at once, so the
	 * wait is a sleep an arm ends. */
	d = idle_decide(&adaptive, &st, VIEW(t, 1, 0, at, lead));
	ck_assert_int_eq(d.action, IDLE_SLEEP);
	ck_assert_uint_eq(d.until_ns, at);
	/* Completions take 500 us: no arm made now can be due before it, so
	 * it is a nap (no client has to wake the scanner). */
	idle_note_done(&st, 500 * US);
	d = idle_decide(&adaptive, &st, VIEW(t, 1, 0, at, lead));
	ck_assert_int_eq(d.action, IDLE_NAP);
	ck_assert_uint_eq(d.until_ns, at);
	/* Close to due: spin. */
	at = predict_look_at(&s, t + 499 * US, lead, 1 * MS);
	ck_assert_uint_eq(at, t + 499 * US);
	d = idle_decide(&adaptive, &st, VIEW(t + 499 * US, 1, 0, at, lead));
	ck_assert_int_eq(d.action, IDLE_SPIN);
}
END_TEST

START_TEST(test_late_timer_wakes_earlier)
{
	uint64_t t = 1000 * MS;
	struct slot_timing s = learned(500 * US, 20, &t);
	struct timer_lateness fast = { 0 }, slow = { 0 };

	for (int i = 0; i < 50; i++) {
		predict_lateness(&fast, t, t + 2 * US);
		/* This VM: 15-50 us late. */
		predict_lateness(&slow, t, t + (i % 2 ? 15 : 50) * US);
	}
	ck_assert_uint_gt(predict_lead_ns(&slow), 50 * US);
	ck_assert_uint_le(predict_lead_ns(&slow), PREDICT_LEAD_MAX_NS);
	predict_armed(&s, t);
	ck_assert_uint_lt(predict_look_at(&s, t + 300 * US, predict_lead_ns(&slow), 250 * US),
			  predict_look_at(&s, t + 300 * US, predict_lead_ns(&fast), 250 * US));
	/* A wake a second late is the machine, not the timer. */
	predict_lateness(&slow, t, t + 1000 * MS);
	ck_assert_uint_le(predict_lead_ns(&slow), PREDICT_LEAD_MAX_NS);
}
END_TEST

START_TEST(test_overdue_backs_off_to_the_backstop)
{
	uint64_t t = 1000 * MS, now, prev = 0;
	struct slot_timing s = learned(100 * US, 20, &t);
	uint64_t lead = 5 * US;

	predict_armed(&s, t);
	/* Just due: spin across the window. */
	ck_assert_uint_eq(predict_look_at(&s, t + 100 * US, lead, 250 * US), t + 100 * US);
	/* Overdue: steps a quarter of how overdue, growing, never past 250 us. */
	for (now = t + 200 * US; now < t + 100 * MS; now += 1 * MS) {
		uint64_t step = predict_look_at(&s, now, lead, 250 * US) - now;
		ck_assert_uint_ge(step, lead);
		ck_assert_uint_le(step, 250 * US);
		ck_assert_uint_ge(step, prev);
		prev = step;
	}
	ck_assert_uint_eq(prev, 250 * US);
}
END_TEST

START_TEST(test_late_seen_completion_shrinks_the_guess)
{
	uint64_t t = 1000 * MS;
	struct slot_timing s = learned(500 * US, 20, &t);
	uint64_t lat = s.lat_ns;

	/* Seen at the first look after a sleep planned to end at 480 us that
	 * its timer ended at 520 us: it most likely landed meanwhile, and
	 * 480 us is learned. */
	predict_armed(&s, t);
	ck_assert_uint_eq(predict_completed(&s, t + 480 * US, t + 520 * US, PREDICT_SEEN_ASLEEP),
			  480 * US);
	ck_assert_uint_lt(s.lat_ns, lat);
	ck_assert_uint_eq(s.since_ns, t + 520 * US);
	/* Seen while spinning: exactly. */
	predict_armed(&s, t + 1 * MS);
	ck_assert_uint_eq(predict_completed(&s, t + 1 * MS + 500 * US, t + 1 * MS + 500 * US,
					    PREDICT_SEEN_AWAKE),
			  500 * US);
}
END_TEST

START_TEST(test_late_wake_is_the_timers_error)
{
	uint64_t t = 1000 * MS, lead = 10 * US;
	struct slot_timing s = learned(500 * US, 20, &t);
	uint64_t lat = s.lat_ns, dev = s.dev_ns, dev_late = s.dev_late_ns;

	/* Within the lead of its deadline: the deadline, as before. */
	predict_armed(&s, t);
	ck_assert_uint_eq(predict_learn_at(&s, t + 480 * US, t + 485 * US, lead), t + 480 * US);
	/* No timed wait: the pass. */
	ck_assert_uint_eq(predict_learn_at(&s, 0, t + 485 * US, lead), t + 485 * US);
	/* A wake 80 us late, the flag landed between 420 and 500 us, and the
	 * slot's due time lies in between: nothing against the mean, which
	 * and whose spreads stay. */
	ck_assert_uint_eq(predict_learn_at(&s, t + 420 * US, t + 500 * US, lead), t + lat);
	predict_completed(&s, predict_learn_at(&s, t + 420 * US, t + 500 * US, lead),
			  t + 500 * US,
			  predict_how_seen(0, 1, t + 420 * US, t + 500 * US, lead));
	ck_assert_uint_eq(s.lat_ns, lat);
	ck_assert_uint_le(s.dev_ns, dev);
	ck_assert_uint_le(s.dev_late_ns, dev_late);
	/* Learning the deadline, as every wake did, taught it 80 us early. */
	{
		struct slot_timing o = learned(500 * US, 20, &t);
		predict_armed(&o, t);
		predict_completed(&o, t + 420 * US, t + 500 * US,
				  predict_how_seen(0, 1, t + 420 * US, t + 500 * US, lead));
		ck_assert_uint_lt(o.lat_ns, lat);
		ck_assert_uint_gt(o.dev_ns, dev);
	}
	/* Due before the interval: its start (it came late, at least that);
	 * after it: its end (early, at least that). */
	t += 2 * MS;
	predict_armed(&s, t);
	ck_assert_uint_eq(predict_learn_at(&s, t + 520 * US, t + 600 * US, lead), t + 520 * US);
	ck_assert_uint_eq(predict_learn_at(&s, t + 300 * US, t + 400 * US, lead), t + 400 * US);
}
END_TEST

START_TEST(test_mixed_durations_look_early)
{
	uint64_t t = 1000 * MS;
	struct slot_timing s = { 0 };
	uint64_t lead = 5 * US;

	/* 10 us and 10 ms, mixed: the guess is the mean less twice the
	 * spread, which is about the arm itself: look at once, then back off. */
	for (int i = 0; i < 40; i++) {
		uint64_t d = i % 2 ? 10 * US : 10 * MS;
		predict_armed(&s, t);
		predict_completed(&s, t + d - 1 * US, t + d,
				  d > 1 * MS ? PREDICT_SEEN_ASLEEP : PREDICT_SEEN_AWAKE);
		t += d + 1 * MS;
	}
	predict_armed(&s, t);
	ck_assert_uint_eq(predict_look_at(&s, t + 1 * US, lead, 250 * US), t + 1 * US);
	ck_assert_uint_le(predict_look_at(&s, t + 5 * MS, lead, 250 * US), t + 5 * MS + 250 * US);
}
END_TEST

START_TEST(test_seed_from_the_client)
{
	uint64_t t = 1000 * MS;
	struct slot_timing from = learned(2 * MS, 20, &t), s = { 0 };

	predict_seed(&s, &from);
	ck_assert_uint_eq(s.lat_ns, from.lat_ns);
	ck_assert_uint_ge(s.dev_ns, from.lat_ns / 8);
}
END_TEST

START_TEST(test_idle_waits_for_the_next_arm)
{
	struct idle_state st = { 0 };
	uint64_t t = 1000 * MS;
	struct idle_decision d;

	/* Nothing learned: park until an arm wakes the scanner. */
	idle_note_empty(&st, t);
	ck_assert_int_eq(idle_decide(&adaptive, &st, VIEW(t, 0, 0, UINT64_MAX, LEAD)).action,
			 IDLE_PARK);
	/* Arms come 500 us after the set goes empty, work takes 500 us: nap
	 * through the next arm to a lead before its work can be due (one
	 * wake-up a completion), however quickly an arm would wake a parked
	 * scanner; past the arm's window it is not coming: park. */
	for (int i = 0; i < 10; i++) {
		idle_note_empty(&st, t);
		idle_note_armed_from_empty(&st, t + 500 * US);
		idle_note_done(&st, 500 * US);
		t += 1 * MS;
	}
	idle_note_empty(&st, t);
	d = idle_decide(&adaptive, &st, VIEW(t, 0, 0, UINT64_MAX, LEAD));
	ck_assert_int_eq(d.action, IDLE_NAP);
	ck_assert_uint_le(d.until_ns, t + 1000 * US - LEAD);
	ck_assert_uint_ge(d.until_ns, t + 950 * US);
	d = idle_decide(&adaptive, &st, VIEW(t + 499 * US, 0, 0, UINT64_MAX, LEAD));
	ck_assert_int_eq(d.action, IDLE_NAP);
	ck_assert_uint_le(d.until_ns, t + 1000 * US - LEAD);
	ck_assert_int_eq(idle_decide(&adaptive, &st, VIEW(t + 600 * US, 0, 0, UINT64_MAX, LEAD)).action,
			 IDLE_PARK);
	idle_note_park_wake(&st, 20 * US);
	ck_assert_int_eq(idle_decide(&adaptive, &st, VIEW(t, 0, 0, UINT64_MAX, LEAD)).action, IDLE_NAP);
	idle_note_park_wake(&st, 0);
	/* Work of 2 us after the arm: nothing to nap through to; nap until
	 * just before the arm, spin across it. */
	for (int i = 0; i < 40; i++)
		idle_note_done(&st, 2 * US);
	d = idle_decide(&adaptive, &st, VIEW(t, 0, 0, UINT64_MAX, LEAD));
	ck_assert_int_eq(d.action, IDLE_NAP);
	ck_assert_uint_le(d.until_ns, t + 500 * US - LEAD);
	ck_assert_uint_ge(d.until_ns, t + 450 * US);
	ck_assert_int_eq(idle_decide(&adaptive, &st, VIEW(t + 499 * US, 0, 0, UINT64_MAX, LEAD)).action,
			 IDLE_SPIN);
	/* An arm wakes a parked scanner within 20 us: park at once (the work
	 * after the arm, 500 us again, leaves time to sleep before it is due),
	 * where the arms come too irregularly to nap through. */
	for (int i = 0; i < 40; i++)
		idle_note_done(&st, 500 * US);
	for (int i = 0; i < 20; i++) {
		idle_note_empty(&st, t);
		idle_note_armed_from_empty(&st, t + (i % 2 ? 300 : 700) * US);
		t += 1 * MS;
	}
	idle_note_empty(&st, t);
	idle_note_park_wake(&st, 20 * US);
	ck_assert_int_eq(idle_decide(&adaptive, &st, VIEW(t, 0, 0, UINT64_MAX, LEAD)).action, IDLE_PARK);
	idle_note_park_wake(&st, 0);
	/* Arms that come 5 ms after while work takes 500 us: a nap would be
	 * longer than any work; park (the arm wakes the scanner). */
	for (int i = 0; i < 20; i++) {
		idle_note_empty(&st, t);
		idle_note_armed_from_empty(&st, t + 5 * MS);
		t += 6 * MS;
	}
	idle_note_empty(&st, t);
	ck_assert_int_eq(idle_decide(&adaptive, &st, VIEW(t, 0, 0, UINT64_MAX, LEAD)).action,
			 IDLE_PARK);
	/* Arms 1 us after: spin a few gaps, then park. */
	for (int i = 0; i < 30; i++) {
		idle_note_empty(&st, t);
		idle_note_armed_from_empty(&st, t + 1 * US);
		t += 1 * MS;
	}
	idle_note_empty(&st, t);
	ck_assert_int_eq(idle_decide(&adaptive, &st, VIEW(t, 0, 0, UINT64_MAX, LEAD)).action, IDLE_SPIN);
	ck_assert_int_eq(idle_decide(&adaptive, &st, VIEW(t + 1 * US, 0, 0, UINT64_MAX, LEAD)).action,
			 IDLE_SPIN);
	ck_assert_int_eq(idle_decide(&adaptive, &st, VIEW(t + 50 * US, 0, 0, UINT64_MAX, LEAD)).action,
			 IDLE_PARK);
	/* Progress always passes again. */
	ck_assert_int_eq(idle_decide(&adaptive, &st, VIEW(t, 3, 1, t + 1 * MS, LEAD)).action, IDLE_SPIN);
}
END_TEST

/* n arms into the empty set, each odd_ns or even_ns (by i) after it went
 * empty and followed by work of d_ns (0: none noted), step_ns apart; the
 * set empty again after the last. */
static void arms_in_turn(struct idle_state *st, uint64_t *t, int n, uint64_t odd_ns,
			 uint64_t even_ns, uint64_t d_ns, uint64_t step_ns)
{
	for (int i = 0; i < n; i++) {
		idle_note_empty(st, *t);
		idle_note_armed_from_empty(st, *t + (i % 2 ? odd_ns : even_ns));
		if (d_ns)
			idle_note_done(st, d_ns);
		*t += step_ns;
	}
	idle_note_empty(st, *t);
}

START_TEST(test_irregular_arms_park_when_a_wake_is_quick)
{
	struct idle_state st = { 0 };
	uint64_t t = 1000 * MS;

	/* Arms 200-800 us after the set goes empty, work 500 us: too
	 * irregular to nap through; without knowing how quickly an arm wakes
	 * a parked scanner, wait for the arm (nap towards it, then spin). */
	arms_in_turn(&st, &t, 20, 200 * US, 800 * US, 500 * US, 2 * MS);
	ck_assert_int_ne(idle_decide(&adaptive, &st, VIEW(t, 0, 0, UINT64_MAX, LEAD)).action, IDLE_PARK);
	/* An arm wakes the parked scanner within 30 us: well inside the work
	 * that follows it, so park. */
	idle_note_park_wake(&st, 30 * US);
	ck_assert_int_eq(idle_decide(&adaptive, &st, VIEW(t, 0, 0, UINT64_MAX, LEAD)).action, IDLE_PARK);
	/* Work of 20 us after arms that take 30 us to wake it: wait for them
	 * (irregular arms: the park for short work is for regular ones). */
	for (int i = 0; i < 40; i++)
		idle_note_done(&st, 20 * US);
	ck_assert_int_ne(idle_decide(&adaptive, &st, VIEW(t, 0, 0, UINT64_MAX, LEAD)).action, IDLE_PARK);
}

/* Regular arms 1 ms apart whose periods jitter by tens of us (a waiter's
 * own timer), 20 us of work after each (the GPU bench's paced rows): a nap
 * through the arm ends its margin (the lead and twice the gaps' spread)
 * before the work can be due and spins across it; where an arm wakes a
 * parked scanner about when its work lands, park instead. Not at 10 000/s
 * (arms 75 us after the set goes empty), nor where the margin is a few us
 * (a nap through the arm then spins less than a park's wake-up costs). */
START_TEST(test_short_work_after_far_arms_parks)
{
	struct idle_state st = { 0 };
	uint64_t t = 1000 * MS, lead = 10 * US;
	struct idle_decision d;

	arms_in_turn(&st, &t, 40, 960 * US, 1000 * US, 25 * US, 2 * MS);
	/* Not known how quickly an arm wakes a parked scanner: nap through. */
	ck_assert_int_eq(idle_decide(&adaptive, &st, VIEW(t, 0, 0, UINT64_MAX, lead)).action, IDLE_NAP);
	idle_note_park_wake(&st, 30 * US);
	ck_assert_int_eq(idle_decide(&adaptive, &st, VIEW(t, 0, 0, UINT64_MAX, lead)).action, IDLE_PARK);
	/* An arm's wake-up 45 us after its work can land: about a blocked
	 * waiter's own, still a park; 55 us after it: nap through. */
	idle_note_park_wake(&st, 70 * US);
	ck_assert_int_eq(idle_decide(&adaptive, &st, VIEW(t, 0, 0, UINT64_MAX, lead)).action, IDLE_PARK);
	idle_note_park_wake(&st, 80 * US);
	ck_assert_int_ne(idle_decide(&adaptive, &st, VIEW(t, 0, 0, UINT64_MAX, lead)).action, IDLE_PARK);
	idle_note_park_wake(&st, 30 * US);
	/* After an idle spell of 70 ms, arms 30 us apart (the next block of a
	 * closed loop): the gaps' mean and spread both spike, the arms are not
	 * regular, and the scanner spins for the next one. */
	{
		struct idle_state burst = st;
		uint64_t tb = t;

		arms_in_turn(&burst, &tb, 1, 70 * MS, 70 * MS, 25 * US, 71 * MS);
		arms_in_turn(&burst, &tb, 1, 30 * US, 30 * US, 25 * US, 100 * US);
		ck_assert_int_eq(idle_decide(&adaptive, &burst, VIEW(tb, 0, 0, UINT64_MAX, lead)).action,
				 IDLE_SPIN);
	}
	/* Punctual arms, a short lead: the nap's margin is a few us. */
	arms_in_turn(&st, &t, 40, 700 * US, 700 * US, 0, 2 * MS);
	d = idle_decide(&adaptive, &st, VIEW(t, 0, 0, UINT64_MAX, LEAD));
	ck_assert_int_eq(d.action, IDLE_NAP);
	/* Arms 75 us after the set goes empty (10 000/s): as before. */
	arms_in_turn(&st, &t, 40, 65 * US, 85 * US, 0, 1 * MS);
	ck_assert_int_ne(idle_decide(&adaptive, &st, VIEW(t, 0, 0, UINT64_MAX, lead)).action, IDLE_PARK);
}
END_TEST

START_TEST(test_no_sleep_shorter_than_the_lateness)
{
	struct idle_state st = { 0 };
	uint64_t t = 1000 * MS;

	idle_note_done(&st, 10 * US);
	/* 100k/s: due in 8 us with a timer 6 us late lately: spin. */
	ck_assert_int_eq(idle_decide(&adaptive, &st, VIEW(t, 1, 0, t + 8 * US, 6 * US)).action, IDLE_SPIN);
	/* With a timer 2 us late, an 8 us wait is worth it. */
	ck_assert_int_ne(idle_decide(&adaptive, &st, VIEW(t, 1, 0, t + 8 * US, 2 * US)).action, IDLE_SPIN);
	/* A lead grown to 60 us (a bad spell) does not stop a 40 us sleep,
	 * which measures the timer again. */
	idle_note_done(&st, 100 * US);
	ck_assert_int_ne(idle_decide(&adaptive, &st, VIEW(t, 1, 0, t + 40 * US, 60 * US)).action,
			 IDLE_SPIN);
}
END_TEST

START_TEST(test_one_delayed_completion_is_clipped)
{
	uint64_t t = 1000 * MS;
	struct slot_timing s = learned(500 * US, 20, &t);
	uint64_t lat = s.lat_ns, dev = s.dev_ns;

	/* A completion 300 us late (its stream, or the machine, was held up):
	 * the guess moves by a quarter of the clip; seen after a sleep, the
	 * late spread goes halfway to the clip (at most 2.5 times), the early
	 * one stays. */
	ck_assert_uint_eq(s.dev_late_ns, dev);
	predict_armed(&s, t);
	predict_completed(&s, t + 800 * US, t + 800 * US, PREDICT_SEEN_ASLEEP);
	ck_assert_uint_le(s.lat_ns, lat + (4 * dev + PREDICT_WINDOW_MIN_NS) / 4 + 1);
	ck_assert_uint_le(s.dev_late_ns, (5 * dev + PREDICT_WINDOW_MIN_NS) / 2);
	ck_assert_uint_gt(s.dev_late_ns, dev);
	ck_assert_uint_eq(s.dev_ns, dev);
	/* A lasting change is followed within a few dozen samples. */
	t += 1 * MS;
	for (int i = 0; i < 40; i++)
		complete_after(&s, &t, 800 * US, PREDICT_SEEN_AWAKE);
	ck_assert_uint_ge(s.lat_ns, 780 * US);
	ck_assert_uint_le(s.lat_ns, 820 * US);
	/* A completion seen after a wait an arm ended is not learned. */
	lat = s.lat_ns;
	predict_armed(&s, t);
	predict_completed_unseen(&s, t + 5 * MS);
	ck_assert_uint_eq(s.lat_ns, lat);
	ck_assert_uint_eq(s.since_ns, t + 5 * MS);
}
END_TEST

START_TEST(test_lead_is_the_lateness_p90)
{
	uint64_t t = 1000 * MS;
	struct timer_lateness l = { 0 };

	/* Mostly 6 us late, one wake in twenty 60 us: the lead covers the
	 * usual, not the tail. */
	for (int i = 0; i < 200; i++)
		predict_lateness(&l, t, t + (i % 20 ? 6 : 60) * US);
	ck_assert_uint_le(predict_lead_ns(&l), 6 * US + PREDICT_LEAD_MIN_NS);
	/* One in five late by 60 us: now it does. */
	for (int i = 0; i < 200; i++)
		predict_lateness(&l, t, t + (i % 5 ? 6 : 60) * US);
	ck_assert_uint_ge(predict_lead_ns(&l), 60 * US);
}
END_TEST

/* The quickest completions lately: the second quickest of the last 32. One
 * quick completion alone (an arm its client made late, its work landing at
 * once) leaves it; a second moves it there at once; it rises once no two
 * quicker ones are left among the last 32. */
START_TEST(test_low_watermark_a_low_quantile)
{
	struct idle_state st = { 0 };

	idle_note_done(&st, 1 * MS);
	ck_assert_uint_eq(st.low_ns, 1 * MS);
	idle_note_done(&st, 10 * US);
	ck_assert_uint_eq(st.low_ns, 1 * MS);
	idle_note_done(&st, 10 * US);
	ck_assert_uint_eq(st.low_ns, 10 * US);
	for (int i = 0; i < 30; i++)
		idle_note_done(&st, 1 * MS);
	ck_assert_uint_eq(st.low_ns, 10 * US);
	idle_note_done(&st, 1 * MS);
	ck_assert_uint_eq(st.low_ns, 1 * MS);
	/* A late arm now and then: never moved. */
	for (int i = 0; i < 1000; i++)
		idle_note_done(&st, i % 40 ? 500 * US : 20 * US);
	ck_assert_uint_eq(st.low_ns, 500 * US);
}
END_TEST

/* Completions of 500 us seen after timed waits that ended 36 us before
 * they were due (the lead and the spread) and woke after the flag: each
 * is known to lie between the deadline and the pass. Taking the deadline
 * pulled the quickest lately 36 us short of the work and every nap
 * through an arm spun that much longer; an interval that straddles it
 * leaves it alone. Those below it move it down, those above it up. */
START_TEST(test_low_watermark_from_an_interval)
{
	struct idle_state st = { 0 };

	for (int i = 0; i < 20; i++)
		idle_note_done(&st, 500 * US);
	ck_assert_uint_eq(st.low_ns, 500 * US);
	for (int i = 0; i < 200; i++)
		idle_note_done_between(&st, 464 * US, 505 * US);
	ck_assert_uint_eq(st.low_ns, 500 * US);
	/* As it was: the deadline alone. */
	{
		struct idle_state old = st;
		for (int i = 0; i < 20; i++)
			idle_note_done(&old, 464 * US);
		ck_assert_uint_le(old.low_ns, 470 * US);
	}
	/* Work now 300 us, seen between 290 and 320 us: down at the second. */
	idle_note_done_between(&st, 290 * US, 320 * US);
	idle_note_done_between(&st, 290 * US, 320 * US);
	ck_assert_uint_eq(st.low_ns, 320 * US);
	/* Work now 800 us, seen after waits set for it: up once the quicker
	 * ones have left the last 32. */
	for (int i = 0; i < 30; i++)
		idle_note_done_between(&st, 780 * US, 820 * US);
	ck_assert_uint_eq(st.low_ns, 320 * US);
	idle_note_done_between(&st, 780 * US, 820 * US);
	ck_assert_uint_ge(st.low_ns, 780 * US);
}
END_TEST

/* What the scanner tells the policy of a completion it saw: the interval
 * from the deadline of the timed wait before the pass to the pass, or,
 * with no such wait since the slot was armed, the duration learned. */
START_TEST(test_seen_after_a_wait_or_not)
{
	struct idle_state a = { 0 }, b = { 0 };
	uint64_t since = 1000 * MS;

	for (int i = 0; i < 20; i++) {
		idle_note_done(&a, 500 * US);
		idle_note_done(&b, 500 * US);
	}
	/* A wait ended 464 us in, the pass at 505: the interval straddles
	 * 500 us, which stays. */
	for (int i = 0; i < 40; i++) {
		idle_note_seen(&a, since, since + 464 * US, since + 505 * US, 470 * US);
		idle_note_done_between(&b, 464 * US, 505 * US);
	}
	ck_assert_uint_eq(a.low_ns, b.low_ns);
	ck_assert_uint_eq(a.low_ns, 500 * US);
	/* The last wait ended before the arm: the duration learned, as is. */
	for (int i = 0; i < 40; i++)
		idle_note_seen(&a, since, since - 1 * US, since + 300 * US, 300 * US);
	ck_assert_uint_eq(a.low_ns, 300 * US);
}
END_TEST

START_TEST(test_spin_mode_as_before)
{
	struct idle_state st = { 0 };
	uint64_t t = 1000 * MS;
	struct idle_decision d;

	/* Pending: spin, however far the completion, until 10 ms without
	 * progress; then look every 250 us. */
	ck_assert_int_eq(idle_decide(&spin, &st, VIEW(t, 1, 1, t + 5 * MS, LEAD)).action, IDLE_SPIN);
	ck_assert_int_eq(idle_decide(&spin, &st, VIEW(t + 1 * US, 1, 0, t + 5 * MS, LEAD)).action, IDLE_SPIN);
	ck_assert_int_eq(idle_decide(&spin, &st, VIEW(t + 9 * MS, 1, 0, t + 5 * MS, LEAD)).action, IDLE_SPIN);
	d = idle_decide(&spin, &st, VIEW(t + 11 * MS, 1, 0, t + 5 * MS, LEAD));
	ck_assert_int_eq(d.action, IDLE_SLEEP);
	ck_assert_uint_eq(d.until_ns, t + 11 * MS + 250 * US);
	/* Nothing pending: spin 50 us, then park until woken. */
	ck_assert_int_eq(idle_decide(&spin, &st, VIEW(t + 20 * MS, 0, 1, 0, LEAD)).action, IDLE_SPIN);
	ck_assert_int_eq(idle_decide(&spin, &st, VIEW(t + 20 * MS + 10 * US, 0, 0, 0, LEAD)).action,
			 IDLE_SPIN);
	ck_assert_int_eq(idle_decide(&spin, &st, VIEW(t + 20 * MS + 70 * US, 0, 0, 0, LEAD)).action,
			 IDLE_PARK);
}
END_TEST

START_TEST(test_sleep_bounded_by_the_backstop)
{
	struct idle_state st = { 0 };
	uint64_t t = 1000 * MS;
	struct idle_decision d;

	d = idle_decide(&adaptive, &st, VIEW(t, 1, 0, t + 10 * MS, LEAD));
	ck_assert_int_eq(d.action, IDLE_SLEEP);
	ck_assert_uint_eq(d.until_ns, t + 1 * MS);
	/* A nap too: never past the backstop, however slow the work. */
	idle_note_done(&st, 20 * MS);
	d = idle_decide(&adaptive, &st, VIEW(t, 1, 0, t + 10 * MS, LEAD));
	ck_assert_int_eq(d.action, IDLE_NAP);
	ck_assert_uint_eq(d.until_ns, t + 1 * MS);
	/* A wait too short to be worth it is a spin. */
	ck_assert_int_eq(idle_decide(&adaptive, &st, VIEW(t, 1, 0, t + 2 * US, LEAD)).action, IDLE_SPIN);
}
END_TEST

/* A long wait ends later than short ones (the H200 host's timer: 5-7 us
 * after 90 us, 20-48 after 900): ended early by an approach where that
 * difference is worth a wake-up, by the difference where it is not, and not
 * at all for a short wait. */
START_TEST(test_long_wait_approaches)
{
	struct idle_state st = { 0 };
	uint64_t t = 1000 * MS, lead = 7 * US, at = t + 900 * US;
	struct idle_decision d;

	idle_note_done(&st, 2 * MS); /* no arm can be due sooner: naps */
	/* Not known yet: the wait as asked. */
	d = idle_decide(&adaptive, &st, VIEW(t, 1, 0, at, lead));
	ck_assert_int_eq(d.action, IDLE_NAP);
	ck_assert_uint_eq(d.until_ns, at);
	/* Long waits 40 us late: an approach that much and more early, then a
	 * short wait to the lead. */
	idle_note_long_lateness(&st, 40 * US);
	d = idle_decide(&adaptive, &st, VIEW(t, 1, 0, at, lead));
	ck_assert_int_eq(d.action, IDLE_NAP);
	ck_assert_uint_eq(d.until_ns, at - 40 * US - IDLE_APPROACH_NS);
	d = idle_decide(&adaptive, &st, VIEW(d.until_ns + 40 * US, 1, 0, at, lead));
	ck_assert_int_eq(d.action, IDLE_NAP);
	ck_assert_uint_eq(d.until_ns, at);
	/* Long waits barely later than short ones: one wait, earlier by the
	 * difference. */
	idle_note_long_lateness(&st, lead + IDLE_APPROACH_GAIN_NS);
	d = idle_decide(&adaptive, &st, VIEW(t, 1, 0, at, lead));
	ck_assert_uint_eq(d.until_ns, at - IDLE_APPROACH_GAIN_NS);
	/* A wait capped by the backstop is a look, not a guess: as capped. */
	idle_note_long_lateness(&st, 40 * US);
	d = idle_decide(&adaptive, &st, VIEW(t, 1, 0, t + 5 * MS, lead));
	ck_assert_uint_eq(d.until_ns, t + adaptive.backstop_ns);
}
END_TEST

/* A user with writes of write_ns each, more than a quantum's worth in every
 * pass (one a millisecond) for for_ns: whether it was found carried too long. */
static int carried_too_long_after(uint64_t write_ns, uint64_t for_ns)
{
	struct fair_share f = { 0 };
	uint64_t pass = 1;

	for (uint64_t t = 1000 * MS; t < 1000 * MS + for_ns; t += 1 * MS, pass++) {
		while (share_may_write(&f, pass, FAIR_SHARE_QUANTUM_NS))
			share_charge(&f, write_ns);
		if (share_carried_too_long(&f, t))
			return 1;
	}
	return 0;
}

START_TEST(test_share_per_pass)
{
	struct fair_share a = { 0 }, v = { 0 };
	uint64_t pass = 1;
	int served_a = 0, served_v = 0;

	/* A floods each pass with 13 us writes; V has one per pass. A gets
	 * about a quantum's worth a pass, V its one every pass. */
	for (; pass <= 100; pass++) {
		int n = 0;
		while (share_may_write(&a, pass, FAIR_SHARE_QUANTUM_NS) && n < 10000) {
			share_charge(&a, 13 * US);
			n++;
		}
		ck_assert_int_le(n, FAIR_SHARE_QUANTUM_NS / (13 * US) + 1);
		served_a += n;
		ck_assert(share_may_write(&v, pass, FAIR_SHARE_QUANTUM_NS));
		share_charge(&v, 1 * US);
		served_v++;
	}
	ck_assert_int_eq(served_v, 100);
	/* Carried every pass for over 2 s with writes as costly as the
	 * budget's costly ones: too long; a burst is not; 1 us writes (one
	 * user streaming from thousands of slots) and 25 us ones (each waking
	 * a thread on another CPU of a virtual machine) never are. */
	ck_assert(!carried_too_long_after(FAIR_SHARE_DROP_WRITE_NS, FAIR_SHARE_DROP_NS / 2));
	ck_assert(carried_too_long_after(FAIR_SHARE_DROP_WRITE_NS, FAIR_SHARE_DROP_NS + 10 * MS));
	ck_assert(!carried_too_long_after(1 * US * CUFLAG_SLOWDOWN, 2 * FAIR_SHARE_DROP_NS));
	ck_assert(!carried_too_long_after(25 * US * CUFLAG_SLOWDOWN, 2 * FAIR_SHARE_DROP_NS));
	ck_assert_int_ge(served_a, 300);
	/* One 1 ms write is paid back over the next passes. */
	ck_assert(share_may_write(&a, pass, FAIR_SHARE_QUANTUM_NS));
	share_charge(&a, 1 * MS);
	int waited = 0;
	while (!share_may_write(&a, ++pass, FAIR_SHARE_QUANTUM_NS))
		waited++;
	ck_assert_int_ge(waited, (int)(1 * MS / FAIR_SHARE_QUANTUM_NS) - 2);
}
END_TEST

/* The spreads of a slot, one a side of its mean: halfway up at once on the
 * side where a completion seen after a sleep fell (it landed outside the
 * window), down a sixteenth a completion seen awake; a slot among many of
 * its user's keeps the running mean, both sides alike, which comes down
 * four times faster. */
START_TEST(test_spread_widens_asleep_narrows_awake)
{
	uint64_t t = 1000 * MS;
	struct slot_timing s = learned(500 * US, 20, &t), crowded;
	uint64_t dev = s.dev_late_ns, early = s.dev_ns, off;

	predict_armed(&s, t);
	predict_completed(&s, t + 600 * US, t + 600 * US, PREDICT_SEEN_ASLEEP);
	off = 600 * US - 499 * US;
	if (off > 4 * dev + PREDICT_WINDOW_MIN_NS)
		off = 4 * dev + PREDICT_WINDOW_MIN_NS;
	ck_assert_uint_ge(s.dev_late_ns, (dev + off) / 2 - 1);
	/* Late work costs no spin before the mean. */
	ck_assert_uint_eq(s.dev_ns, early);
	t += 1 * MS;
	crowded = s;
	dev = s.dev_late_ns;
	for (int i = 0; i < 8; i++) {
		uint64_t d = s.lat_ns + 1 * US, t2 = t;

		complete_after(&s, &t, d, PREDICT_SEEN_AWAKE);
		complete_after(&crowded, &t2, d, PREDICT_SEEN_CROWDED);
	}
	/* Eight completions near the mean: about (15/16)^8 and (3/4)^8. */
	ck_assert_uint_ge(s.dev_late_ns, dev / 2);
	ck_assert_uint_le(crowded.dev_late_ns, dev / 8 + 1 * US);
	ck_assert_uint_le(crowded.dev_ns, dev / 8 + 1 * US);
	for (int i = 0; i < 200; i++)
		complete_after(&s, &t, 500 * US, PREDICT_SEEN_AWAKE);
	ck_assert_uint_le(s.dev_ns, 1 * US);
	ck_assert_uint_le(s.dev_late_ns, 1 * US);
}
END_TEST

/* Which rule a completion's spread follows: the plain mean where CPUs are
 * few or the user has many hot slots; the fast widening only after a timed
 * sleep whose timer woke within its usual lateness. */
START_TEST(test_how_a_completion_was_seen)
{
	uint64_t t = 1000 * MS, lead = 20 * US;

	ck_assert_int_eq(predict_how_seen(0, 1, 0, t, lead), PREDICT_SEEN_AWAKE);
	ck_assert_int_eq(predict_how_seen(0, 1, t - 5 * US, t, lead), PREDICT_SEEN_ASLEEP);
	ck_assert_int_eq(predict_how_seen(0, 1, t - lead, t, lead), PREDICT_SEEN_ASLEEP);
	/* Woke later than usual: it may have landed in the lateness. */
	ck_assert_int_eq(predict_how_seen(0, 1, t - lead - 1, t, lead), PREDICT_SEEN_AWAKE);
	ck_assert_int_eq(predict_how_seen(0, PREDICT_WIDEN_MAX_HOT, t - 5 * US, t, lead),
			 PREDICT_SEEN_ASLEEP);
	ck_assert_int_eq(predict_how_seen(0, PREDICT_WIDEN_MAX_HOT + 1, t - 5 * US, t, lead),
			 PREDICT_SEEN_CROWDED);
	ck_assert_int_eq(predict_how_seen(1, 1, t - 5 * US, t, lead), PREDICT_SEEN_CROWDED);
	ck_assert_int_eq(predict_how_seen(1, 1, 0, t, lead), PREDICT_SEEN_CROWDED);
}
END_TEST

/* Work held up now and then lands late, never early (a timer's lateness,
 * a stream behind another): the late side widens for it and the early side
 * stays narrow, so the scanner does not spin before every completion for
 * the few that come late. Durations 500 us plus an exponential delay of
 * mean 20 us: few land after the window, and the spin before the flag
 * stays near what the narrow early side costs. */
START_TEST(test_late_work_widens_the_late_side)
{
	uint64_t t = 1000 * MS, rng = 99;
	struct slot_timing s = { 0 };
	int outside = 0, n = 2000;
	uint64_t spun = 0;

	for (int i = 0; i < n; i++) {
		uint64_t d, first;
		double u;
		int out;

		rng = rng * 6364136223846793005ull + 1442695040888963407ull;
		u = (double)((rng >> 11) + 1) / 9007199254740993.0;
		d = 500 * US + (uint64_t)(-20000.0 * log(u));
		predict_armed(&s, t);
		first = predict_look_at(&s, t, LEAD, 10 * MS);
		out = first > t + d || predict_look_at(&s, t + d, LEAD, 10 * MS) != t + d;
		if (i >= 100) {
			outside += out;
			spun += first < t + d ? t + d - first : 0;
		}
		predict_completed(&s, t + d, t + d, out ? PREDICT_SEEN_ASLEEP : PREDICT_SEEN_AWAKE);
		t += d + 1 * MS;
	}
	ck_assert_int_le(outside, n / 40);
	/* Spun before the flag: about 45 us a completion (the symmetric
	 * spread of the earlier window spun 74). */
	ck_assert_uint_le(spun / (uint64_t)(n - 100), 60 * US);
}
END_TEST

/* A slot's first spread is a guess (an eighth of its first duration): its
 * first completions correct it as quickly as a running mean would, however
 * they are seen. Punctual work of 500 us (within half a microsecond): from
 * its tenth completion on, the scanner spins little before each flag (with
 * the guess falling a sixteenth a completion, and only on the side each
 * fell, 56 us a completion from the tenth to the hundredth). */
START_TEST(test_first_spread_is_a_guess)
{
	uint64_t t = 1000 * MS, rng = 4242, spun = 0;
	struct slot_timing s = { 0 };
	int n = 100;

	for (int i = 0; i < n; i++) {
		uint64_t d, first;
		int out;

		rng = rng * 6364136223846793005ull + 1442695040888963407ull;
		d = 500 * US + (rng >> 33) % 500;
		predict_armed(&s, t);
		first = s.lat_ns ? predict_look_at(&s, t, LEAD, 10 * MS) : t;
		out = first > t + d ||
		      (s.lat_ns && predict_look_at(&s, t + d, LEAD, 10 * MS) != t + d);
		ck_assert_int_eq(out, 0);
		if (i >= 10)
			spun += t + d - first;
		predict_completed(&s, t + d, t + d, PREDICT_SEEN_AWAKE);
		t += 1 * MS;
	}
	printf("first spread: %.1f us spun a completion, 10th to 100th\n",
	       (double)spun / 1e3 / (n - 10));
	ck_assert_uint_le(spun / (uint64_t)(n - 10), 10 * US);
	ck_assert_uint_le(s.dev_ns, 5 * US);
	ck_assert_uint_le(s.dev_late_ns, 5 * US);
	/* A sibling's history seeds a new slot as a guess again. */
	{
		struct slot_timing sib = { 0 };
		predict_seed(&sib, &s);
		ck_assert_uint_eq(sib.learned, 0);
		ck_assert_uint_ge(sib.dev_ns, s.lat_ns / 8);
	}
}
END_TEST

/* A completion the cold sweep found (any time in its period) teaches a slot
 * only what its guess does not know: anything, where nothing is learned;
 * that the work is shorter, where it was found before the guess's mean.
 * A slot seeded with a sibling's 1 s guess whose own work takes 20 us,
 * each completion found a sweep (2 ms) late, is predicted nearer than a
 * slot stays hot (8 ms, cold-sweep.h) within a few dozen of them, and its
 * passes then see its completions themselves. */
START_TEST(test_swept_completion_teaches_what_the_guess_does_not_know)
{
	uint64_t t = 1000 * MS;
	struct slot_timing s = { 0 }, sib = learned(1000 * MS, 20, &t);
	int n;

	ck_assert_int_eq(predict_swept_teaches(&s, t), 1);
	s = learned(10 * MS, 20, &t);
	predict_armed(&s, t);
	ck_assert_int_eq(predict_swept_teaches(&s, t + 2 * MS), 1);
	ck_assert_int_eq(predict_swept_teaches(&s, t + s.lat_ns - 1), 1);
	ck_assert_int_eq(predict_swept_teaches(&s, t + s.lat_ns), 0);
	ck_assert_int_eq(predict_swept_teaches(&s, t + s.lat_ns + 1 * MS), 0);
	/* A sibling's long guess, short work. */
	predict_seed(&s, &sib);
	for (n = 0; n < 100 && s.lat_ns >= 8 * MS; n++) {
		predict_armed(&s, t);
		ck_assert_int_eq(predict_swept_teaches(&s, t + 2 * MS), 1);
		predict_completed(&s, t + 2 * MS, t + 2 * MS, PREDICT_SEEN_CROWDED);
		t += 10 * MS;
	}
	printf("swept: a 1 s guess on 20 us work below 8 ms after %d completions\n", n);
	ck_assert_int_lt(n, 40);
}
END_TEST

/* Work that takes 50-150 us at random (the GPU bench's gate): the slot is
 * spun on across all of it, so that no completion lands while the scanner
 * sleeps; and the quickest completions lately stay near the quickest, so
 * that a nap through the next arm ends before the earliest of them. */
START_TEST(test_scattered_durations_stay_inside_the_window)
{
	uint64_t t = 1000 * MS, rng = 12345;
	struct slot_timing s = { 0 };
	struct idle_state st = { 0 };
	int outside = 0, n = 2000;

	for (int i = 0; i < n; i++) {
		uint64_t d, at;
		int out;

		rng = rng * 6364136223846793005ull + 1442695040888963407ull;
		d = 50 * US + (rng >> 33) % (100 * US);
		predict_armed(&s, t);
		/* Where the scanner first looks after the arm, and whether
		 * it still spins when the flag lands. */
		at = predict_look_at(&s, t, LEAD, 1 * MS);
		out = at > t + d || predict_look_at(&s, t + d, LEAD, 1 * MS) != t + d;
		outside += i >= 50 && out;
		predict_completed(&s, t + d, t + d, out ? PREDICT_SEEN_ASLEEP : PREDICT_SEEN_AWAKE);
		idle_note_done(&st, d);
		t += d + 1 * MS;
	}
	/* A running mean of the spread: 1.25 %; the earlier window: 17 %. */
	ck_assert_int_le(outside, n / 200);
	ck_assert_uint_le(st.low_ns, 65 * US);
}
END_TEST

int main(void)
{
	const TTest *const tests[] = { test_regular_work_sleeps_until_a_lead_before,
				       test_late_timer_wakes_earlier,
				       test_overdue_backs_off_to_the_backstop,
				       test_late_seen_completion_shrinks_the_guess,
				       test_late_wake_is_the_timers_error,
				       test_spread_widens_asleep_narrows_awake,
				       test_late_work_widens_the_late_side,
				       test_first_spread_is_a_guess,
				       test_swept_completion_teaches_what_the_guess_does_not_know,
				       test_how_a_completion_was_seen,
				       test_mixed_durations_look_early,
				       test_seed_from_the_client,
				       test_idle_waits_for_the_next_arm,
				       test_irregular_arms_park_when_a_wake_is_quick,
				       test_short_work_after_far_arms_parks,
				       test_no_sleep_shorter_than_the_lateness,
				       test_one_delayed_completion_is_clipped,
				       test_lead_is_the_lateness_p90,
				       test_low_watermark_a_low_quantile,
				       test_low_watermark_from_an_interval,
				       test_seen_after_a_wait_or_not,
				       test_spin_mode_as_before, test_sleep_bounded_by_the_backstop,
				       test_long_wait_approaches,
				       test_scattered_durations_stay_inside_the_window,
				       test_share_per_pass, NULL };
	return unit_run("idle-policy", tests);
}
