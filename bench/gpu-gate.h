/* SPDX-License-Identifier: MIT */
/*
 * The gate method (gpu-gate.c), for every row that times a wake on the GPU
 * (gpu.c, gpu-paced.c, gpu-xproc.c): each mechanism enqueued behind a gate
 * kernel, waited for, and drained the same way everywhere.
 */
#ifndef CUFLAG_BENCH_GPU_GATE_H
#define CUFLAG_BENCH_GPU_GATE_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>

#include "bench.h"
#include "cuflag/cuflag.h"
#include "cu.h"

enum gmech {
	G_SPIN, G_HOSTFN, G_EVBLOCK, G_EVSPIN, G_INPROC, G_CUFLAGD, G_CUFLAGD_SPIN, G_GROUP,
	G_COUNT
};
struct gmech_state {
	enum gmech kind;
	struct bench_lat *row;
	int efd;                  /* hostfunc, inproc-scanner */
	volatile uint32_t *flag;  /* spin-floor, inproc-scanner: host address */
	CUdeviceptr flag_dptr;
	uint32_t next;
	CUevent ev;
	cuflag_slot *slot;        /* cuflagd, cuflagd-spin, cuflagd-group */
	struct bench_group_slots *grp; /* cuflagd-group */
	struct inproc_scanner *sc;
};

/* The opener: opens the gate when told, reading t0 just before. */
struct opener {
	pthread_t thread;
	volatile uint32_t *gate;
	_Atomic uint32_t go;      /* gate value to open, 0: none */
	_Atomic uint64_t delay_ns;
	_Atomic uint64_t t0;
	_Atomic int quit;
	uint64_t rng;
};

struct gpu_lat {
	struct gpu_dev dev;
	CUstream stream;
	volatile uint32_t *host; /* page: [0] gate, [1] gate timed out, [16] spin flag, [32] inproc flag */
	CUdeviceptr dptr;
	uint32_t gate_seq;
	struct opener op;
	struct gmech_state m[G_COUNT];
	cuflag_client *client;
};

/* The mechanisms' rows (spin-floor ... cuflagd-group, added to r), the gate
 * page, the stream, the opener thread, a client of the daemon at sock. A
 * mechanism that cannot be set up fails its row only. 0, or -1 when nothing
 * can be timed; gpu_lat_close() either way. */
int gpu_lat_open(struct gpu_lat *L, const struct bench_opts *o, struct bench_report *r,
		 const char *sock);
void gpu_lat_close(struct gpu_lat *L);

/* Launch the next gate kernel on L->stream; *g: the gate value that opens
 * it. The driver's result. */
CUresult gpu_gate_launch(struct gpu_lat *L, uint32_t *g);
/* Give up a sample: open gate g (its kernel ends) and drain the stream. */
void gpu_gate_abandon(struct gpu_lat *L, uint32_t g);
/* Have the opener open gate g delay_ns from now, reading t0 just before. */
void gpu_gate_open_after(struct gpu_lat *L, uint32_t g, uint64_t delay_ns);

/* One sample of m: the gate opens delay_ns after the waiter starts to
 * wait; *us from the gate opening to the waiter running. 0 or -1. */
int gpu_lat_sample(struct gpu_lat *L, struct gmech_state *m, uint64_t delay_ns, double *us);

#endif
