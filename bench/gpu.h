/* SPDX-License-Identifier: MIT */
/* The GPU mode of cuflag-bench: its parts beyond gpu/cu.h. */
#ifndef CUFLAG_BENCH_GPU_H
#define CUFLAG_BENCH_GPU_H

#include "cu.h"

/* gpu-tput.c: throughput rows (flag-write ceiling, hostfunc, cuflagd). */
struct bench_opts;
struct bench_report;
struct daemon_proc;
void gpu_throughput(const struct bench_opts *o, struct bench_report *r,
		    const struct daemon_proc *d);

/* gpu-devsig.c: signals from inside a running kernel: latency rows beside
 * the persistent-kernel floor and the launch + memop path, the devsig-1M
 * throughput row, the ratios against their targets; whether any failed. */
int gpu_devsig(const struct bench_opts *o, struct bench_report *r, struct gpu_dev *dev,
	       const struct daemon_proc *d);

#endif
