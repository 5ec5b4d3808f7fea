/* SPDX-License-Identifier: MIT */
/*
 * The gate method's parts (gpu.c), for the rows that time the same
 * mechanisms another way (gpu-paced.c): each mechanism enqueued behind a
 * gate kernel, waited for, and drained the same way everywhere.
 */
#ifndef CUFLAG_BENCH_GPU_LAT_H
#define CUFLAG_BENCH_GPU_LAT_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>

#include "bench.h"
#include "cuflag/cuflag.h"
#include "gpu.h"

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

/* Enqueue m behind the gate kernel (*want: what to wait for), wait for it,
 * drain what the wake left; 0 or -1 (m->row failed). */
int gm_enqueue(struct gmech_state *m, CUstream s, uint32_t *want);
int gm_wait(struct gmech_state *m, uint32_t want);
int gm_after(struct gmech_state *m);

/* Give up a sample: open gate g (its kernel ends) and drain the stream. */
void gpu_gate_abandon(struct gpu_lat *L, uint32_t g);
/* Have the opener open gate g delay_ns from now, reading t0 just before. */
void gpu_gate_open_after(struct gpu_lat *L, uint32_t g, uint64_t delay_ns);

/* One sample of m: the gate opens delay_ns after the waiter starts to
 * wait; *us from the gate opening to the waiter running. 0 or -1. */
int gpu_lat_sample(struct gpu_lat *L, struct gmech_state *m, uint64_t delay_ns, double *us);

/* gpu-paced.c: CPU per completion of each mechanism at paced rates, one
 * 20 us piece of work a period; rows paced-MECH-RATE and their CPU. d: the
 * default daemon (a spinning one is started beside it). 0 or -1. */
int gpu_paced(const struct bench_opts *o, struct bench_report *r, struct gpu_lat *L,
	      const struct daemon_proc *d);

/* gpu-xproc.c: completions across processes, a consumer process waiting
 * for this one's stream: a blocked host wake (an exported slot, a CUDA IPC
 * event, a polled word) and a stream's wait on the GPU (cuflag_cuda_wait,
 * cuStreamWaitEvent on the IPC event), with their ratios. 0 or -1. */
int gpu_xproc(const struct bench_opts *o, struct bench_report *r, struct gpu_lat *L,
	      const struct daemon_proc *d);

#endif
