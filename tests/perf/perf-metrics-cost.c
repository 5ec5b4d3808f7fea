/* SPDX-License-Identifier: MIT */
/*
 * What the daemon's metrics cost, alone (metrics-cost.c says how): rows
 * metrics-on and metrics-off, daemons of its own.
 *
 *   perf-metrics-cost [--iterations N] [--clients P] [--slots S] [--json] ...
 */
#include "perf.h"

int main(int argc, char **argv)
{
	static struct bench_report r;
	struct bench_opts o;
	int rc = bench_program_start(&r, &o, argc, argv,
				     "What the daemon's metrics cost: latency and throughput against "
				     "a cuflagd with\nits metrics and one with --no-metrics, "
				     "alternating.\n",
				     NULL);

	if (rc >= 0)
		return rc;
	if (o.socket) {
		bench_say("--socket: needs daemons of its own\n");
		return 2;
	}
	return bench_finish(&r, bench_metrics_cost(&o, &r));
}
