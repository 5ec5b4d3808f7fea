/* SPDX-License-Identifier: MIT */
/*
 * The monotonic clock, in the units the code measures with. CLOCK_MONOTONIC
 * does not jump with the wall clock, so intervals and deadlines stay right
 * across a settimeofday or an NTP step.
 */
#ifndef CUFLAG_CLOCK_H
#define CUFLAG_CLOCK_H

#include <stdint.h>
#include <time.h>

/* Nanoseconds since an arbitrary start (boot, on Linux). */
static inline uint64_t cuflag_now_ns(void)
{
	struct timespec ts;

	/* Cannot fail for CLOCK_MONOTONIC with a valid pointer. */
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static inline uint64_t cuflag_now_us(void)
{
	return cuflag_now_ns() / 1000u;
}

static inline uint64_t cuflag_now_ms(void)
{
	return cuflag_now_ns() / 1000000u;
}

#endif
