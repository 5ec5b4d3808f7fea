/* SPDX-License-Identifier: MIT */
/*
 * The pending-load rows alone (scale-pending.c says what they measure): a
 * wake with P processes x 12 connections x 1024 grouped slots pending
 * against one with none, and the notice of slots pending over a second, on
 * a daemon of its own.
 *
 *   perf-scale-pending [--iterations N] [--procs P] [--json] ...
 */
#include "perf.h"

enum { O_PROCS = 512 };

static unsigned procs = BENCH_SCALE_PENDING_PROCS;

static int parse_own(struct bench_opts *o, int c, const char *arg)
{
	unsigned long long v;

	(void)o;
	(void)c;
	if (bench_parse_uint("--procs", arg, 1, 64, &v))
		return 2;
	procs = (unsigned)v;
	return 0;
}

static const struct option own[] = {
	{ "procs", required_argument, NULL, O_PROCS },
	{ 0 },
};
static const struct bench_extra_opts extra = {
	own, parse_own,
	"  --procs P            load processes, 12 x 1024 grouped slots each (default 16)\n",
};

int main(int argc, char **argv)
{
	static struct bench_report r;
	struct bench_opts o;
	int rc;

	rc = bench_program_start(&r, &o, argc, argv,
				 "A wake with P x 12 x 1024 grouped slots pending, and the notice "
				 "of slots pending over a second.\n",
				 &extra);
	if (rc >= 0)
		return rc;
	o.scale_pending = 1;
	return bench_finish(&r, bench_scale_pending(&o, &r, procs) != 0);
}
