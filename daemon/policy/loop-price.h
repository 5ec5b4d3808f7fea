/* SPDX-License-Identifier: MIT */
/*
 * What a request costs the main loop, and how much of it a user may have.
 *
 * The main loop is shared by every user: a request that walks every slot of
 * a user (STUCK), every client (CLIENTS, METRICS) or sends many messages
 * takes loop time from everybody else's HELLO, ATTACH and root's status. So
 * a request is priced by the work it causes, not by its count: sessions and
 * slots walked, messages and bytes sent, each at what it costs on the loop
 * (a price in nanoseconds of loop time, from counts: a step that was
 * preempted is not charged more, and a test can reckon it exactly).
 *
 * Each user has a bucket of loop time, refilled at a rate and holding at
 * most a burst; a step of its work is charged after it ran, so the bucket
 * may go below zero by at most one step. A user below zero is over budget:
 * its long answers are not stepped and its connections not read until the
 * refill brings it back to zero. Root and the admin group are not charged.
 * Pure functions: the loop that applies them is answer.c.
 */
#ifndef CUFLAGD_LOOP_PRICE_H
#define CUFLAGD_LOOP_PRICE_H

#include <stdint.h>

/* The work one step (or one request) caused. */
struct loop_work {
	uint32_t requests; /* messages received and dispatched */
	uint32_t sessions; /* sessions looked at in a walk of the registry */
	uint64_t slots;    /* slots looked at (a stuck scan reads each one's stamp) */
	uint32_t msgs;     /* messages sent */
	uint64_t bytes;    /* bytes sent, headers included */
	uint32_t efds;     /* eventfds made (and closed later, by the closer) */
	uint32_t fds_sent; /* fds passed in replies */
	uint32_t fds_in;   /* fds received (each closed by the closer, now or later) */
};

/* Loop time, in ns, of each unit of work: a receive and dispatch, a session
 * visited (a pointer chase and a few loads), a slot's stamp read (its
 * scanner record is a cache line of its own: a walk of a user's slots
 * misses the cache on each), a send (a system call), and a byte copied into
 * the socket; and the fds a request makes the daemon handle, whichever
 * thread does it: an eventfd made with its slot (the main thread's eventfd(),
 * slot bookkeeping, scanner commands and send: 4 us) and closed once freed
 * by a closer thread (its hand-over and close: 4 us), an fd passed in a
 * reply beyond that, and an fd received and closed by a closer. Measured on
 * the 2-CPU machine of docs/RELIABILITY.md under attack request-price: the
 * main thread at 490 ms/s and the closers at 480 ms/s for 122 000 eventfds a
 * second made, sent and closed. The closers' work is priced here, charged to
 * the user whose fds they close: a request that makes or hands over many fds
 * costs what they cost, not a flat request's price (ALLOC of 64 slots: 64
 * eventfds made, sent and closed, half a millisecond). */
struct loop_prices {
	uint32_t request_ns, session_ns, slot_ns, msg_ns, byte_ps; /* byte: picoseconds */
	uint32_t efd_ns, fd_sent_ns, fd_in_ns;
};
#define LOOP_PRICES_DEFAULT                                                                \
	((struct loop_prices){ .request_ns = 1500, .session_ns = 20, .slot_ns = 10,           \
			       .msg_ns = 1500, .byte_ps = 250, .efd_ns = 8000,                 \
			       .fd_sent_ns = 200, .fd_in_ns = 4000 })

/* A user's share of the loop: rate_ns of loop time each second, up to
 * burst_ns saved. */
struct loop_budget_cfg {
	uint64_t rate_ns;
	uint64_t burst_ns;
};
/* A twentieth of a core for each user, as much saved: one user's listing of
 * a thousand clients fits in its burst several times over, and a user
 * flooding the loop with walks takes a twentieth of it. */
#define LOOP_BUDGET_DEFAULT ((struct loop_budget_cfg){ .rate_ns = 50000000, .burst_ns = 50000000 })

struct loop_budget {
	int64_t tokens_ns; /* below 0: over budget */
	uint64_t at_ns;    /* when it was last refilled */
};

/* What w costs, in ns of loop time. */
uint64_t loop_price_ns(const struct loop_prices *p, const struct loop_work *w);

/* A full bucket, as a new user gets. */
void loop_budget_init(struct loop_budget *b, const struct loop_budget_cfg *c, uint64_t now_ns);
/* Refill for the time since the last refill (a clock going back refills
 * nothing). */
void loop_budget_refill(struct loop_budget *b, const struct loop_budget_cfg *c, uint64_t now_ns);
/* Take cost_ns from the bucket (it may go below zero, down to -burst). */
void loop_budget_charge(struct loop_budget *b, const struct loop_budget_cfg *c, uint64_t cost_ns);
/* Whether the user is over budget now (refill first). */
int loop_budget_over(const struct loop_budget *b);
/* How long until an over-budget bucket is back to zero, in ns (0: it is not
 * over). */
uint64_t loop_budget_wait_ns(const struct loop_budget *b, const struct loop_budget_cfg *c);

/* Which answers and connections the loop serves first: root and the admin
 * group, then users within budget; users over budget wait. */
enum loop_lane {
	LANE_ADMIN = 0,
	LANE_USER = 1,
	LANE_OVER = 2, /* not served until its budget is back */
};
enum loop_lane loop_lane_of(int admin, const struct loop_budget *b);

/* The work one step of a long answer may do before it yields: so that no
 * user's answer holds the loop longer than step_ns at a time. Given what
 * one unit of each kind costs, how many slots a step may walk. */
uint64_t loop_step_slots(const struct loop_prices *p, uint64_t step_ns);

/* One step's bound in loop time, and how long the loop spends on long answers
 * before it looks at its sockets again. */
#define LOOP_STEP_NS 50000u
#define LOOP_SLICE_NS 1000000u

#endif
