/* SPDX-License-Identifier: MIT */
/*
 * Why a client was dropped for its eventfds, in one place. A slot's eventfd
 * is a file the client holds too, so each scanner write to it is the
 * client's to make costly or to block:
 * - every write is timed, and what one costs beyond any wake-up is charged
 *   to its user's write budget (budget.h: epoll watchers make writes
 *   costly); a user over the budget with costly writes again and again is
 *   dropped (BROKEN_COST);
 * - a counter near 2^64 fails a non-blocking write (BROKEN_FULL);
 * - a client that cleared O_NONBLOCK on its side and filled the counter
 *   makes the write block: a tick (SIGUSR2 to the scanner thread every
 *   WRITE_TICK_NS while it may write) cuts it short with EINTR
 *   (BROKEN_STALL), and the main thread's backstop (police_backstop, every
 *   main-loop tick) interrupts one that the tick missed;
 * - once a user's write was cut, its other eventfds are checked for room
 *   before each write for CUT_WATCH_NS (the cut watch): the same attack on
 *   a new connection costs nobody a tick;
 * - each user writes its share of a pass, the rest carried to the next
 *   (fair-share.h), which bounds many moderately costly writes; a user
 *   carried past its share of every pass for FAIR_SHARE_DROP_NS with writes
 *   of FAIR_SHARE_DROP_WRITE_NS or more on average is dropped too
 *   (BROKEN_COST with cost_share set: decided where the pass carries it,
 *   scanner/drain.c scan_drop_if_over_share(), called where a pass or the
 *   imports carry a write).
 * What each reason means for the client and its user: broken.h.
 */
#ifndef CUFLAGD_WRITE_POLICE_H
#define CUFLAGD_WRITE_POLICE_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <time.h>

#include "policy/broken.h"
#include "policy/budget.h"

struct scanner_user;

#define WRITE_TICK_NS 2000000u
#define WRITE_STALL_NS (50u * 1000000u) /* the backstop's patience */
#define CUT_WATCH_NS (10ull * 1000000000u)

struct write_police {
	/* When the write in progress started (0: none), for the backstop. */
	_Atomic uint64_t write_since_ns;
	timer_t tick;
	int have_tick;
	int tick_on;
	_Atomic uint64_t writes; /* eventfd writes made */
	const struct write_budget_cfg *cfg; /* the scanner's, from police_start */
};

/* Process-wide, before the scanner thread starts: SIGUSR2 interrupts a
 * write (no SA_RESTART) and does nothing else. */
void police_install_signal(void);

/* In the scanner thread: its tick, armed; writes charged against cfg. */
void police_start(struct write_police *p, const struct write_budget_cfg *cfg);
void police_stop(struct write_police *p);
/* Tick on (the scanner may write) or off (it blocks for a while: parked, or
 * a long sleep, so that an idle daemon is not woken 500 times a second). */
void police_tick(struct write_police *p, int on);

/*
 * Write v to efd for user u, timed and charged.
 * BROKEN_NONE; BROKEN_COST when the write was made but took its user over
 * the budget; or, when it was not made, why the client must not be served any
 * more. *cost_ns: what the fair share charges for it: its CPU time for a
 * suspect, else its wall time up to the allowance (write-police.c).
 */
enum scanner_broken police_write(struct write_police *p, struct scanner_user *u, int efd,
				 uint64_t v, uint64_t *cost_ns);

/* Main thread, now and then: interrupt a write stalled past WRITE_STALL_NS
 * in thread (the tick should have cut it; this is the backstop). */
void police_backstop(struct write_police *p, pthread_t thread);

#endif
