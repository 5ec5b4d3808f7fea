/* SPDX-License-Identifier: MIT */
/* The options every measuring program takes, and the defaults they share. */
#include <errno.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "perf.h"

enum { O_JSON = 256, O_ITER, O_WARM, O_CLIENTS, O_SLOTS, O_COMPL, O_SPIN, O_SCANNER, O_DAEMON,
       O_SOCKET, O_DUMP, O_COMMON_END };

static const struct option common[] = {
	{ "json", no_argument, NULL, O_JSON },
	{ "iterations", required_argument, NULL, O_ITER },
	{ "warmup", required_argument, NULL, O_WARM },
	{ "clients", required_argument, NULL, O_CLIENTS },
	{ "slots", required_argument, NULL, O_SLOTS },
	{ "completions", required_argument, NULL, O_COMPL },
	{ "spin-us", required_argument, NULL, O_SPIN },
	{ "scanner-mode", required_argument, NULL, O_SCANNER },
	{ "daemon", required_argument, NULL, O_DAEMON },
	{ "socket", required_argument, NULL, O_SOCKET },
	{ "dump-samples", required_argument, NULL, O_DUMP },
	{ "help", no_argument, NULL, 'h' },
};
#define NCOMMON (sizeof(common) / sizeof(common[0]))
#define MAX_EXTRA 16

static const char common_usage[] =
	"  --json               print one JSON object instead of tables\n"
	"  --iterations N       latency samples per mechanism (default 2000)\n"
	"  --warmup N           samples dropped first, per mechanism (default N/20, <= 100)\n"
	"  --clients P          processes in the throughput runs (default 2)\n"
	"  --slots S            slots per process, cpu throughput (default 16)\n"
	"  --completions N      throughput completions per process and mechanism\n"
	"                       (default 100 x iterations)\n"
	"  --spin-us N          the spawned cuflagd's --spin-us (default 50)\n"
	"  --scanner-mode M     the spawned cuflagd's --scanner-mode (default: its own)\n"
	"  --daemon PATH        cuflagd to spawn (default: $CUFLAGD, else next to this\n"
	"                       program, else on PATH)\n"
	"  --socket PATH        use the cuflagd already listening on PATH\n"
	"  --dump-samples DIR   write DIR/<mechanism>.txt: one latency (us) a line\n";

int bench_parse_uint(const char *opt, const char *s, unsigned long long min,
		     unsigned long long max, unsigned long long *out)
{
	char *end;
	unsigned long long v;

	errno = 0;
	v = strtoull(s, &end, 10);
	if (errno || end == s || *end || s[0] == '-' || v < min || v > max) {
		bench_say("%s: '%s' is not a number in %llu..%llu\n", opt, s, min, max);
		return 2;
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

static void usage(FILE *f, const char *what, const struct bench_extra_opts *x)
{
	fprintf(f, "Usage: %s [OPTIONS]\n%s\n%s%s  -h, --help           this text\n\n"
		   "Exit status: 0 all measured, 1 something failed, 2 bad usage, 77 it\n"
		   "cannot run here.\n",
		program_invocation_short_name, what, x && x->usage ? x->usage : "", common_usage);
}

/* One common option; 0, or 2 for bad usage. */
static int parse_common(struct bench_opts *o, int c, const char *arg, int *warm_set)
{
	unsigned long long v = 0;
	int rc = 0;

	switch (c) {
	case O_JSON:
		o->json = 1;
		break;
	case O_ITER:
		rc = bench_parse_uint("--iterations", arg, 1, 10000000, &v);
		o->iterations = (unsigned)v;
		break;
	case O_WARM:
		rc = bench_parse_uint("--warmup", arg, 0, 1000000, &v);
		o->warmup = (unsigned)v;
		*warm_set = 1;
		break;
	case O_CLIENTS:
		rc = bench_parse_uint("--clients", arg, 1, 256, &v);
		o->clients = (unsigned)v;
		break;
	case O_SLOTS:
		rc = bench_parse_uint("--slots", arg, 1, 256, &v);
		o->slots = (unsigned)v;
		break;
	case O_COMPL:
		rc = bench_parse_uint("--completions", arg, 1, 1000000000, &v);
		o->completions = v;
		break;
	case O_SPIN:
		rc = bench_parse_uint("--spin-us", arg, 0, 10000000, &v);
		o->spin_us = (unsigned)v;
		break;
	case O_SCANNER:
		if (strcmp(arg, "spin") && strcmp(arg, "adaptive")) {
			bench_say("--scanner-mode: '%s' is not spin or adaptive\n", arg);
			return 2;
		}
		o->scanner_mode = arg;
		break;
	case O_DAEMON:
		o->daemon = arg;
		break;
	case O_SOCKET:
		o->socket = arg;
		break;
	case O_DUMP:
		o->dump_dir = arg;
		break;
	default:
		return 2;
	}
	return rc;
}

int bench_opts_parse(struct bench_opts *o, int argc, char **argv, const char *what,
		     const struct bench_extra_opts *x)
{
	struct option all[NCOMMON + MAX_EXTRA + 1];
	size_t n = 0;
	int c, warm_set = 0;

	*o = (struct bench_opts){ .mode = "cpu", .iterations = 2000, .clients = 2, .slots = 16,
				  .streams = 4, .spin_us = 50, .idle_ms = 2000,
				  .scale_clients = 64, .paced = -1,
				  .scale_pending = -1 };
	for (const struct option *e = x ? x->opts : NULL; e && e->name && n < MAX_EXTRA; e++)
		all[n++] = *e;
	memcpy(all + n, common, sizeof(common));
	memset(&all[n + NCOMMON], 0, sizeof(all[0]));
	while ((c = getopt_long(argc, argv, "h", all, NULL)) != -1) {
		int rc;
		if (c == 'h') {
			usage(stdout, what, x);
			return 0;
		}
		if (c == '?') {
			usage(stderr, what, x);
			return 2;
		}
		rc = c < O_COMMON_END ? parse_common(o, c, optarg, &warm_set) : x->parse(o, c, optarg);
		if (rc)
			return rc;
	}
	if (optind < argc) {
		bench_say("unexpected argument '%s'\n", argv[optind]);
		return 2;
	}
	if (!warm_set)
		o->warmup = o->iterations / 20 < 100 ? o->iterations / 20 : 100;
	if (!o->completions)
		o->completions = (uint64_t)o->iterations * 100;
	o->self = self_path(argv[0]);
	if (!o->daemon)
		o->daemon = bench_find_daemon(o->self);
	return -1;
}

int bench_program_start(struct bench_report *r, struct bench_opts *o, int argc, char **argv,
			const char *what, const struct bench_extra_opts *extra)
{
	int rc = bench_opts_parse(o, argc, argv, what, extra);

	r->mode = o->mode;
	r->title = program_invocation_short_name;
	r->opts = o;
	return rc;
}
