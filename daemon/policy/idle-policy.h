/* SPDX-License-Identifier: MIT */
/*
 * What the scanner does after a pass: pass again at once (spin), nap until a
 * time (a plain timed sleep: clients are not told, so their arms wait in the
 * queues until it ends), sleep until a time (the park protocol with a
 * deadline: an arm or a command wakes it earlier), or park until woken. Pure
 * functions over the state below; the scanner applies the decision
 * (scanner/park.c), the unit test checks it (daemon/policy/test-idle-policy.c).
 *
 * SCANNER_SPIN spends a core on latency: it spins while anything is pending
 * (until pending_spin_ns without progress, then looks every pending_poll_ns)
 * and for spin_ns once nothing is, then parks.
 *
 * SCANNER_ADAPTIVE, the default, follows the load. It wakes when the next
 * thing is expected: the earliest pending slot's look time (predictor.h: a
 * lead before it is due), or, with nothing pending, the next arm (the gaps
 * between the set going empty and the next arm are regular too). It spins
 * only when that is closer than a sleep is worth. A wait shorter than the
 * quickest completion seen lately is a nap: an arm made meanwhile cannot be
 * due before the nap ends, so no client needs to wake the scanner (no system
 * call per arm). A longer wait is a sleep, which any arm ends at once; none
 * is longer than backstop_ns, so a completion that comes sooner than
 * predicted is still seen within it. With nothing pending and arms that
 * come regularly it naps through the next arm to a lead before that arm's
 * work can be due (one wake-up a completion); with arms that do not, it
 * parks, or waits for an arm expected soon.
 */
#ifndef CUFLAGD_IDLE_POLICY_H
#define CUFLAGD_IDLE_POLICY_H

#include <stdint.h>

enum scanner_mode { SCANNER_SPIN, SCANNER_ADAPTIVE };

struct idle_cfg {
	int mode;                 /* enum scanner_mode */
	uint64_t spin_ns;         /* SPIN: nothing pending, spin this long, then park */
	uint64_t pending_spin_ns; /* SPIN: pending, no progress: spin this long (0: for
				   * ever), then look every pending_poll_ns */
	uint64_t pending_poll_ns;
	uint64_t backstop_ns;     /* ADAPTIVE: no wait without looking is longer */
};

/* The quickest completions lately: the IDLE_LOW_RANK-th quickest of the
 * last IDLE_LOW_RING (idle_note_done_between). */
#define IDLE_LOW_RING 32u
#define IDLE_LOW_RANK 2u

/* What the policy remembers between passes (the scanner's, private). */
struct idle_state {
	uint64_t idle_since_ns; /* the pending set went empty then (0: it is not) */
	uint64_t gap_ns;        /* running mean of the gaps from empty to the next arm */
	uint64_t gap_dev_ns;    /* and of how far they were from it */
	uint64_t low_ns;        /* the quickest completions lately (0: none seen) */
	uint32_t low_ring[IDLE_LOW_RING]; /* what each of the last ones said of it, ns */
	uint32_t low_n, low_pos; /* how many it holds; where the next goes */
	uint64_t spin_since_ns; /* the current streak without progress began (0: none) */
	uint64_t park_wake_ns;  /* how long after an arm a parked scanner takes it,
				 * lately (90th percentile; 0: not known) */
	uint64_t long_lead_ns;  /* how late waits longer than IDLE_SHORT_WAIT_NS
				 * end, lately (90th percentile; 0: not known) */
	/* Completions one after another (idle_note_pass_done): the pass that
	 * saw the last one (0: none yet) and the one before it (it landed in
	 * between); the quickest intervals between two such passes lately
	 * (the IDLE_LOW_RANK-th of the last IDLE_LOW_RING; 0: fewer than
	 * IDLE_GAP_LEARN known). */
	uint64_t done_at_ns, done_lo_ns;
	uint64_t gap_low_ns;
	uint32_t gap_ring[IDLE_LOW_RING];
	uint32_t gap_n, gap_pos;
	uint64_t stall_since_ns; /* pending, due, not landed since (0: not so) */
	int floor_waited;        /* the last decision waited for the interval */
	uint64_t floor_late_ns;  /* and a wake by then ended it on time */
	uint32_t floor_early;    /* completions found at once after such waits in turn */
};

