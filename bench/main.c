/* SPDX-License-Identifier: MIT */
/*
 * cuflag-bench: measure cuflag against its baselines in one run and print
 * latency percentiles, completions per second, daemon CPU and the ratios.
 * This file: options, the run, the report.
 */
#include <errno.h>
#include <getopt.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "bench.h"

static void usage(FILE *f)
{
	fprintf(f,
		"Usage: cuflag-bench [OPTIONS]\n"
		"Measure cuflag against its baselines in one run: wake latency, throughput,\n"
		"daemon CPU, and the ratios between them.\n\n"
		"  --mode cpu|gpu       simulated device (default) or a real GPU (CUDA Driver API)\n"
		"  --json               print one JSON object instead of tables\n"
		"  --iterations N       latency samples per mechanism (default 2000)\n"
		"  --warmup N           samples dropped first, per mechanism (default N/20, <= 100)\n"
		"  --clients P          processes in the throughput runs (default 2)\n"
		"  --slots S            slots per process, cpu throughput (default 16)\n"
		"  --streams K          streams per process, gpu throughput (default 4)\n"
		"  --completions N      throughput completions per process and mechanism\n"
		"                       (default 100 x iterations)\n"
		"  --spin-us N          the spawned cuflagd's --spin-us (default 50)\n"
		"  --scanner-mode M     the spawned cuflagd's --scanner-mode (default: its own)\n"
		"  --idle-ms N          how long the idle daemon CPU is measured (default 2000)\n"
		"  --daemon PATH        cuflagd to spawn (default: $CUFLAGD, else next to this\n"
		"                       program, else on PATH)\n"
		"  --socket PATH        use the cuflagd already listening on PATH\n"
		"  --dump-samples DIR   write DIR/<mechanism>.txt: one latency (us) a line\n"
		"  --scale, --no-scale  cpu mode: latency with P idle processes x 1024 slots\n"
		"                       connected, and ~10000 slots armed at once (default on\n"
		"                       unless --iterations is below 100)\n"
		"  --scale-clients P    processes of the scale run (default 64)\n"
		"  --paced, --no-paced  cpu mode: the scanner's cost at 1k, 10k, 100k paced\n"
		"                       completions/s, a daemon per --scanner-mode (default on\n"
		"                       unless --iterations is below 100)\n"
		"  --metrics-cost       cpu mode: latency and throughput against a cuflagd with\n"
		"                       its metrics and one with --no-metrics, alternating\n"
		"  -h, --help           this text\n\n"
		"Exit status: 0 all measured, 1 something failed, 2 bad usage, 77 the mode\n"
		"cannot run here (no GPU, or built without CUDA).\n");
}

static int parse_uint(const char *opt, const char *s, unsigned long long min,
		      unsigned long long max, unsigned long long *out)
{
	char *end;
	unsigned long long v;

	errno = 0;
	v = strtoull(s, &end, 10);
	if (errno || end == s || *end || s[0] == '-' || v < min || v > max) {
		fprintf(stderr, "cuflag-bench: %s: '%s' is not a number in %llu..%llu\n", opt, s,
			min, max);
		return -1;
	}
	*out = v;
	return 0;
}

static const char *self_path(const char *argv0)
{
	static char buf[PATH_MAX];
	ssize_t n = readlink("/proc/self/exe", buf, sizeof(buf) - 1);

	if (n <= 0)
		return argv0;
	buf[n] = 0;
	return buf;
}

