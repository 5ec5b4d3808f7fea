/* SPDX-License-Identifier: MIT */
/* The GPU mode's cross-process rows (gpu-xproc.c). */
#ifndef CUFLAG_BENCH_GPU_XPROC_H
#define CUFLAG_BENCH_GPU_XPROC_H

#include "bench.h"
#include "gpu-gate.h"

/* Completions across processes, timed through the gate of L: a consumer
 * process waiting for this one's stream: a blocked host wake (an exported
 * slot, a CUDA IPC event, a polled word) and a stream's wait on the GPU
 * (cuflag_cuda_wait, cuStreamWaitEvent on the IPC event), with their
 * ratios. 0 or -1. */
int gpu_xproc(const struct bench_opts *o, struct bench_report *r, struct gpu_lat *L,
	      const struct daemon_proc *d);

#endif
