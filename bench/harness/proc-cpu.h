/* SPDX-License-Identifier: MIT */
/* The one /proc reader of a process's CPU time that tests and the bench share. */
#ifndef CUFLAG_BENCH_PROC_CPU_H
#define CUFLAG_BENCH_PROC_CPU_H

#include <stdint.h>
#include <sys/types.h>

/* CPU time of every live thread of pid so far, in ns (schedstat: to the
 * nanosecond, where /proc/PID/stat counts clock ticks); -1 when pid is gone. */
int64_t proc_cpu_ns(pid_t pid);

#endif
