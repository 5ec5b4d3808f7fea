/* SPDX-License-Identifier: MIT */
/*
 * The monotonic clock, in the units the code measures with. CLOCK_MONOTONIC
 * does not jump with the wall clock, so intervals and deadlines stay right
 * across a settimeofday or an NTP step. CPU time is read here too.
 */
#ifndef CUFLAG_CLOCK_H
#define CUFLAG_CLOCK_H

#include <stdint.h>
#include <time.h>

/* Nanoseconds on clock id: the monotonic clock below, or a CPU-time clock
 * (CLOCK_PROCESS_CPUTIME_ID, CLOCK_THREAD_CPUTIME_ID, a thread's from
 * pthread_getcpuclockid). 0 when it cannot be read (a thread gone). */
static inline uint64_t cuflag_clock_ns(clockid_t id)
{
	struct timespec ts;

	if (clock_gettime(id, &ts) < 0)
		return 0;
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* Nanoseconds since an arbitrary start (boot, on Linux). Reading
 * CLOCK_MONOTONIC cannot fail. */
static inline uint64_t cuflag_now_ns(void)
{
	return cuflag_clock_ns(CLOCK_MONOTONIC);
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
