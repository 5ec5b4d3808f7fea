/* SPDX-License-Identifier: MIT */
/* The GPU mode's rows of signals from inside a running kernel (gpu-devsig.c). */
#ifndef CUFLAG_BENCH_GPU_DEVSIG_H
#define CUFLAG_BENCH_GPU_DEVSIG_H

#include "bench.h"
#include "cu.h"

/* Latency rows beside the persistent-kernel floor and the launch + memop
 * path, the devsig-1M throughput row, the ratios against their targets;
 * whether any failed. */
int gpu_devsig(const struct bench_opts *o, struct bench_report *r, struct gpu_dev *dev,
	       const struct daemon_proc *d);

#endif