enum idle_action {
	IDLE_SPIN,  /* pass again now */
	IDLE_NAP,   /* a plain sleep until until_ns, clients not told */
	IDLE_SLEEP, /* PARKED until until_ns, or until an arm or a command */
	IDLE_PARK,  /* PARKED until an arm or a command */
};

struct idle_decision {
	enum idle_action action;
	uint64_t until_ns; /* IDLE_NAP, IDLE_SLEEP: the absolute deadline */
};

/* A wait shorter than this (plus the timer's lateness, counted up to
 * IDLE_SLEEP_LATE_MAX_NS) is not worth its system calls and wake-up. */
#define IDLE_SLEEP_MIN_NS 5000u
#define IDLE_SLEEP_LATE_MAX_NS 15000u
/* Arms whose gaps from the set going empty spread by at most 1/this of the
 * gap are regular enough to nap through (idle_decide). */
#define IDLE_NAP_THROUGH_SPREAD 4u
/* A shorter nap through an arm saves too little to risk seeing the arm's
 * work late: with arms a few us apart (the GPU bench's closed-loop streams)
 * shorter naps through them cost throughput
 * (docs/bench-log/2026-12-01-scanner-cost-default-vs-spin.md). */
#define IDLE_NAP_THROUGH_MIN_NS 25000u
/* A wait up to this long ends about as late as the short waits of a busy
 * scanner; a longer one may end later: a CPU idle that long sleeps deeper
 * (docs/bench-log/2026-12-01-scanner-cost-default-vs-spin.md, "a long
 * wait's lateness learned apart"). A long
 * wait then ends IDLE_APPROACH_NS and its own lateness early, and a short
 * one follows (two wake-ups, a short lead spun), where the long wait's
 * lateness exceeds the short ones' by more than IDLE_APPROACH_GAIN_NS (about
 * a wake-up's cost); else it ends earlier by that difference. */
#define IDLE_SHORT_WAIT_NS 200000u
#define IDLE_APPROACH_NS 60000u
#define IDLE_APPROACH_GAIN_NS 10000u
/* Arms that come back within this after the set went empty are spun for
 * (about a park and a wake-up's cost). */
#define IDLE_GAP_SPIN_NS 5000u
/* Regular arms (as for a nap through them) at least IDLE_PARK_GAP_NS after
 * the set went empty (a few thousand a second or fewer), whose work is
 * shorter than a nap through the arm would spin (its margin: the lead and
 * twice the gaps' spread, at least IDLE_PARK_SPIN_MIN_NS, more than a
 * park's wake-up and the client's write cost): park, where the arm wakes
 * the scanner at most IDLE_PARK_LATE_MAX_NS after its work can land (90th
 * percentile). One wake-up a completion either way; the nap's spins across
 * its whole margin, and for the arm where the waiter's timer made it late,
 * the park's no longer than the work. The bound is about a blocked
 * waiter's own wake-up at these rates (the park's lateness is then no
 * tail of its own); on a virtual machine an arm's wake-up alone can take
 * longer than short work, and a bound of the work's length kept the nap
 * and its cost (docs/bench-log/2026-12-02-park-bound-paced-gpu-h200.md). */
#define IDLE_PARK_GAP_NS 250000u
#define IDLE_PARK_SPIN_MIN_NS 20000u
#define IDLE_PARK_LATE_MAX_NS 50000u

