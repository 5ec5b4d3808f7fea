/* SPDX-License-Identifier: MIT */
/*
 * When a pending slot's next completion will land, learned from its past
 * ones; and how late the scanner's own timer wakes it. Pure functions over
 * their state (no clock read, no system call): the scanner passes the time
 * in, the unit test passes made-up times (daemon/policy/test-idle-policy.c).
 *
 * GPU work is regular: the same kernels on the same sizes take about as long
 * each time. So each slot keeps a running mean of how long its completions
 * took, from the arm (or its previous completion) to the pass that saw the
 * flag, and a spread either side of it: how far they fall before and after
 * it (TCP's smoothed round-trip time and its deviation, one a side),
 * widened when a completion landed on that side while the scanner slept
 * (outside the window: the tail) and narrowed slowly while they land inside
 * it (enum predict_seen). A slot is looked at again a lead
 * before it is due (the timer's lateness lately, so that the wake comes
 * before the flag); a slot that is due and has not landed is spun on across
 * its spread, then looked at in steps that grow with how overdue it is (a
 * quarter of it: the wake is at most a quarter late), never further apart
 * than the backstop.
 */
#ifndef CUFLAGD_PREDICTOR_H
#define CUFLAGD_PREDICTOR_H

#include <stdint.h>

/* One slot's history. lat_ns 0: nothing learned yet. */
struct slot_timing {
	uint64_t since_ns;    /* awaited since: its arm, or its previous completion */
	uint64_t lat_ns;      /* running mean of how long completions took */
	uint64_t dev_ns;      /* how far they fell before lat_ns (enum predict_seen) */
	uint64_t dev_late_ns; /* and after it: work held up by a stream or the
			       * machine lands late, never early, and spinning
			       * before the mean for it would cost every wake */
	uint32_t learned;     /* completions learned, up to PREDICT_FIRST */
};

/* How late the scanner's timed waits end (their own error, not the
 * prediction's): a running mean and deviation (for people), and the last
 * PREDICT_LATE_RING of them, whose 90th percentile is the lead. A quantile,
 * not the mean plus twice the deviation: timers on virtual machines are
 * mostly a few us late with a tail several times longer
 * (docs/bench-log/2026-12-02-tail-kept-default-lost.md), and a lead sized
 * by the tail spins across it at
 * every wake, for the one wake in ten that the tail makes a little later. */
#define PREDICT_LATE_RING 32u
struct timer_lateness {
	uint64_t mean_ns;
	uint64_t dev_ns;
	uint64_t q_ns; /* the 90th percentile of ring */
	uint32_t samples;
	uint32_t ring[PREDICT_LATE_RING];   /* ns, each at most PREDICT_LATE_MAX_NS */
	uint32_t sorted[PREDICT_LATE_RING]; /* the same, in order */
};

/* Until measured: about the latest timers seen, on small virtual machines. */
#define PREDICT_LATE_DEFAULT_NS 20000u
/* A wake later than this is the machine (a preempted vCPU), not the timer. */
#define PREDICT_LATE_MAX_NS 200000u
/* Floors of the lead and of the spin window: a flag read and a clock read
 * apart, on any machine. A lead past PREDICT_LEAD_MAX_NS is a machine whose
 * threads wait for a CPU: spinning would wait for one as well. */
#define PREDICT_LEAD_MIN_NS 2000u
#define PREDICT_LEAD_MAX_NS 80000u
#define PREDICT_WINDOW_MIN_NS 4000u
/* The window a pending slot is spun across: from PREDICT_DUE_DEVS early
 * spreads before its mean duration (less the timer's lead) to
 * PREDICT_END_DEVS late spreads after it. */
#define PREDICT_DUE_DEVS 3u
#define PREDICT_END_DEVS 3u

/* How the pass that saw a completion came to see it, which decides how the
 * slot's spread moves. A running mean of how far durations that scatter
 * evenly fall from theirs dips below their spread whenever a few land near
 * the middle, and the next early or late one lands while the scanner
 * sleeps: seen a sleep late, the tail of every wake. */
enum predict_seen {
	/* By a pass that followed no timed sleep: inside the window (or while
	 * another slot's kept the scanner awake). The spread of the side it
	 * fell on moves a PREDICT_DEV_FALL-th of the way to how far it fell. */
	PREDICT_SEEN_AWAKE,
	/* By the first pass after a timed sleep that its timer ended within
	 * the timer's usual lateness (the lead): it landed outside the window.
	 * The spread of its side goes halfway up to how far it fell, at once
	 * (down as for AWAKE). After a later wake it may have landed in the
	 * lateness instead, the timer's error: seen as AWAKE. */
	PREDICT_SEEN_ASLEEP,
	/* Where a wide window would crowd others out: a slot of a user with
	 * more than PREDICT_WIDEN_MAX_HOT slots read every pass (the windows
	 * of hundreds of slots held wide would overlap, and the scanner would
	 * spin through all of them), or any slot on a machine of few CPUs
	 * (the scanner's spin takes a CPU that the awaited work, or a woken
	 * waiter, may need). A plain running mean of how far, either way,
	 * for both sides: a quarter of the way, up or down. */
	PREDICT_SEEN_CROWDED,
};
#define PREDICT_DEV_FALL 16u
/* A slot's first completions, however seen, move both spreads as crowded
 * ones do: a quarter of the way. Its first spread is a guess (an eighth of
 * the first duration, or a sibling's), not a measured one; falling from it
 * a sixteenth a completion, and only on the side each fell, the scanner
 * spun across most of the guess before each of the slot's first hundred
 * completions (daemon/policy/test-idle-policy.c, test_first_spread_is_a_guess).
 * Sixteen: the guess then weighs under 1 % ((3/4)^16); after eight it still
 * weighed a tenth, which the slow fall kept for a hundred more. */
