/* SPDX-License-Identifier: MIT */
/*
 * cuflag-demo on a GPU: real kernels, then cuflag_cuda_signal. Latency by
 * the gate method: a one-thread kernel spins on a host-mapped gate word, the
 * flag write follows it on the stream, the waiter blocks in poll, and t0 is
 * read just before the host opens the gate.
 */
#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cu.h"
#include "cuflag/cuflag_cuda.h"
#include "demo.h"

struct counting {
	cuflag_slot **s;
	unsigned n;
	uint64_t want;
	int rc;
};

static void *counter(void *arg)
{
	struct counting *k = arg;
	k->rc = demo_count(k->s, k->n, k->want);
	return NULL;
}

struct gate {
	volatile uint32_t *word;
	_Atomic uint32_t go; /* value to open with, once the waiter sleeps */
	_Atomic uint64_t t0;
	unsigned samples;
};

static void *opener(void *arg)
{
	struct gate *g = arg;

	for (unsigned i = 0; i < g->samples; i++) {
		uint32_t v;
		while (!(v = atomic_exchange(&g->go, 0)))
			usleep(5);
		usleep(50);
		atomic_store(&g->t0, cuflag_now_ns());
		__atomic_store_n(g->word, v, __ATOMIC_RELEASE);
	}
	return NULL;
}

int demo_gpu(cuflag_client *c, const struct demo_opts *o, struct demo_result *r)
{
	unsigned n = o->slots > 64 ? 64 : o->slots;
	struct counting k = { .n = n, .want = o->completions };
	struct gate g = { .samples = o->samples };
	CUstream st[64];
	struct gpu_dev dev;
	CUdeviceptr gate_d;
	void *gate_h = NULL;
	pthread_t cnt, op;
	uint64_t t0;
	int rc;

	gpu_no_driver_quiet = o->fallback;
	rc = gpu_load();

	if (rc)
		return rc == GPU_EXIT_SKIP ? 77 : -ENODEV;
	if (gpu_dev_open(&dev, 0))
		return -ENODEV;
	snprintf(r->device, sizeof(r->device), "GPU 0: %s (kernels + cuStreamWriteValue32)",
		 dev.name);
	k.s = calloc(n, sizeof(*k.s));
	r->lat_us = calloc(o->samples, sizeof(double));
	if (!k.s || !r->lat_us)
		return -ENOMEM;
	for (unsigned i = 0; i < n; i++)
		if (cu.cuStreamCreate(&st[i], CU_STREAM_NON_BLOCKING) != CUDA_SUCCESS)
			return -ENODEV;
	rc = cuflag_slots_acquire(c, n, k.s);
	if (rc)
		return rc;

	/* Throughput: a kernel then the flag write, on every stream. */
	t0 = cuflag_now_ns();
	pthread_create(&cnt, NULL, counter, &k);
	for (unsigned j = 0; j < o->completions && !rc; j++)
		for (unsigned i = 0; i < n && !rc; i++) {
			uint32_t t;
			if (gpu_launch1(dev.noop, st[i], NULL))
				rc = -EIO;
			else
				rc = cuflag_cuda_signal(k.s[i], st[i], &t);
		}
	pthread_join(cnt, NULL);
	r->seconds = (double)(cuflag_now_ns() - t0) / 1e9;
	r->completions = (uint64_t)n * o->completions;
	if (rc || (rc = k.rc))
		return rc;

	/* Latency by the gate. */
	if (cu.cuMemHostAlloc(&gate_h, 64, CU_MEMHOSTALLOC_DEVICEMAP | CU_MEMHOSTALLOC_PORTABLE) !=
		    CUDA_SUCCESS ||
	    cu.cuMemHostGetDevicePointer(&gate_d, gate_h, 0) != CUDA_SUCCESS)
		return -ENOMEM;
	memset(gate_h, 0, 64);
	g.word = gate_h;
	pthread_create(&op, NULL, opener, &g);
	for (unsigned i = 0; i < g.samples && !rc; i++) {
		struct pollfd p = { .fd = cuflag_slot_fd(k.s[0]), .events = POLLIN };
		uint32_t want = i + 1, t;
		uint64_t timeout = 10000000000ull, cnt_n;
		void *params[] = { &gate_d, &want, &timeout };
		if (gpu_launch1(dev.gate, st[0], params)) {
			rc = -EIO;
			break;
		}
		rc = cuflag_cuda_signal(k.s[0], st[0], &t);
		if (rc)
			break;
		atomic_store(&g.go, want);
		if (poll(&p, 1, 10000) != 1) {
			rc = -ETIMEDOUT;
			break;
		}
		r->lat_us[r->nlat++] = (double)(cuflag_now_ns() - atomic_load(&g.t0)) / 1e3;
		rc = cuflag_slot_consume(k.s[0], &cnt_n);
	}
	if (rc)
		for (unsigned i = r->nlat; i < g.samples; i++)
			atomic_store(&g.go, 0xffffffffu);
	pthread_join(op, NULL);
	for (unsigned i = 0; i < n; i++) {
		cu.cuStreamSynchronize(st[i]);
		cu.cuStreamDestroy(st[i]);
		cuflag_slot_release(k.s[i]);
	}
	cu.cuMemFreeHost(gate_h);
	gpu_dev_close(&dev);
	free(k.s);
	return rc;
}
