/* SPDX-License-Identifier: MIT */
/* The GPU mode's paced rows (gpu-paced.c). */
#ifndef CUFLAG_BENCH_GPU_PACED_H
#define CUFLAG_BENCH_GPU_PACED_H

#include "bench.h"
#include "gpu-gate.h"

/* CPU per completion of each mechanism at paced rates, one 20 us piece of
 * work a period, timed through the gate of L; rows paced-MECH-RATE and their
 * CPU. d: the default daemon (a spinning one is started beside it). 0 or -1. */
int gpu_paced(const struct bench_opts *o, struct bench_report *r, struct gpu_lat *L,
	      const struct daemon_proc *d);

#endif
