/* SPDX-License-Identifier: MIT */
#include "policy/loop-price.h"

uint64_t loop_price_ns(const struct loop_prices *p, const struct loop_work *w)
{
	return (uint64_t)w->requests * p->request_ns + (uint64_t)w->sessions * p->session_ns +
	       w->slots * p->slot_ns + (uint64_t)w->msgs * p->msg_ns + w->bytes * p->byte_ps / 1000u +
	       (uint64_t)w->efds * p->efd_ns + (uint64_t)w->fds_sent * p->fd_sent_ns +
	       (uint64_t)w->fds_in * p->fd_in_ns;
}

void loop_budget_init(struct loop_budget *b, const struct loop_budget_cfg *c, uint64_t now_ns)
{
	b->tokens_ns = (int64_t)c->burst_ns;
	b->at_ns = now_ns;
}

void loop_budget_refill(struct loop_budget *b, const struct loop_budget_cfg *c, uint64_t now_ns)
{
	uint64_t dt, add;

	if (now_ns <= b->at_ns)
		return;
	dt = now_ns - b->at_ns;
	/* A second's worth at most: the bucket is full by then anyway, and
	 * the product cannot overflow. */
	if (dt > 1000000000u)
		dt = 1000000000u;
	add = dt * c->rate_ns / 1000000000u;
	if (!add)
		return; /* keep at_ns: small steps add up */
	b->at_ns = now_ns;
	b->tokens_ns += (int64_t)add;
	if (b->tokens_ns > (int64_t)c->burst_ns)
		b->tokens_ns = (int64_t)c->burst_ns;
}

void loop_budget_charge(struct loop_budget *b, const struct loop_budget_cfg *c, uint64_t cost_ns)
{
	int64_t floor = -(int64_t)c->burst_ns;

	if (cost_ns > c->burst_ns * 2)
		cost_ns = c->burst_ns * 2;
	b->tokens_ns -= (int64_t)cost_ns;
	if (b->tokens_ns < floor)
		b->tokens_ns = floor;
}

int loop_budget_over(const struct loop_budget *b)
{
	return b->tokens_ns < 0;
}

uint64_t loop_budget_wait_ns(const struct loop_budget *b, const struct loop_budget_cfg *c)
{
	if (b->tokens_ns >= 0 || !c->rate_ns)
		return 0;
	/* Rounded up: after this long the refill has brought it to zero. */
	return ((uint64_t)-b->tokens_ns * 1000000000u + c->rate_ns - 1) / c->rate_ns;
}

enum loop_lane loop_lane_of(int admin, const struct loop_budget *b)
{
	if (admin)
		return LANE_ADMIN;
	return loop_budget_over(b) ? LANE_OVER : LANE_USER;
}

uint64_t loop_step_slots(const struct loop_prices *p, uint64_t step_ns)
{
	uint64_t n = p->slot_ns ? step_ns / p->slot_ns : step_ns;

	return n ? n : 1;
}
