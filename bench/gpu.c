/* SPDX-License-Identifier: MIT */
/*
 * --mode gpu: the published GPU rows. Wake latency of each mechanism on a
 * real GPU, by the gate method (gpu-gate.c): the opener waits 50-150 us after
 * the waiter announced its wait, so blocked waiters are asleep; for
 * cuflagd-spin it waits 5 us, so the completion lands inside the 20 us spin
 * (the case the spin is for). Then (--paced) the same mechanisms at paced
 * rates, with their CPU per completion (gpu-paced.c); completions across
 * processes (gpu-xproc.c); signals from inside a kernel (gpu-devsig.c);
 * throughput (gpu-tput.c); the ratios.
 */
#include <stdio.h>

#include "bench.h"
#include "gpu-devsig.h"
#include "gpu-gate.h"
#include "gpu-paced.h"
#include "gpu-tput.h"
#include "gpu-xproc.h"

#define BLOCK 50 /* samples per turn */

static int gpu_latency(const struct bench_opts *o, struct bench_report *r, struct gpu_lat *L,
		       const struct daemon_proc *d)
{
	const char *sock = d->sock;
	unsigned total = o->warmup + o->iterations, done[G_COUNT] = { 0 };
	int failed = 0;

	if (gpu_lat_open(L, o, r, sock)) {
		gpu_lat_close(L);
		return -1;
	}
	for (int more = 1; more;) {
		more = 0;
		for (int k = 0; k < G_COUNT; k++) {
			struct gmech_state *m = &L->m[k];
			for (int b = 0; b < BLOCK && done[k] < total && !m->row->failed; b++) {
				double us;
				/* Blocked waiters asleep by then; cuflagd-spin's
				 * inside its spin, the case the spin is for. */
				uint64_t delay = m->kind == G_CUFLAGD_SPIN
							 ? 5000
							 : 50000 + bench_rand(&L->op.rng) % 100000;
				if (gpu_lat_sample(L, m, delay, &us))
					break;
				if (done[k]++ >= o->warmup)
					m->row->us[m->row->n++] = us;
			}
			if (done[k] < total && !m->row->failed)
				more = 1;
		}
	}
	if (o->paced > 0 && gpu_paced(o, r, L, d))
		failed = 1;
	if (gpu_xproc(o, r, L, d))
		failed = 1;
	gpu_lat_close(L);
	for (int k = 0; k < G_COUNT; k++)
		failed |= L->m[k].row->failed;
	return failed ? -1 : 0;
}

int bench_gpu_run(const struct bench_opts *o, struct bench_report *r)
{
	static struct gpu_lat L;
	struct daemon_proc d;
	int rc, failed = 0, ver = 0;

	rc = gpu_load();
	if (rc)
		return rc;
	if (gpu_dev_open(&L.dev, 0))
		return 1;
	cu.cuDriverGetVersion(&ver);
	if (!o->json)
		fprintf(stderr, "cuflag-bench: %s, driver API %d.%d\n", L.dev.name, ver / 1000,
			(ver % 1000) / 10);
	bench_armed_nofile(); /* before the daemon: it inherits the limit */
	if (bench_daemon_start(&d, o)) {
		gpu_dev_close(&L.dev);
		return 1;
	}
	r->daemon_pid = d.pid;
	r->cpu_section = 1;
	if (gpu_latency(o, r, &L, &d))
		failed = 1;
	failed |= gpu_devsig(o, r, &L.dev, &d);
	gpu_dev_close(&L.dev);
	gpu_throughput(o, r, &d);
	for (size_t i = 0; i < r->ntput; i++)
		failed |= r->tput[i].failed;
	if (r->have_daemon_cpu)
		bench_idle_cpu(o, r, &d);
	bench_daemon_stop(&d);

	bench_ratio_lat(r, "cuflagd_p50/hostfunc_p50", "cuflagd", "hostfunc", 0);
	bench_ratio_lat(r, "cuflagd_p99/hostfunc_p99", "cuflagd", "hostfunc", 1);
	bench_ratio_lat(r, "cuflagd-spin_p50/spin-floor_p50", "cuflagd-spin", "spin-floor", 0);
	bench_ratio_lat(r, "cuflagd_p50/event-blocking_p50", "cuflagd", "event-blocking", 0);
	bench_ratio_lat(r, "cuflagd_p50/inproc-scanner_p50", "cuflagd", "inproc-scanner", 0);
	bench_ratio_tput(r, "throughput_cuflagd/hostfunc", "cuflagd", "hostfunc");
	bench_ratio_tput(r, "throughput_cuflagd/ceiling", "cuflagd", "flag-ceiling");
	bench_ratio_tput(r, "throughput_cuflagd-bare/hostfunc-bare", "cuflagd-bare",
			 "hostfunc-bare");
	bench_ratio_tput(r, "throughput_cuflagd-bare/ceiling-bare", "cuflagd-bare",
			 "flag-ceiling-bare");
	bench_group_ratios(r);
	return failed;
}
