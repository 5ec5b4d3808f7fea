/* SPDX-License-Identifier: MIT */
/* cuflag-demo: what the simulated and the GPU device parts share. */
#ifndef CUFLAG_DEMO_H
#define CUFLAG_DEMO_H

#include <stdint.h>

#include "clock.h"
#include "cuflag/cuflag.h"

struct demo_result {
	char device[256];       /* what completed the work */
	uint64_t completions;   /* counted through the eventfds, exact */
	double seconds;         /* for the completions */
	double *lat_us;         /* wake latencies, sorted by the caller */
	unsigned nlat;
};

struct demo_opts {
	const char *socket;
	unsigned slots;        /* slots (and streams on a GPU) of the throughput run */
	unsigned completions;  /* per slot */
	unsigned samples;      /* latency samples */
	int fallback;          /* --device auto: no driver is no error, the simulated
				* device runs instead */
};


/* Count want completions on each of n slots through their eventfds (exact). */
int demo_count(cuflag_slot **s, unsigned n, uint64_t want);

/* The simulated device: a thread storing the armed values. */
int demo_sim(cuflag_client *c, const struct demo_opts *o, struct demo_result *r);

/* The GPU: kernels, then cuflag_cuda_signal. 77 when there is no GPU. */
int demo_gpu(cuflag_client *c, const struct demo_opts *o, struct demo_result *r);

#endif
