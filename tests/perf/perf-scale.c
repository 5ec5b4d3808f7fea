/* SPDX-License-Identifier: MIT */
/*
 * The scale run alone (scale.c says what it measures): latency with P idle
 * processes x 1024 slots connected against none, and ~10 000 slots armed at
 * once, against a daemon of its own.
 *
 *   perf-scale [--iterations N] [--scale-clients P] [--json] ...
 */
#include "perf.h"

enum { O_SCALE_CLIENTS = 512 };

static int parse_own(struct bench_opts *o, int c, const char *arg)
{
	(void)c;
	return bench_scale_clients_opt(o, arg);
}

static const struct option own[] = {
	{ "scale-clients", required_argument, NULL, O_SCALE_CLIENTS },
	{ 0 },
};
static const struct bench_extra_opts extra = {
	own, parse_own,
	"  --scale-clients P    processes of the idle fleet and the armed run (default 64)\n",
};

int main(int argc, char **argv)
{
	static struct bench_report r;
	struct bench_opts o;
	struct daemon_proc d;
	int failed, rc;

	rc = bench_program_start(&r, &o, argc, argv,
				 "Latency with P idle processes x 1024 slots connected, and ~10 000 "
				 "slots armed at once.\n",
				 &extra);
	if (rc >= 0)
		return rc;
	o.scale = 1;
	/* Before the daemon exists: it inherits the raised RLIMIT_NOFILE. */
	bench_scale_plan(&o, &r.scale);
	if (bench_daemon_start(&d, &o))
		return 1;
	r.daemon_pid = d.pid;
	failed = bench_scale_run(&o, &r, &d) != 0;
	bench_daemon_stop(&d);
	bench_ratio_lat(&r, r.scale.ratio, r.scale.row, "scale-1x1", 0);
	return bench_finish(&r, failed);
}
