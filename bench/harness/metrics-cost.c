/* SPDX-License-Identifier: MIT */
/*
 * What the daemon's metrics cost: the cuflagd
 * latency row's method and the throughput run against a daemon that times
 * every completion (the default) and one started with --no-metrics, in
 * rounds that alternate between them, so that whatever the machine does
 * meanwhile falls on both alike. Rows metrics-on and metrics-off; ratios
 * on/off of completions per second and of p50 and p99.
 *
 * perf-metrics-cost runs it alone; cuflag-bench --metrics-cost in its CPU run.
 */
#include <stdio.h>
#include <string.h>

#include "cuflag/cuflag.h"
#include "wake.h"

#define ROUNDS 3

/* One round of one variant: latency samples into lat, throughput added to t. */
static int one_round(const struct bench_opts *o, struct bench_lat *lat, struct bench_tput *t,
		     int off, unsigned samples)
{
	struct daemon_proc d;
	struct bench_tput run;
	cuflag_client *c = NULL;
	cuflag_slot *s = NULL;
	double cpu;
	int rc;

	if (bench_daemon_start_with(&d, o, o->scanner_mode, off ? "--no-metrics" : NULL)) {
		bench_lat_fail(lat, "cannot start cuflagd%s", off ? " --no-metrics" : "");
		t->failed = 1;
		return -1;
	}
	rc = cuflag_connect(d.sock, &c);
	if (!rc)
		rc = cuflag_slot_acquire(c, &s);
	if (rc)
		bench_lat_fail(lat, "cannot get a slot: %s", strerror(-rc));
	else
		bench_cpu_slot_wakes(s, lat, o->warmup, samples);
	if (s)
		cuflag_slot_release(s);
	cuflag_disconnect(c);

	memset(&run, 0, sizeof(run));
	cpu = bench_cpu_tput(o, &run, &d);
	bench_daemon_stop(&d);
	if (run.failed) {
		t->failed = 1;
		snprintf(t->why, sizeof(t->why), "%s", run.why);
		return -1;
	}
	t->procs = run.procs;
	t->per_proc = run.per_proc;
	t->completions += run.completions;
	t->seconds += run.seconds;
	t->per_s = t->seconds > 0 ? (double)t->completions / t->seconds : 0;
	if (cpu >= 0 && t->daemon_cpu_ms >= 0)
		t->daemon_cpu_ms += cpu;
	else
		t->daemon_cpu_ms = -1;
	return lat->failed ? -1 : 0;
}

int bench_metrics_cost(const struct bench_opts *o, struct bench_report *r)
{
	static const char *const names[2] = { "metrics-on", "metrics-off" };
	struct bench_lat *lat[2];
	struct bench_tput *t[2];
	unsigned per_round = o->iterations / ROUNDS ? o->iterations / ROUNDS : 1;
	int failed = 0;

	for (int v = 0; v < 2; v++) {
		lat[v] = bench_lat_add(r, names[v], per_round * ROUNDS);
		t[v] = bench_tput_add(r, names[v]);
		t[v]->daemon_cpu_ms = 0; /* summed over the rounds */
	}
	for (int round = 0; round < ROUNDS; round++)
		for (int v = 0; v < 2; v++)
			if (!lat[v]->failed && !t[v]->failed)
				failed |= one_round(o, lat[v], t[v], v, per_round) != 0;
	bench_ratio_tput(r, "metrics-on/metrics-off", "metrics-on", "metrics-off");
	bench_ratio_lat(r, "metrics-on_p50/metrics-off_p50", "metrics-on", "metrics-off", 0);
	bench_ratio_lat(r, "metrics-on_p99/metrics-off_p99", "metrics-on", "metrics-off", 1);
	return failed;
}
