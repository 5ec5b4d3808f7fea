/* SPDX-License-Identifier: MIT */
/* The GPU mode's throughput rows (gpu-tput.c). */
#ifndef CUFLAG_BENCH_GPU_TPUT_H
#define CUFLAG_BENCH_GPU_TPUT_H

#include "bench.h"

/* Throughput rows (flag-write ceiling, hostfunc, cuflagd). */
void gpu_throughput(const struct bench_opts *o, struct bench_report *r,
		    const struct daemon_proc *d);

#endif
