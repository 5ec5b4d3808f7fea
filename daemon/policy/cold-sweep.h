/* SPDX-License-Identifier: MIT */
/*
 * Which pending slots a pass reads, so that a pass costs what is due, not
 * what is pending on the node. Pure functions over numbers (no clock read,
 * no system call): the scanner passes the time in, the unit test passes
 * made-up times (daemon/policy/test-cold-sweep.c).
 *
 * A pending slot is HOT (read by every pass, as before) or COLD (read by a
 * sweep that goes over every cold slot once per COLD_SWEEP_NS, a slice per
 * pass, never more than COLD_SLICE_MAX slots in one pass). A slot goes cold
 * once it has been awaited COLD_AFTER_NS without a completion, or when the
 * predictor expects its next completion further ahead than that, or when
 * its user already holds COLD_HOT_PER_USER hot slots while another user has
 * work pending too (so that nobody can keep slots hot to slow the others:
 * what one user's hot slots cost a pass is bounded, as fair-share.h bounds
 * what its writes cost; a user alone slows nobody). A cold slot
 * whose flag moved, whose predicted completion comes within a sweep, or
 * whose user has hot room again (when it went cold for want of it), is made
 * hot by the sweep that sees it.
 *
 * So a completion of a cold slot is noticed within two sweep periods and a
 * pass (one where it went cold before the sweep began: a slot that goes cold
 * during a sweep waits for the next), which for a slot cold by its age is at
 * most half of how long it had been awaited, whatever the churn. A sweep
 * reads a compact array (the flag's address and the value last seen), not
 * the slot's state: a few nanoseconds a cold slot, a sweep's worth spread
 * over its period.
 */
#ifndef CUFLAGD_COLD_SWEEP_H
#define CUFLAGD_COLD_SWEEP_H

#include <stdint.h>

#define COLD_AFTER_NS 8000000ull   /* awaited this long: cold */
#define COLD_SWEEP_NS 2000000ull   /* every cold slot read once this often */
#define COLD_SLICE_MAX 8192u       /* cold slots one pass reads, at most */
#define COLD_SLICE_MIN 512u        /* not worth a wake-up of its own below this, */
#define COLD_SLICE_GAP_NS 100000ull /* nor a slice sooner than this after the last */
#define COLD_HOT_PER_USER 1024u    /* a user's hot slots, at most */
/* Slots of one user whose flags moved that one pass makes hot, at most, where
 * others have work pending (scanner/cold.c): each is made hot, read,
 * signalled and put back, some 250 ns, so a user's are some 60 us a pass. */
#define COLD_MOVED_PER_PASS 256u

/*
 * Whether a pass (number pass) may make one more slot of a user hot whose
 * flag moved while cold: *at and *n are the user's count (the pass it is
 * for, how many so far); busy_users: users with work pending. A user whose
 * cold slots' flags all move all the time had every pass make every one of
 * them hot, signal it and put it back, sweep after sweep, while everyone's
 * notice waited; those over the count stay cold as they are (their flags
 * still moved) and a later sweep makes them hot. A user alone slows nobody.
 */
static inline int cold_moved_may_wake(uint64_t *at, uint32_t *n, uint64_t pass,
				       uint32_t busy_users)
{
	if (busy_users < 2)
		return 1;
	if (*at != pass) {
		*at = pass;
		*n = 0;
	}
	return (*n)++ < COLD_MOVED_PER_PASS;
}

/* Where a sweep stands: it began at start_ns and has read pos of its end
 * slots (cold[0, end): those that were cold when it began, or when it read
 * its first slice; the ones that went cold since wait for the next sweep). */
struct cold_sweep {
	uint64_t start_ns;
	uint64_t pos, end;
};

/* What a pass reads of the cold set: [from, from + count), and when the
 * next slice is worth a pass (UINT64_MAX: none; now: at once). */
struct cold_slice {
	uint64_t from, count;
	uint64_t next_ns;
};

/*
 * The slice the pass at now_ns reads of a cold set of ncold slots, and
 * where that leaves the sweep (advanced past the slice; a sweep that has
 * read its slots starts again once its period is over, at once where it
 * was late). Slots added at the end during a sweep are read by the next one
 * (by this one only before its first slice), so that a sweep ends within its
 * period however fast slots go cold: a set that grows as it is read would
 * otherwise keep one sweep going, and its last slots unread, for as long as
 * the churn lasts. Removed ones move an entry of their part into their place
 * (cold[0, pos), [pos, end) and [end, ncold) each stay whole: the caller
 * then reads that place again).
 */
struct cold_slice cold_plan(struct cold_sweep *sw, uint64_t ncold, uint64_t now_ns);

/* Why a pending hot slot is to go cold (0: it stays hot). */
enum cold_reason {
	COLD_STAY_HOT = 0,
	COLD_AGED,     /* awaited COLD_AFTER_NS, no completion expected soon */
	COLD_AHEAD,    /* its next completion is predicted further ahead */
	COLD_CROWDED,  /* its user holds more than COLD_HOT_PER_USER hot slots */
};

/*
 * The slot has been awaited since since_ns; due_ns: when the predictor
 * expects its next completion (0: nothing learned), give or take spread_ns
 * (the window it spins across: a slot late by less is still hot); user_hot:
 * its user's hot slots, itself included; busy_users: users with slots
 * pending, its own included.
 */
/* Inline: the pass asks it of every hot slot it reads. */
static inline enum cold_reason cold_should_go(uint64_t now_ns, uint64_t since_ns, uint64_t due_ns,
					       uint64_t spread_ns, uint32_t user_hot,
					       uint32_t busy_users)
{
	if (user_hot > COLD_HOT_PER_USER && busy_users > 1)
		return COLD_CROWDED;
	if (due_ns > now_ns + COLD_AFTER_NS)
		return COLD_AHEAD;
	if (now_ns - since_ns < COLD_AFTER_NS)
		return COLD_STAY_HOT;
	/* Awaited long: hot still while its predicted completion is to come
	 * or within its spread (the predictor looks for it then); past that,
	 * or unknown, cold. */
	return due_ns && due_ns + spread_ns >= now_ns ? COLD_STAY_HOT : COLD_AGED;
}

/*
 * When a slot going cold for reason why is to be made hot again, whatever
 * its flag says: a sweep before its predicted completion (COLD_AHEAD), as
 * soon as its user has room (COLD_CROWDED: 0, "at the next sweep that finds
 * room"), never (COLD_AGED: UINT64_MAX, only its flag brings it back).
 */
uint64_t cold_wake_at(enum cold_reason why, uint64_t due_ns);

#endif