#define PREDICT_FIRST 16u
#define PREDICT_WIDEN_MAX_HOT 64u

/*
 * How a completion seen by the pass at now_ns came to be seen: crowded
 * where CPUs are few (few_cpus) or its user has more than
 * PREDICT_WIDEN_MAX_HOT hot slots (user_hot); asleep where the wait before
 * the pass was a timed one, planned to end at planned_ns (0: none), that
 * its timer ended within lead_ns of then; else awake.
 */
enum predict_seen predict_how_seen(int few_cpus, uint32_t user_hot, uint64_t planned_ns,
				   uint64_t now_ns, uint64_t lead_ns);

/* A slot armed at now with no completion in flight starts being awaited. */
void predict_armed(struct slot_timing *t, uint64_t now_ns);

/*
 * The flag of t's slot was seen advanced by the pass at now_ns. planned_ns:
 * when the scanner meant to look, where its timer woke it late (else now_ns):
 * the flag most likely landed while the timer was late, and the earlier
 * time is learned, so that a guess that woke the scanner late shrinks until
 * a wake comes before the flag. (Not the look before the sleep: that would
 * learn the whole sleep as the error.) seen: how the pass came to see it
 * (a slot's first PREDICT_FIRST completions count as crowded, whatever it).
 * More remains armed: awaited from now. Returns the duration learned.
 */
uint64_t predict_completed(struct slot_timing *t, uint64_t planned_ns, uint64_t now_ns,
			   enum predict_seen seen);

/*
 * When to learn a completion of t's slot seen by the pass at now_ns, the
 * first after a timed wait planned to end at planned_ns (0: none; a wait
 * an arm or a command ended is learned otherwise): planned_ns after a wake
 * within lead_ns of it (see predict_completed). After a later one the flag
 * landed in between, and how late the wake came is the timer's error, not
 * the slot's: the point of that interval nearest the slot's due time (its
 * mean). Learning the deadline instead taught a slot whose flags land on
 * time, after each wake that a CPU idle too long made late, that it had
 * come early by the wake's lateness, and its early spread grew with the
 * tail of the host's timer
 * (docs/bench-log/2026-12-03-late-wake-timer-error-quantile.md). now_ns
 * where there was no such wait.
 */
uint64_t predict_learn_at(const struct slot_timing *t, uint64_t planned_ns, uint64_t now_ns,
			  uint64_t lead_ns);

/*
 * The flag of t's slot was seen advanced by a pass after a wait that an arm
 * or a command ended: it may have landed at any time in that wait, so the
 * duration is not learned (a long one would make the next looks late).
 * More remains armed: awaited from now.
 */
void predict_completed_unseen(struct slot_timing *t, uint64_t now_ns);

/*
 * Whether a completion the cold sweep found at now_ns (it landed any time in
 * the sweep's period) still teaches t more than its guess: where nothing is
 * learned yet, or where it was found before the guess's mean (the work got
 * shorter, or a sibling's seed was too long: the slot would otherwise go
 * cold ahead of a due time that never comes, and every completion of it be
 * found by the sweep). Learned at now_ns, late by at most a sweep; the
 * passes correct it once the slot stays hot.
 */
int predict_swept_teaches(const struct slot_timing *t, uint64_t now_ns);

/* Seed a new slot's history from one of the same client's (its kernels are
 * likely the same): its mean, and spreads of at least an eighth of it. */
void predict_seed(struct slot_timing *t, const struct slot_timing *from);

/* How long before a due time to wake: the timer's lateness (its 90th
 * percentile lately) and a flag read. */
uint64_t predict_lead_ns(const struct timer_lateness *l);

/* A timed wait planned to end at planned_ns ended at woke_ns (also: an
 * arm made at planned_ns woke the parked scanner at woke_ns). */
void predict_lateness(struct timer_lateness *l, uint64_t planned_ns, uint64_t woke_ns);

/*
 * When the scanner should next look at t's slot, seen at now_ns not
 * complete: at now (spin) when it is due within lead_ns or overdue by less
 * than its window; the lead before it is due; or, overdue, a quarter of how
 * overdue it is from now. Never more than backstop_ns from now: work that
 * got faster than it was is seen within that.
 */
uint64_t predict_look_at(const struct slot_timing *t, uint64_t now_ns, uint64_t lead_ns,
			 uint64_t backstop_ns);

#endif
