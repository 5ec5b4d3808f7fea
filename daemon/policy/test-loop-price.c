/* SPDX-License-Identifier: MIT */
/* The main loop's pricing of requests and each user's budget of loop time. */
#undef NDEBUG
#include <check.h>
#include <stdint.h>
#include <stdlib.h>

#include "policy/loop-price.h"
#include "unit-run.h"

#define S 1000000000ull
#define MS 1000000ull

START_TEST(test_price_counts_work)
{
	struct loop_prices p = LOOP_PRICES_DEFAULT;
	struct loop_work one = { .requests = 1 };
	struct loop_work walk = { .requests = 1, .sessions = 64, .slots = 65536 };
	struct loop_work sent = { .msgs = 2, .bytes = 8000 };

	ck_assert_uint_eq(loop_price_ns(&p, &one), p.request_ns);
	/* A STUCK over 64 clients of 1024 slots each costs what it walks. */
	ck_assert_uint_eq(loop_price_ns(&p, &walk),
			  p.request_ns + 64ull * p.session_ns + 65536ull * p.slot_ns);
	ck_assert_uint_eq(loop_price_ns(&p, &sent), 2ull * p.msg_ns + 8000ull * p.byte_ps / 1000);
	/* Many such walks cost many times one cheap request: priced by work. */
	ck_assert_uint_gt(loop_price_ns(&p, &walk), 100 * loop_price_ns(&p, &one));
}
END_TEST

START_TEST(test_price_counts_fds)
{
	struct loop_prices p = LOOP_PRICES_DEFAULT;
	struct loop_budget_cfg c = LOOP_BUDGET_DEFAULT;
	struct loop_work one = { .requests = 1 };
	/* ALLOC of 64 slots: 64 eventfds made and sent (and closed by a
	 * closer once freed); a FREE of them costs a request. */
	struct loop_work alloc = { .requests = 1, .efds = 64, .fds_sent = 64 };
	/* A message carrying the kernel's most fds, each received and closed. */
	struct loop_work given = { .requests = 1, .fds_in = 253 };
	uint64_t cycle = loop_price_ns(&p, &alloc) + loop_price_ns(&p, &one);

	ck_assert_uint_eq(loop_price_ns(&p, &alloc),
			  p.request_ns + 64ull * p.efd_ns + 64ull * p.fd_sent_ns);
	ck_assert_uint_eq(loop_price_ns(&p, &given), p.request_ns + 253ull * p.fd_in_ns);
	/* Priced by its fds, not as one request: 64 eventfds cost what they
	 * cost the daemon's threads (8 us each measured, main thread and
	 * closers), far more than a flat request. */
	ck_assert_uint_ge(p.efd_ns, 8000);
	ck_assert_uint_gt(loop_price_ns(&p, &alloc), 300 * loop_price_ns(&p, &one));
	ck_assert_uint_gt(loop_price_ns(&p, &given), 600 * loop_price_ns(&p, &one));
	/* So a user that allocates and frees 64 slots without end gets about
	 * a hundred such cycles a second (6 000 eventfds: the 50 ms of loop
	 * its share buys, and as much of the closers), not the 16 000 cycles
	 * its share bought at a flat request's price. */
	ck_assert_uint_lt(c.rate_ns / cycle, 120);
	ck_assert_uint_gt(c.rate_ns / cycle, 80);
	ck_assert_uint_gt(c.rate_ns / (2 * loop_price_ns(&p, &one)), 10000);
}
END_TEST

START_TEST(test_budget_refill_and_over)
{
	struct loop_budget_cfg c = { .rate_ns = 100 * MS, .burst_ns = 100 * MS };
	struct loop_budget b;
	uint64_t t = 5 * S;

	loop_budget_init(&b, &c, t);
	ck_assert(!loop_budget_over(&b));
	ck_assert_int_eq(loop_budget_wait_ns(&b, &c), 0);
	ck_assert_int_eq(loop_lane_of(0, &b), LANE_USER);
	/* Spend it all and one step more: over, for as long as the refill takes. */
	loop_budget_charge(&b, &c, 100 * MS);
	ck_assert(!loop_budget_over(&b));
	loop_budget_charge(&b, &c, 10 * MS);
	ck_assert(loop_budget_over(&b));
	ck_assert_int_eq(loop_lane_of(0, &b), LANE_OVER);
	ck_assert_int_eq(loop_lane_of(1, &b), LANE_ADMIN); /* root: never waits */
	ck_assert_uint_eq(loop_budget_wait_ns(&b, &c), 100 * MS);
	loop_budget_refill(&b, &c, t + 50 * MS);
	ck_assert(loop_budget_over(&b));
	ck_assert_uint_eq(loop_budget_wait_ns(&b, &c), 50 * MS);
	loop_budget_refill(&b, &c, t + 100 * MS);
	ck_assert(!loop_budget_over(&b));
	/* Never more than the burst, however long it waited. */
	loop_budget_refill(&b, &c, t + 3600 * S);
	ck_assert_int_eq(b.tokens_ns, (int64_t)c.burst_ns);
	/* A clock going back refills nothing. */
	loop_budget_charge(&b, &c, 150 * MS);
	loop_budget_refill(&b, &c, t);
	ck_assert_int_eq(b.tokens_ns, -50 * (int64_t)MS);
}
END_TEST

START_TEST(test_budget_debt_bounded)
{
	struct loop_budget_cfg c = { .rate_ns = 100 * MS, .burst_ns = 100 * MS };
	struct loop_budget b;

	/* However much one step cost, the debt is at most one burst: a user
	 * is never locked out for longer than a burst takes to refill. */
	loop_budget_init(&b, &c, 0);
	for (int i = 0; i < 100; i++)
		loop_budget_charge(&b, &c, 10 * S);
	ck_assert_int_eq(b.tokens_ns, -(int64_t)c.burst_ns);
	ck_assert_uint_eq(loop_budget_wait_ns(&b, &c), S);
}
END_TEST

START_TEST(test_small_refills_add_up)
{
	struct loop_budget_cfg c = { .rate_ns = 100 * MS, .burst_ns = 100 * MS };
	struct loop_budget b;

	/* Refills a few ns apart (a busy loop) must not each round to nothing. */
	loop_budget_init(&b, &c, 0);
	loop_budget_charge(&b, &c, 200 * MS);
	for (uint64_t t = 1; t <= 1000000; t += 5)
		loop_budget_refill(&b, &c, t);
	ck_assert_int_ge(b.tokens_ns, -(int64_t)(100 * MS) + 99000);
}
END_TEST

START_TEST(test_step_bound)
{
	struct loop_prices p = LOOP_PRICES_DEFAULT;
	uint64_t n = loop_step_slots(&p, LOOP_STEP_NS);
	struct loop_work w = { .slots = n };

	/* A step walks as many slots as fit its time, no more. */
	ck_assert_uint_ge(n, 1);
	ck_assert_uint_le(loop_price_ns(&p, &w), LOOP_STEP_NS);
	w.slots = n + 1;
	ck_assert_uint_gt(loop_price_ns(&p, &w), LOOP_STEP_NS - p.slot_ns);
	p.slot_ns = 0;
	ck_assert_uint_ge(loop_step_slots(&p, LOOP_STEP_NS), 1);
}
END_TEST

int main(void)
{
	const TTest *tests[] = {
		test_price_counts_work,
		test_price_counts_fds,
		test_budget_refill_and_over,
		test_budget_debt_bounded,
		test_small_refills_add_up,
		test_step_bound,
		NULL,
	};

	return unit_run("loop-price", tests);
}
