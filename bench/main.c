/* SPDX-License-Identifier: MIT */
/*
 * cuflag-bench: measure cuflag against its baselines in one run and print
 * latency percentiles, completions per second, daemon CPU and the ratios.
 * This file: the options of its own (the rest: bench/harness/opts.c), the run.
 */
#include <stdio.h>
#include <string.h>

#include "bench.h"

enum { O_MODE = 512, O_STREAMS, O_IDLE, O_PACED, O_NO_PACED, O_NO_SCALE, O_SCALE,
       O_SCALE_CLIENTS, O_METRICS_COST, O_SCALE_PENDING, O_NO_SCALE_PENDING };

static const struct option own[] = {
	{ "mode", required_argument, NULL, O_MODE },
	{ "streams", required_argument, NULL, O_STREAMS },
	{ "idle-ms", required_argument, NULL, O_IDLE },
	{ "paced", no_argument, NULL, O_PACED },
	{ "no-paced", no_argument, NULL, O_NO_PACED },
	/* Runs of tests/perf/ that this program can add to its CPU run. */
	{ "scale", no_argument, NULL, O_SCALE },
	{ "no-scale", no_argument, NULL, O_NO_SCALE },
	{ "scale-clients", required_argument, NULL, O_SCALE_CLIENTS },
	{ "metrics-cost", no_argument, NULL, O_METRICS_COST },
	{ "scale-pending", no_argument, NULL, O_SCALE_PENDING },
	{ "no-scale-pending", no_argument, NULL, O_NO_SCALE_PENDING },
	{ 0 },
};

static int parse_own(struct bench_opts *o, int c, const char *arg)
{
	unsigned long long v;

	switch (c) {
	case O_MODE:
		if (strcmp(arg, "cpu") && strcmp(arg, "gpu")) {
			fprintf(stderr, "cuflag-bench: --mode: '%s' is not cpu or gpu\n", arg);
			return 2;
		}
		o->mode = arg;
		return 0;
	case O_STREAMS:
		if (bench_parse_uint("--streams", arg, 1, 256, &v))
			return 2;
		o->streams = (unsigned)v;
		return 0;
	case O_IDLE:
		if (bench_parse_uint("--idle-ms", arg, 10, 600000, &v))
			return 2;
		o->idle_ms = (unsigned)v;
		return 0;
	case O_PACED:
	case O_NO_PACED:
		o->paced = c == O_PACED ? 1 : 0;
		return 0;
	case O_SCALE:
	case O_NO_SCALE:
		o->scale = c == O_SCALE;
		return 0;
	case O_SCALE_CLIENTS:
		return bench_scale_clients_opt(o, arg);
	case O_METRICS_COST:
		o->metrics_cost = 1;
		return 0;
	case O_SCALE_PENDING:
	case O_NO_SCALE_PENDING:
		o->scale_pending = c == O_SCALE_PENDING;
		return 0;
	default:
		return 2;
	}
}

static const struct bench_extra_opts extra = {
	own, parse_own,
	"  --mode cpu|gpu       simulated device (default) or a real GPU (CUDA Driver API)\n"
	"  --streams K          streams per process, gpu throughput (default 4)\n"
	"  --idle-ms N          how long the idle daemon CPU is measured (default 2000)\n"
	"  --paced, --no-paced  the cost at paced loads: cpu mode, the scanner's, a\n"
	"                       daemon per --scanner-mode; gpu mode, every mechanism's\n"
	"                       CPU per completion at 1 000 and 10 000/s (default on\n"
	"                       unless --iterations is below 100)\n"
	"  --scale, --no-scale  cpu mode: add perf-scale's run (latency with P idle\n"
	"                       processes x 1024 slots connected, ~10000 slots armed\n"
	"                       at once); default off\n"
	"  --scale-clients P    processes of the scale run (default 64)\n"
	"  --metrics-cost       cpu mode: add perf-metrics-cost's rows (a cuflagd with\n"
	"                       its metrics against one with --no-metrics)\n"
	"  --scale-pending, --no-scale-pending\n"
	"                       cpu mode: perf-scale-pending's rows scale-hot and\n"
	"                       scale-cold (a wake and the notice of long-pending slots\n"
	"                       with 16 x 12 x 1024 grouped slots pending, a cuflagd of\n"
	"                       their own; default on unless --iterations is below 100\n"
	"                       or --socket is given)\n",
};

int main(int argc, char **argv)
{
	static struct bench_report r;
	struct bench_opts o;
	char title[64];
	int rc;

	/* The GPU throughput runs re-execute this program as their workers. */
	if (argc > 1 && !strcmp(argv[1], "--gpu-worker"))
		return bench_gpu_worker(argc, argv);
	if (argc > 2 && !strcmp(argv[1], "--xproc-consumer"))
		return bench_xproc_consumer(argc, argv);
	rc = bench_opts_parse(&o, argc, argv,
			      "Measure cuflag against its baselines in one run: wake latency, "
			      "throughput,\ndaemon CPU, and the ratios between them.\n",
			      &extra);
	if (rc >= 0)
		return rc;
	if (o.mode[0] == 'g' && (o.scale || o.metrics_cost || o.scale_pending > 0)) {
		fprintf(stderr,
			"cuflag-bench: --scale, --metrics-cost, --scale-pending: cpu mode only\n");
		return 2;
	}
	/* The scanner-cost rows take a few seconds: on by default, not in a tiny run. */
	if (o.paced < 0)
		o.paced = o.iterations >= 100;
	/* So do the rows of others' pending work, which need a daemon of their
	 * own (not one at --socket). */
	if (o.scale_pending < 0)
		o.scale_pending = o.mode[0] == 'c' && o.iterations >= 100 && !o.socket;
	snprintf(title, sizeof(title), "cuflag-bench --mode %s", o.mode);
	r.mode = o.mode;
	r.title = title;
	r.opts = &o;
	rc = o.mode[0] == 'g' ? bench_gpu_run(&o, &r) : bench_cpu_run(&o, &r);
	if (rc == BENCH_EXIT_SKIP)
		return rc;
	return bench_finish(&r, rc);
}
