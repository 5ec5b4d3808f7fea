/* SPDX-License-Identifier: MIT */
/* cuflagctl top's rates: from one snapshot each, measured by the daemon's
 * own clock, never over a few milliseconds. */
#undef NDEBUG
#include <check.h>
#include <stdint.h>
#include <stdlib.h>

#include "top-rates.h"
#include "unit-run.h"

static struct cuflag_metrics_daemon at(uint64_t uptime_ms, uint64_t armed, uint64_t done)
{
	return (struct cuflag_metrics_daemon){ .kind = CUFLAG_METRICS_DAEMON, .uptime_ms = uptime_ms,
					       .armed = armed, .completions = done,
					       .wakes = done, .scanner_cpu_ns = uptime_ms * 1000 };
}

START_TEST(test_steady_load)
{
	/* 1000 arms and completions a second; the two answers came 1.3 s
	 * apart, the daemon took them 1.0 s apart: its clock is the one. */
	struct cuflag_metrics_daemon a = at(10000, 50000, 49990), b = at(11000, 51000, 50990);
	struct top_rates r = top_rates(&a, &b);

	ck_assert(r.valid);
	ck_assert_double_eq_tol(r.seconds, 1.0, 1e-9);
	ck_assert_double_eq_tol(r.arms, 1000, 1e-6);
	ck_assert_double_eq_tol(r.done, 1000, 1e-6);
	ck_assert_double_eq_tol(r.cpu_pct, 0.1, 1e-9);
}
END_TEST

START_TEST(test_early_frame_keeps_its_baseline)
{
	/* A key pressed 5 ms after a frame: a few completions and no arm in
	 * that window would read "arms/s 0, done/s 800". The baseline stays,
	 * so the frame after is measured over a full interval. */
	struct cuflag_metrics_daemon a = at(10000, 50000, 49990), early = at(10005, 50000, 49994);
	struct cuflag_metrics_daemon next = at(11000, 51000, 50990);

	ck_assert(!top_next_baseline(&a, &early));
	ck_assert(top_next_baseline(&a, &next));
	struct top_rates r = top_rates(&a, &next);
	ck_assert_double_eq_tol(r.arms, 1000, 1e-6);
	ck_assert_double_eq_tol(r.done, 1000, 1e-6);
}
END_TEST

START_TEST(test_restart_and_no_interval)
{
	struct cuflag_metrics_daemon a = at(10000, 50000, 49990), b = at(200, 10, 9);

	ck_assert(!top_rates(&a, &b).valid);
	ck_assert(top_next_baseline(&a, &b)); /* the new daemon's counters start anew */
	ck_assert(!top_rates(&a, &a).valid);
	ck_assert_double_eq(top_rate(10, 5, 1.0), 0);
}
END_TEST

int main(void)
{
	const TTest *tests[] = {
		test_steady_load,
		test_early_frame_keeps_its_baseline,
		test_restart_and_no_interval,
		NULL,
	};

	return unit_run("top-rates", tests);
}
