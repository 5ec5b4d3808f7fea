/* SPDX-License-Identifier: MIT */
/* Timeline arithmetic, including wrap-around at 2^32. */
#undef NDEBUG
#include <check.h>
#include <stdint.h>
#include <stdlib.h>

#include "timeline.h"
#include "unit-run.h"

START_TEST(test_order)
{
	ck_assert(cuflag_tl_after(2, 1));
	ck_assert(!cuflag_tl_after(1, 2));
	ck_assert(!cuflag_tl_after(5, 5));
	ck_assert(cuflag_tl_reached(5, 5));
	ck_assert(!cuflag_tl_reached(4, 5));
}
END_TEST

START_TEST(test_wrap)
{
	/* 0 and 1 come after 0xffffffff: the counter wrapped. */
	ck_assert(cuflag_tl_after(0u, 0xffffffffu));
	ck_assert(cuflag_tl_after(1u, 0xfffffff0u));
	ck_assert(!cuflag_tl_after(0xfffffff0u, 1u));
	ck_assert_uint_eq(cuflag_tl_min(3u, 0xfffffffeu), 0xfffffffeu);
	ck_assert_uint_eq(cuflag_tl_due(2u, 5u, 0xfffffffeu), 4u);
	/* Exactly 2^31 apart is "not after" either way: the limit of the window. */
	ck_assert(!cuflag_tl_after(0x80000000u, 0u));
	ck_assert(cuflag_tl_after(0x7fffffffu, 0u));
}
END_TEST

START_TEST(test_due_clamped_to_armed)
{
	/* A flag past every armed value counts only what was armed. */
	ck_assert_uint_eq(cuflag_tl_due(1000u, 3u, 0u), 3u);
	/* A flag behind what was signalled counts nothing. */
	ck_assert_uint_eq(cuflag_tl_due(1u, 10u, 5u), 0u);
	ck_assert_uint_eq(cuflag_tl_due(7u, 10u, 5u), 2u);
	/* Garbage far ahead (or read as "behind" after 2^31) never inflates. */
	ck_assert_uint_eq(cuflag_tl_due(0x90000000u, 10u, 5u), 0u);
}
END_TEST

START_TEST(test_due_exhaustive_small)
{
	/* Against a 64-bit model near the wrap point. */
	const uint64_t base = 0xfffffff0ull;
	for (uint64_t sig = 0; sig < 40; sig++)
		for (uint64_t arm = sig; arm < sig + 40; arm++)
			for (uint64_t fl = sig; fl < sig + 60; fl++) {
				uint64_t want = (fl < arm ? fl : arm) - sig;
				uint32_t got = cuflag_tl_due((uint32_t)(base + fl),
							     (uint32_t)(base + arm),
							     (uint32_t)(base + sig));
				ck_assert_uint_eq(got, want);
			}
}
END_TEST

int main(void)
{
	const TTest *tests[] = {
		test_order,
		test_wrap,
		test_due_clamped_to_armed,
		test_due_exhaustive_small,
		NULL,
	};

	return unit_run("timeline", tests);
}