int main(int argc, char **argv)
{
	enum { O_MODE = 256, O_JSON, O_ITER, O_WARM, O_CLIENTS, O_SLOTS, O_STREAMS, O_COMPL,
	       O_SPIN, O_IDLE, O_DAEMON, O_SOCKET, O_DUMP, O_SCALE, O_NO_SCALE, O_SCALE_CLIENTS,
	       O_SCANNER, O_PACED, O_NO_PACED, O_METRICS_COST };
	static const struct option opts[] = {
		{ "mode", required_argument, NULL, O_MODE },
		{ "json", no_argument, NULL, O_JSON },
		{ "iterations", required_argument, NULL, O_ITER },
		{ "warmup", required_argument, NULL, O_WARM },
		{ "clients", required_argument, NULL, O_CLIENTS },
		{ "slots", required_argument, NULL, O_SLOTS },
		{ "streams", required_argument, NULL, O_STREAMS },
		{ "completions", required_argument, NULL, O_COMPL },
		{ "spin-us", required_argument, NULL, O_SPIN },
		{ "idle-ms", required_argument, NULL, O_IDLE },
		{ "scanner-mode", required_argument, NULL, O_SCANNER },
		{ "paced", no_argument, NULL, O_PACED },
		{ "no-paced", no_argument, NULL, O_NO_PACED },
		{ "metrics-cost", no_argument, NULL, O_METRICS_COST },
		{ "daemon", required_argument, NULL, O_DAEMON },
		{ "socket", required_argument, NULL, O_SOCKET },
		{ "dump-samples", required_argument, NULL, O_DUMP },
		{ "scale", no_argument, NULL, O_SCALE },
		{ "no-scale", no_argument, NULL, O_NO_SCALE },
		{ "scale-clients", required_argument, NULL, O_SCALE_CLIENTS },
		{ "help", no_argument, NULL, 'h' },
		{ 0 },
	};
	struct bench_opts o = {
		.mode = "cpu", .iterations = 2000, .clients = 2, .slots = 16, .streams = 4,
		.spin_us = 50, .idle_ms = 2000, .scale = -1, .scale_clients = 64,
		.paced = -1,
	};
	static struct bench_report r;
	unsigned long long v;
	int c, warm_set = 0, rc;

	/* The GPU throughput runs re-execute this program as their workers. */
	if (argc > 1 && !strcmp(argv[1], "--gpu-worker"))
		return bench_gpu_worker(argc, argv);

	while ((c = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
		switch (c) {
		case O_MODE:
			if (strcmp(optarg, "cpu") && strcmp(optarg, "gpu")) {
				fprintf(stderr, "cuflag-bench: --mode: '%s' is not cpu or gpu\n", optarg);
				return 2;
			}
			o.mode = optarg;
			break;
		case O_JSON:
			o.json = 1;
			break;
		case O_ITER:
			if (parse_uint("--iterations", optarg, 1, 10000000, &v))
				return 2;
			o.iterations = (unsigned)v;
			break;
		case O_WARM:
			if (parse_uint("--warmup", optarg, 0, 1000000, &v))
				return 2;
			o.warmup = (unsigned)v;
			warm_set = 1;
			break;
		case O_CLIENTS:
			if (parse_uint("--clients", optarg, 1, 256, &v))
				return 2;
			o.clients = (unsigned)v;
			break;
		case O_SLOTS:
			if (parse_uint("--slots", optarg, 1, 256, &v))
				return 2;
			o.slots = (unsigned)v;
			break;
		case O_STREAMS:
			if (parse_uint("--streams", optarg, 1, 256, &v))
				return 2;
			o.streams = (unsigned)v;
			break;
		case O_COMPL:
			if (parse_uint("--completions", optarg, 1, 1000000000, &v))
				return 2;
			o.completions = v;
			break;
		case O_SPIN:
			if (parse_uint("--spin-us", optarg, 0, 10000000, &v))
				return 2;
			o.spin_us = (unsigned)v;
			break;
		case O_IDLE:
			if (parse_uint("--idle-ms", optarg, 10, 600000, &v))
				return 2;
			o.idle_ms = (unsigned)v;
			break;
		case O_METRICS_COST:
			o.metrics_cost = 1;
			break;
		case O_PACED:
		case O_NO_PACED:
			o.paced = c == O_PACED;
			break;
		case O_SCANNER:
			if (strcmp(optarg, "spin") && strcmp(optarg, "adaptive")) {
				fprintf(stderr, "cuflag-bench: --scanner-mode: '%s' is not spin or "
						"adaptive\n", optarg);
				return 2;
			}
			o.scanner_mode = optarg;
			break;
		case O_DAEMON:
			o.daemon = optarg;
			break;
		case O_SOCKET:
			o.socket = optarg;
			break;
		case O_DUMP:
			o.dump_dir = optarg;
			break;
		case O_SCALE:
		case O_NO_SCALE:
			o.scale = c == O_SCALE;
			break;
		case O_SCALE_CLIENTS:
			if (parse_uint("--scale-clients", optarg, 1, BENCH_SCALE_MAX_CLIENTS, &v))
				return 2;
			o.scale_clients = (unsigned)v;
			break;
		case 'h':
			usage(stdout);
			return 0;
		default:
			usage(stderr);
			return 2;
		}
	}
	if (optind < argc) {
		fprintf(stderr, "cuflag-bench: unexpected argument '%s'\n", argv[optind]);
		return 2;
	}
	if (o.scale > 0 && o.mode[0] == 'g') {
		fprintf(stderr, "cuflag-bench: --scale: cpu mode only\n");
		return 2;
	}
	/* The scale run takes a few seconds: on by default, but not in a tiny run. */
	if (o.scale < 0)
		o.scale = o.mode[0] == 'c' && o.iterations >= 100;
	if (o.metrics_cost && o.mode[0] == 'g') {
		fprintf(stderr, "cuflag-bench: --metrics-cost: cpu mode only\n");
		return 2;
	}
	if (o.paced > 0 && o.mode[0] == 'g') {
		fprintf(stderr, "cuflag-bench: --paced: cpu mode only\n");
		return 2;
	}
	if (o.paced < 0)
		o.paced = o.mode[0] == 'c' && o.iterations >= 100;
	if (!warm_set)
		o.warmup = o.iterations / 20 < 100 ? o.iterations / 20 : 100;
	if (!o.completions)
		o.completions = (uint64_t)o.iterations * 100;
	o.self = self_path(argv[0]);
	if (!o.daemon)
		o.daemon = bench_find_daemon(o.self);

	r.mode = o.mode;
	r.opts = &o;
	rc = o.mode[0] == 'g' ? bench_gpu_run(&o, &r) : bench_cpu_run(&o, &r);
	if (rc == BENCH_EXIT_SKIP)
		return rc;
	if (!r.nlat && !r.ntput)
		return 1; /* nothing ran (the daemon did not start): the error is printed */
	if (o.dump_dir && bench_dump_samples(&r, o.dump_dir))
		rc = 1;
	if (o.json)
		bench_print_json(&r);
	else
		bench_print_text(&r);
	fflush(stdout);
	for (size_t i = 0; i < r.nlat; i++)
		free(r.lat[i].us);
	return rc ? 1 : 0;
}
