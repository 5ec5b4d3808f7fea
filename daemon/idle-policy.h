/* SPDX-License-Identifier: MIT */
/*
 * What the scanner does after a pass: pass again at once (spin), sleep until
 * a time (woken earlier by any arm or command: the park protocol with a
 * timeout), or park until woken. Pure functions over the state below; the
 * scanner applies the decision (scanner-park.c), the unit test checks it
 * (tests/test-idle-policy.c).
 *
 * SCANNER_SPIN spends a core on latency: it spins while anything is pending
 * (until pending_spin_ns without progress, then looks every pending_poll_ns)
 * and for spin_ns once nothing is, then parks.
 *
 * SCANNER_ADAPTIVE, the default, follows the load: with slots pending it
 * sleeps until the earliest of them is to be looked at (predictor.h: a lead
 * before it is due), and spins only when that is closer than a sleep is
 * worth; with none pending it parks at once unless arms have lately come
 * back sooner than a park and a wake cost. Its sleeps publish PARKED, so an
 * arm made meanwhile wakes it at once (the client's eventfd write): a sleep
 * never delays a completion the predictor did not foresee beyond
 * pending_poll_ns (the backstop), nor any other client's arm at all.
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
	uint64_t pending_poll_ns; /* also ADAPTIVE's backstop */
};

/* What the policy remembers between passes (the scanner's, private). */
struct idle_state {
	uint64_t idle_since_ns;  /* the pending set went empty then (0: it is not) */
	uint64_t gap_ns;         /* running mean of the gaps from empty to the next arm */
	uint64_t spin_since_ns;  /* the current spin without progress began (0: none) */
};

enum idle_action {
	IDLE_SPIN,  /* pass again now */
	IDLE_SLEEP, /* PARKED until until_ns, or until an arm or a command */
	IDLE_PARK,  /* PARKED until an arm or a command */
};

struct idle_decision {
	enum idle_action action;
	uint64_t until_ns; /* IDLE_SLEEP: the absolute deadline */
};

/* A sleep shorter than this is not worth its system calls and wake-up. */
#define IDLE_SLEEP_MIN_NS 5000u
/* ADAPTIVE: arms that come back within this after the set went empty are
 * spun for (about a park and a wake-up's cost). */
#define IDLE_GAP_SPIN_NS 5000u

/* The pending set went empty at now_ns; an arm came into the empty set at
 * now_ns. */
void idle_note_empty(struct idle_state *st, uint64_t now_ns);
void idle_note_armed_from_empty(struct idle_state *st, uint64_t now_ns);

/*
 * The decision after a pass at now_ns. npending: slots pending; progress: the
 * pass took arms, applied commands or signalled; look_at_ns: when the
 * earliest pending slot is next to be looked at (predictor.h; ignored when
 * none is pending; it is early by the timer's lateness already).
 */
struct idle_decision idle_decide(const struct idle_cfg *cfg, struct idle_state *st,
				 uint64_t now_ns, uint64_t npending, int progress,
				 uint64_t look_at_ns);

#endif
