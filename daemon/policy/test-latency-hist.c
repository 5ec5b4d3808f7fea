/* SPDX-License-Identifier: MIT */
/* The arm -> done histogram (daemon/policy/latency-hist.c). */
#undef NDEBUG
#include <check.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "policy/latency-hist.h"
#include "unit-run.h"

#define US 1000ull
#define MS 1000000ull

/* Every fine bucket follows the one before it with no gap, and is at most
 * 1/16 of its lower edge wide (64 ns below 1024 ns). */
START_TEST(test_fine_buckets_tile)
{
	uint64_t next = 0;

	for (unsigned i = 0; i < LHIST_NFINE; i++) {
		uint64_t lo = lhist_fine_lower(i), w = lhist_fine_width(i);
		ck_assert_uint_eq(lo, next);
		ck_assert_uint_eq(lhist_fine_index(lo), i);
		ck_assert_uint_eq(lhist_fine_index(lo + w - 1), i);
		if (lo >= 1024)
			ck_assert_uint_le(w * 16, lo);
		else
			ck_assert_uint_eq(w, 64);
		next = lo + w;
	}
	/* Beyond 2^41 ns: the last bucket. */
	ck_assert_uint_eq(lhist_fine_index(UINT64_MAX), LHIST_NFINE - 1);
	ck_assert_uint_eq(lhist_fine_index(1ull << 45), LHIST_NFINE - 1);
}
END_TEST

/* The fixed bounds: a value equal to a bound is in it, one above is in the next. */
START_TEST(test_fixed_bounds_exact)
{
	ck_assert_uint_eq(lhist_fixed_index(0), 0);
	for (unsigned j = 0; j < LHIST_NBOUNDS; j++) {
		ck_assert_uint_eq(lhist_fixed_index(lhist_bounds_ns[j]), j);
		ck_assert_uint_eq(lhist_fixed_index(lhist_bounds_ns[j] + 1), j + 1);
		if (j)
			ck_assert_uint_ge(lhist_bounds_ns[j], 2 * lhist_bounds_ns[j - 1]);
	}
	ck_assert_uint_eq(lhist_fixed_index(UINT64_MAX), LHIST_NBOUNDS);
}
END_TEST

static unsigned bound_of(uint64_t ns)
{
	for (unsigned j = 0; j < LHIST_NBOUNDS; j++)
		if (lhist_bounds_ns[j] == ns)
			return j;
	ck_abort_msg("no bound %llu", (unsigned long long)ns);
	return 0;
}

/* 1 ms and 2 ms, 10 ms and 20 ms land in different fixed buckets. */
START_TEST(test_fixed_tell_apart)
{
	struct latency_hist *h = calloc(1, sizeof(*h));
	struct lhist_snap s;

	lhist_record(h, 1 * MS + 20 * US, 3);
	lhist_record(h, 2 * MS + 20 * US, 5);
	lhist_record(h, 10 * MS + 20 * US, 7);
	lhist_record(h, 20 * MS + 20 * US, 11);
	lhist_snapshot(h, &s);
	ck_assert_uint_eq(s.count, 26);
	ck_assert_uint_eq(s.fixed[bound_of(2 * MS)], 3);
	ck_assert_uint_eq(s.fixed[bound_of(5 * MS)], 5);
	ck_assert_uint_eq(s.fixed[bound_of(20 * MS)], 7);
	ck_assert_uint_eq(s.fixed[bound_of(50 * MS)], 11);
	ck_assert_uint_eq(s.sum_ns, 3 * (1 * MS + 20 * US) + 5 * (2 * MS + 20 * US) +
					    7 * (10 * MS + 20 * US) + 11 * (20 * MS + 20 * US));
	free(h);
}
END_TEST

/* Quantiles within 20 us or 5 %, whichever is larger, over a wide spread. */
START_TEST(test_quantiles_accurate)
{
	static const uint64_t vals[] = { 0, 700, 3 * US, 14 * US, 90 * US, 333 * US, 1 * MS + 7,
					 47 * MS, 1234 * MS, 1000000 * MS };

	for (unsigned k = 0; k < sizeof(vals) / sizeof(vals[0]); k++) {
		struct latency_hist *h = calloc(1, sizeof(*h));
		struct lhist_snap s;
		uint64_t v = vals[k], q, err, allowed;

		lhist_record(h, v, 1000);
		lhist_snapshot(h, &s);
		q = lhist_quantile(&s, 0.5);
		err = q > v ? q - v : v - q;
		allowed = v / 20 > 20 * US ? v / 20 : 20 * US;
		ck_assert_msg(err <= allowed, "%llu: p50 %llu", (unsigned long long)v,
			      (unsigned long long)q);
		free(h);
	}
}
END_TEST

/* p50 and p99 of a mixture: 98 fast ones, 2 slow ones. */
START_TEST(test_quantile_ranks)
{
	struct latency_hist *h = calloc(1, sizeof(*h));
	struct lhist_snap s;
	uint64_t p50, p99, p100;

	lhist_record(h, 15 * US, 98);
	lhist_record(h, 8 * MS, 2);
	lhist_snapshot(h, &s);
	p50 = lhist_quantile(&s, 0.5);
	p99 = lhist_quantile(&s, 0.99);
	p100 = lhist_quantile(&s, 1.0);
	ck_assert_uint_ge(p50, 14 * US);
	ck_assert_uint_le(p50, 16 * US);
	ck_assert_uint_ge(p99, 7600 * US);
	ck_assert_uint_le(p99, 8400 * US);
	ck_assert_uint_eq(p99, p100);
	/* Empty: 0. */
	memset(&s, 0, sizeof(s));
	ck_assert_uint_eq(lhist_quantile(&s, 0.5), 0);
	free(h);
}
END_TEST

/* The scanner's hook: the wait starts at *since, restarts at each completion,
 * and a slot not waiting (0) records nothing. */
START_TEST(test_slot_done)
{
	struct latency_hist *h = calloc(1, sizeof(*h));
	struct lhist_snap s, t;
	_Atomic uint64_t since = 5 * MS;

	lhist_slot_done(h, &since, 6 * MS, 2);
	ck_assert_uint_eq(atomic_load(&since), 6 * MS);
	lhist_slot_done(h, &since, 6 * MS + 30 * US, 1);
	atomic_store(&since, 0);
	lhist_slot_done(h, &since, 9 * MS, 1);
	lhist_snapshot(h, &s);
	ck_assert_uint_eq(s.count, 3);
	ck_assert_uint_eq(s.fixed[bound_of(1 * MS)], 2);
	ck_assert_uint_eq(s.fixed[bound_of(50 * US)], 1);
	ck_assert_uint_eq(s.sum_ns, 2 * MS + 30 * US);
	/* Merged twice: everything doubles. */
	memset(&t, 0, sizeof(t));
	lhist_merge(&t, &s);
	lhist_merge(&t, &s);
	ck_assert_uint_eq(t.count, 6);
	ck_assert_uint_eq(t.fixed[bound_of(1 * MS)], 4);
	ck_assert_uint_eq(lhist_quantile(&t, 0.5), lhist_quantile(&s, 0.5));
	free(h);
}
END_TEST

int main(void)
{
	const TTest *const tests[] = { test_fine_buckets_tile, test_fixed_bounds_exact,
					      test_fixed_tell_apart,  test_quantiles_accurate,
					      test_quantile_ranks,    test_slot_done,
					      NULL };
	return unit_run("latency-hist", tests);
}
