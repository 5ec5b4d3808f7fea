/* SPDX-License-Identifier: MIT */
/* The GPU mode of cuflag-bench: its parts beyond gpu/cu.h. */
#ifndef CUFLAG_BENCH_GPU_H
#define CUFLAG_BENCH_GPU_H

#include "cu.h"

/* gpu-tput.c: throughput rows (flag-write ceiling, hostfunc, cuflagd). */
struct bench_opts;
struct bench_report;
struct bench_daemon;
void gpu_throughput(const struct bench_opts *o, struct bench_report *r,
		    const struct bench_daemon *d);

#endif
