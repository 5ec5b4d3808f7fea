/* SPDX-License-Identifier: MIT */
/* Built without cuda.h: the GPU mode says so and is skipped. */
#include <stdio.h>

#include "bench.h"

int bench_gpu_run(const struct bench_opts *o, struct bench_report *r)
{
	(void)o;
	(void)r;
	fprintf(stderr, "cuflag-bench: --mode gpu: this cuflag-bench was built without CUDA "
			"(cuda.h and libcuda were not found at build time)\n");
	return BENCH_EXIT_SKIP;
}

int bench_xproc_consumer(int argc, char **argv)
{
	(void)argc;
	(void)argv;
	return BENCH_EXIT_SKIP;
}

int bench_gpu_worker(int argc, char **argv)
{
	(void)argc;
	(void)argv;
	return BENCH_EXIT_SKIP;
}
