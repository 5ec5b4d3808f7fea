/* SPDX-License-Identifier: MIT */
/*
 * One process's share of a pending load: connections of grouped slots,
 * every slot armed once and held, its flag landing only when the caller
 * says; every completion is checked as its group is drained (one record of
 * one completion, of a slot whose flag landed, once). The attack
 * scale-pending and the bench's scale-pending rows are made of these.
 */
#ifndef CUFLAG_BENCH_PENDING_LOAD_H
#define CUFLAG_BENCH_PENDING_LOAD_H

#include <stdint.h>

#include "cuflag/cuflag.h"

struct pending_load {
	unsigned conns, slots; /* slots per connection (one group each) */
	unsigned n;            /* conns x slots */
	cuflag_client **c;
	cuflag_group **g;
	cuflag_slot **s;
	uint32_t *target;
	uint8_t *count, *landed;
	uint64_t rng;
	unsigned counted;      /* completions drained */
	int inexact, lost;     /* completions counted wrongly, never signalled */
	int step;              /* what failed: 1 connect, group or slots, 2 arm, 3 drain */
};

/* conns connections to sock, each with a group of slots grouped slots, each
 * slot armed once. 0, or -errno with l->step set (what was set up is
 * released by pending_load_close). */
int pending_load_arm(struct pending_load *l, const char *sock, unsigned conns, unsigned slots);
/* A random slot whose flag has not landed (at least one must be left). */
uint32_t pending_load_pick(struct pending_load *l);
/* Slot i's flag lands now: ns until its completion was drained, or 0 when
 * it was not within wait_ms (counted lost) or a drain failed. */
uint64_t pending_load_time_one(struct pending_load *l, uint32_t i, int wait_ms);
/*
 * Every other flag lands, per_ms a millisecond (0: all at once); waits up
 * to timeout_ms for their completions, 50 ms more for any that must not
 * come, then counts every slot not counted exactly once. 0, or -errno (a
 * drain failed).
 */
int pending_load_land_rest(struct pending_load *l, unsigned per_ms, int timeout_ms);
void pending_load_close(struct pending_load *l);

#endif
