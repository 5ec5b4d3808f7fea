/* SPDX-License-Identifier: MIT */
/*
 * cuflag-bench: the published tables, cuflag against its baselines in one
 * run. Its modes and the scanner-cost rows; everything they measure with
 * comes from the harness it shares with the experiments (bench/harness/perf.h).
 */
#ifndef CUFLAG_BENCH_H
#define CUFLAG_BENCH_H

#include "perf.h"

/* cpu.c, gpu.c: the two modes; return an exit status. */
int bench_cpu_run(const struct bench_opts *o, struct bench_report *r);
int bench_gpu_run(const struct bench_opts *o, struct bench_report *r);
/* gpu-tput.c: the hidden throughput worker (--gpu-worker). */
int bench_gpu_worker(int argc, char **argv);
/* The consumer process of the cross-process rows (gpu-xproc.c): argv
 * --xproc-consumer SOCKET, its end of the socket pair on fd 3. */
int bench_xproc_consumer(int argc, char **argv);

/* idle.c: fill idle_pct with the daemon's CPU while P clients x S slots sit idle. */
void bench_idle_cpu(const struct bench_opts *o, struct bench_report *r,
		    const struct daemon_proc *d);

/* connect.c: connect-warm and connect-autospawn (cpu mode), in a runtime
 * directory of their own with no node daemon; 0 or -1. */
int bench_connect_run(const struct bench_opts *o, struct bench_report *r);

/* paced.c: the scanner-cost rows (cpu mode), against a daemon of each
 * --scanner-mode spawned for them; 0 or -1. */
int bench_paced_run(const struct bench_opts *o, struct bench_report *r);
void bench_paced_ratios(struct bench_report *r);
/* What the scanner did between two STATS a and b, per completion of n:
 * out's wakeups, sleeps, spin_us and timer_late_us (gpu-paced.c's rows too). */
struct cuflag_msg_stats_reply;
void bench_paced_breakdown(struct bench_paced *out, const struct cuflag_msg_stats_reply *a,
			   const struct cuflag_msg_stats_reply *b, uint64_t n);

#endif