/* Completions come one after another where they share a device that runs
 * one piece of work at a time (a GPU whose queued kernels each fill it):
 * the next lands no sooner than the last one plus the quickest interval
 * between two lately, whatever each slot's own history says. A slot's
 * time from its arm is then its place in the queue, which changes from one
 * arm to the next: its spread is the queue's length and a spin across it
 * lasts most of each completion. With pending work, the scanner looks no
 * earlier than a lead before that (where IDLE_GAP_LEARN intervals are
 * known); where completions land side by side the quickest interval is
 * about 0 and this bounds nothing. IDLE_FLOOR_EARLY_MAX completions in turn
 * found at the first look after such a wait (one that ended on time) say
 * the work got quicker: the quickest interval is cut by a quarter. A slot
 * due and not landed is spun on for IDLE_STALL_SPIN_NS past it, then looked
 * at in steps of a quarter of how long it has stalled, at most an
 * IDLE_STALL_STEP_DIV-th of the quickest interval or completion (so it is
 * seen late by at most that share of them), instead of spinning across
 * the whole spread; where that share is shorter than two sleeps are worth,
 * it is spun on as before
 * (docs/decisions/0035-queued-work-completes-one-after-another.md). */
#define IDLE_GAP_LEARN 8u
#define IDLE_STALL_SPIN_NS 50000u
#define IDLE_STALL_STEP_DIV 8u
#define IDLE_FLOOR_EARLY_MAX 3u

/* The pass at now_ns, the one before it at prev_ns, saw n completions:
 * they landed in between. */
void idle_note_pass_done(struct idle_state *st, uint64_t prev_ns, uint64_t now_ns, uint64_t n);

/* The pending set went empty at now_ns; an arm came into the empty set at
 * now_ns; a completion took d_ns from its arm. */
void idle_note_empty(struct idle_state *st, uint64_t now_ns);
void idle_note_armed_from_empty(struct idle_state *st, uint64_t now_ns);
void idle_note_done(struct idle_state *st, uint64_t d_ns);
/* A completion known only to have taken between lo_ns and hi_ns: seen on
 * the first pass after a timed wait, it landed during the wait (lo_ns: its
 * deadline; hi_ns: the pass). */
void idle_note_done_between(struct idle_state *st, uint64_t lo_ns, uint64_t hi_ns);
/* A completion awaited since since_ns, learned as taking d_ns, seen by the
 * pass at now_ns. Where that pass is the first after a timed wait whose
 * deadline planned_ns lies between the two, the flag landed between that
 * deadline (set before the work was due, so it landed after it, unless it
 * came early) and the pass; d_ns, learned in between, is no shorter than
 * the deadline's part. Otherwise it took d_ns. */
void idle_note_seen(struct idle_state *st, uint64_t since_ns, uint64_t planned_ns,
		    uint64_t now_ns, uint64_t d_ns);
/* An arm wakes the parked scanner within wake_ns lately. */
void idle_note_park_wake(struct idle_state *st, uint64_t wake_ns);
/* Waits longer than IDLE_SHORT_WAIT_NS end within late_ns lately. */
void idle_note_long_lateness(struct idle_state *st, uint64_t late_ns);

/* What a pass tells the policy. */
struct idle_view {
	uint64_t now_ns;     /* when the pass began */
	uint64_t npending;   /* slots pending after it */
	int progress;        /* it took arms, applied commands or signalled */
	uint64_t look_at_ns; /* when the earliest pending slot is next to be
			      * looked at (predictor.h; ignored when none is) */
	uint64_t lead_ns;    /* how much later than asked the timer wakes from a
			      * short wait (a long one's: idle_note_long_lateness) */
	uint64_t sweep_at_ns; /* the cold sweep's next slice, no later than
			       * look_at_ns (0: none): no wait for the interval
			       * goes past it */
};

/* The decision after a pass. */
struct idle_decision idle_decide(const struct idle_cfg *cfg, struct idle_state *st,
				 const struct idle_view *v);

#endif
