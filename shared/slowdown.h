/* SPDX-License-Identifier: MIT */
/*
 * How much slower this build runs than the one it ships as. Builds under a
 * sanitizer run every memory access (TSan) or allocation and system call
 * (ASan) through instrumentation, many times slower, on the daemon's
 * threads and the test's alike. Limits that stand for "the daemon stopped
 * working" (a reply's timeout, a liveness bound in a test) and allowances
 * that stand for "this write cost too much" are scaled by it, so that a
 * test under a sanitizer measures the daemon, not the instrumentation.
 * Targets that stand for speed are never scaled: they are the benchmarks'
 * and the attack suite's, which run unsanitized.
 */
#ifndef CUFLAG_SLOWDOWN_H
#define CUFLAG_SLOWDOWN_H

#if defined(__SANITIZE_THREAD__) || defined(__SANITIZE_ADDRESS__)
#define CUFLAG_SLOWDOWN 20
#else
#define CUFLAG_SLOWDOWN 1
#endif

#endif
