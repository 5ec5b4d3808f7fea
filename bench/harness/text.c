/* SPDX-License-Identifier: MIT */
/* The report as tables for people (--json: json.c). */
#include <stdio.h>

#include "perf.h"

static void print_scale(const struct bench_scale *s)
{
	printf("\nScale\n");
	printf("  %s: %u idle processes x %u slots connected; scale-1x1: nobody else\n",
	       s->row, s->clients, s->slots);
	if (s->note[0])
		printf("  note: %s\n", s->note);
	if (s->exact)
		printf("  armed-%llu: all %llu complete in %.1f ms (%u processes x %u slots, "
		       "each signalled exactly once)\n",
		       (unsigned long long)(s->armed >= BENCH_SCALE_ARMED ? BENCH_SCALE_ARMED : s->armed),
		       (unsigned long long)s->armed, s->complete_ms, s->armed_procs,
		       s->armed_per_proc);
	else
		printf("  armed-%llu: not measured: %s\n", (unsigned long long)s->armed,
		       s->why[0] ? s->why : "no run");
}

static void print_paced(const struct bench_report *r)
{
	printf("\nScanner cost (paced completions, a daemon per --scanner-mode)\n");
	printf("  %-20s %10s %10s %12s %12s %9s %9s %9s %8s\n", "run", "asked/s", "done/s",
	       "% of a core", "us/compl", "wakes/c", "sleeps/c", "spin us/c", "late us");
	for (int m = 0; m < 2; m++)
		for (int k = 0; k < BENCH_PACED_RATES; k++) {
			const struct bench_paced *p = &r->paced[m][k];
			if (p->per_s < 0) {
				printf("  %-20s  not measured: %s\n", p->name, p->row->why);
				continue;
			}
			printf("  %-20s %10u %10.0f ", p->name, p->rate, p->per_s);
			if (p->pct_core >= 0)
				printf("%12.1f %12.3f", p->pct_core, p->us_per_completion);
			else
				printf("%12s %12s", "-", "-");
			if (p->wakeups >= 0)
				printf(" %9.2f %9.2f %9.1f %8.1f\n", p->wakeups, p->sleeps,
				       p->spin_us, p->timer_late_us);
			else
				printf(" %9s %9s %9s %8s\n", "-", "-", "-", "-");
		}
}

static void print_daemon_cpu(const struct bench_report *r)
{
	printf("\nDaemon CPU\n");
	if (r->have_daemon_cpu) {
		printf("  pid %d: %.3f us of CPU per completion (throughput run)\n",
		       (int)r->daemon_pid, r->us_per_completion);
		printf("  idle, %u clients connected, nothing armed: %.2f%% of a core over %.1f s\n",
		       r->idle_clients, r->idle_pct, r->idle_seconds);
	} else {
		printf("  not measured (the daemon's CPU time is not readable from /proc)\n");
	}
}

void bench_print_text(const struct bench_report *cr)
{
	/* Percentiles sort the samples in place. */
	struct bench_report *r = (struct bench_report *)cr;
	const char *unit = r->mode[0] == 'g' ? "streams" : "slots";

	printf("%s\n", r->title);
	if (r->nlat) {
		printf("\nWake latency (us)\n");
		printf("  %-17s %9s %9s %9s %9s %7s\n", "mechanism", "p50", "p90", "p99", "max",
		       "n");
	}
	for (size_t i = 0; i < r->nlat; i++) {
		struct bench_lat *l = &r->lat[i];
		struct bench_pcts p;

		if (l->failed || !l->n) {
			printf("  %-17s  not measured: %s\n", l->name, l->failed ? l->why : "no samples");
			continue;
		}
		p = bench_lat_pcts(l);
		printf("  %-17s %9.1f %9.1f %9.1f %9.1f %7zu\n", l->name, p.p50, p.p90, p.p99, p.max,
		       l->n);
	}
	if (r->ntput) {
		printf("\nThroughput\n");
		printf("  %-19s %5s %7s %11s %8s %12s %14s %10s\n", "mechanism", "procs", unit,
		       "completions", "seconds", "per second", "daemon cpu ms", "us/compl");
		for (size_t i = 0; i < r->ntput; i++) {
			const struct bench_tput *t = &r->tput[i];

			if (t->failed) {
				printf("  %-19s  not measured: %s\n", t->name, t->why);
				continue;
			}
			printf("  %-19s %5u %7u %11llu %8.3f %12.0f ", t->name, t->procs, t->per_proc,
			       (unsigned long long)t->completions, t->seconds, t->per_s);
			if (t->daemon_cpu_ms >= 0)
				printf("%14.1f %10.3f\n", t->daemon_cpu_ms,
				       t->daemon_cpu_ms * 1000.0 / (double)t->completions);
			else
				printf("%14s %10s\n", "-", "-");
		}
	}
	if (r->cpu_section)
		print_daemon_cpu(r);
	if (r->arm_ran) {
		printf("\nArm cost (cuflag_slot_arm, scanner awake)\n");
		if (r->arm_1 >= 0)
			printf("  1 thread: %.2f M arms/s\n", r->arm_1 / 1e6);
		if (r->arm_8 >= 0)
			printf("  8 threads on 8 slots: %.2f M arms/s in all\n", r->arm_8 / 1e6);
		if (r->arm_8 < 0)
			printf("  not measured: %s\n", r->arm_why);
	}
	if (r->scale.ran)
		print_scale(&r->scale);
	if (r->have_paced)
		print_paced(r);
	if (r->connect_ran && r->connect_idle_pct >= 0)
		printf("\nA started user daemon, no client: %.2f%% of a core over %.1f s\n",
		       r->connect_idle_pct, r->connect_idle_s);
	printf("\nRatios\n");
	for (size_t i = 0; i < r->nratios; i++) {
		if (r->ratios[i].value >= 0)
			printf("  %-44s %8.2f\n", r->ratios[i].name, r->ratios[i].value);
		else
			printf("  %-44s %8s\n", r->ratios[i].name, "n/a");
	}
}
