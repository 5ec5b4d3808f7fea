/* SPDX-License-Identifier: MIT */
/*
 * A persistent kernel streams items to an epoll loop.
 *
 * The kernel (device-ring.cu) runs for the whole program: it writes each item
 * into a ring in host memory and completes the slot's next timeline value
 * itself, with cuflag_device_signal() on the address that
 * cuflag_cuda_slot_devptr() gave. The host sleeps in epoll_wait() on the
 * slot's eventfd; each wake's count says how many new items are in the ring.
 * The ring's credit and the arms move together: the host arms a value for
 * each ring entry it frees (cuflag_slot_arm_many()), so the kernel is never
 * ahead of the arms, and hands the entries back through a word the kernel
 * reads.
 *
 * The kernel is CUDA C++ compiled by nvcc at build time into a fatbin that
 * this program loads through the Driver API: no CUDA runtime is linked.
 *
 * Outside this tree, against the installed library: the kernel needs only
 * <cuflag/cuflag_device.h>; the helpers of the tree this file uses are the
 * Driver API by other names. cu.cuX() is cuX() (and "cu.h" is <cuda.h>);
 * gpu_load() is cuInit(0) (77 where it fails); gpu_dev_open() is
 * cuDeviceGet(), cuDevicePrimaryCtxRetain() and cuCtxSetCurrent(), and
 * gpu_dev_close() cuDevicePrimaryCtxRelease(); CU_TRY checks a CUresult;
 * cuflag_now_ns() ("clock.h") is clock_gettime(CLOCK_MONOTONIC); the
 * embedded device_ring_fatbin is cuModuleLoad(&mod, "device-ring.fatbin").
 * Then:
 *   nvcc -fatbin -gencode arch=compute_90,code=sm_90 $(pkg-config --cflags cuflag-client) \
 *       device-ring.cu -o device-ring.fatbin
 *   gcc -std=gnu11 -O2 device-ring.c -o device-ring \
 *       $(pkg-config --cflags --libs cuflag-client-cuda) \
 *       -L$(pkg-config --variable=cudadir cuflag-client-cuda)/lib64/stubs -lcuda
 * (sm_90: H100/H200; sm_80 for an A100; the stub is only linked against, the
 * driver's libcuda.so.1 runs.)
 *
 * Usage: device-ring [ITEMS [WORK_US]]   (the daemon: $CUFLAG_SOCKET, else
 *        cuflagd's own socket; 100000 items, 20 us of work each)
 * Exit status: 0 when every item arrived, in order and intact, each counted
 * once; 77 without a GPU; 1 otherwise.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>

#include "clock.h"
#include "connect.h"
#include "cu.h"
#include "cuflag/cuflag.h"
#include "cuflag/cuflag_cuda.h"
#include "device-ring.h"

/* The kernel, embedded at build time (gpu/nvcc-embed.py). */
extern const unsigned char device_ring_fatbin[];

#define TIMEOUT_MS 10000

static int fail(const char *what, int err)
{
	fprintf(stderr, "device-ring: FAIL %s: %s\n", what, strerror(err));
	return 1;
}

/* The loop: consume what each wake says, check it, give the room back, arm
 * for it. 0, or 1 after saying what went wrong. */
static int consume_all(cuflag_slot *s, struct ring_item *ring, volatile uint32_t *consumed,
		       uint32_t first, uint32_t n, uint32_t armed, uint64_t *wakes)
{
	struct epoll_event ev = { .events = EPOLLIN };
	uint32_t done = 0, next;
	uint64_t k;
	int ep = epoll_create1(EPOLL_CLOEXEC), rc;

	if (ep < 0 || epoll_ctl(ep, EPOLL_CTL_ADD, cuflag_slot_fd(s), &ev) < 0)
		return fail("epoll", errno);
	while (done < n) {
		rc = epoll_wait(ep, &ev, 1, TIMEOUT_MS);
		if (rc == 0) {
			fprintf(stderr, "device-ring: FAIL no item for %d s (%u of %u)\n",
				TIMEOUT_MS / 1000, done, n);
			return 1;
		}
		if (rc < 0 && errno != EINTR)
			return fail("epoll_wait", errno);
		rc = cuflag_slot_consume(s, &k);
		if (rc == -EAGAIN || rc == -EINTR)
			continue;
		if (rc)
			return fail("cuflag_slot_consume", -rc);
		(*wakes)++;
		if (k > n - done) {
			fprintf(stderr, "device-ring: FAIL %llu items signalled, %u were left\n",
				(unsigned long long)k, n - done);
			return 1;
		}
		/* The signal's release order: the k items are there. */
		for (uint64_t j = 0; j < k; j++, done++) {
			const struct ring_item *it = &ring[done % RING_SIZE];
			if (it->seq != done || it->check != done * 2654435761u) {
				fprintf(stderr, "device-ring: FAIL item %u reads seq %u check %u\n",
					done, it->seq, it->check);
				return 1;
			}
		}
		__atomic_store_n(consumed, done, __ATOMIC_RELEASE);
		uint32_t more = n - armed < k ? n - armed : (uint32_t)k;
		if (more) {
			rc = cuflag_slot_arm_many(s, more, &next);
			if (rc)
				return fail("cuflag_slot_arm_many", -rc);
			if (next != first + armed) {
				fprintf(stderr, "device-ring: FAIL armed from %u, not %u\n", next,
					first + armed);
				return 1;
			}
			armed += more;
		}
	}
	return 0;
}

int main(int argc, char **argv)
{
	uint32_t n = argc > 1 ? (uint32_t)strtoul(argv[1], NULL, 0) : 100000;
	uint64_t work_ns = (argc > 2 ? strtoull(argv[2], NULL, 0) : 20) * 1000;
	struct gpu_dev g;
	CUmodule mod = NULL;
	CUfunction produce;
	CUstream st = NULL;
	CUdeviceptr dflag, dring;
	cuflag_client *c = NULL;
	cuflag_slot *s = NULL;
	struct ring_item *ring = NULL;
	volatile uint32_t *consumed = NULL; /* the ring's room, handed back */
	CUdeviceptr dconsumed;
	uint32_t first, armed;
	uint64_t wakes = 0, t0, t1;
	int rc = gpu_load(), status = 1;

	if (rc)
		return rc; /* 77: no GPU here */
	if (n == 0)
		return fail("ITEMS", EINVAL);
	if (gpu_dev_open(&g, 0))
		return 1;
	CU_TRY(cu.cuModuleLoadDataEx(&mod, device_ring_fatbin, 0, NULL, NULL));
	CU_TRY(cu.cuModuleGetFunction(&produce, mod, "ring_produce"));
	CU_TRY(cu.cuStreamCreate(&st, CU_STREAM_NON_BLOCKING));
	/* The ring, then the word that hands its room back, in host memory. */
	CU_TRY(cu.cuMemHostAlloc((void **)&ring, RING_SIZE * sizeof(*ring) + 64,
				 CU_MEMHOSTALLOC_DEVICEMAP | CU_MEMHOSTALLOC_PORTABLE));
	memset(ring, 0, RING_SIZE * sizeof(*ring) + 64);
	CU_TRY(cu.cuMemHostGetDevicePointer(&dring, ring, 0));
	consumed = (volatile uint32_t *)(ring + RING_SIZE);
	dconsumed = dring + RING_SIZE * sizeof(*ring);

	if (example_connect("device-ring", NULL, &c))
		goto fail;
	if ((rc = cuflag_slot_acquire(c, &s))) {
		fail("cuflag_slot_acquire", -rc);
		goto fail;
	}
	/* The current context is the device's primary one (gpu_dev_open). */
	if ((rc = cuflag_cuda_slot_devptr(s, &dflag))) {
		fail("cuflag_cuda_slot_devptr", -rc);
		goto fail;
	}
	armed = n < RING_SIZE ? n : RING_SIZE;
	if ((rc = cuflag_slot_arm_many(s, armed, &first))) {
		fail("cuflag_slot_arm_many", -rc);
		goto fail;
	}
	void *args[] = { &dflag, &first, &n, &dring, &dconsumed, &work_ns };
	t0 = cuflag_now_ns();
	CU_TRY(cu.cuLaunchKernel(produce, 1, 1, 1, 1, 1, 1, 0, st, args, NULL));
	if (consume_all(s, ring, consumed, first, n, armed, &wakes))
		goto fail;
	t1 = cuflag_now_ns();
	CU_TRY(cu.cuStreamSynchronize(st));
	printf("device-ring: PASS %u items from a persistent kernel, in order, each counted once: "
	       "%llu wakes (%.1f items a wake), %.0f items/s\n",
	       n, (unsigned long long)wakes, (double)n / (double)wakes,
	       n / ((double)(t1 - t0) / 1e9));
	status = 0;
fail:
	/* A kernel still running: all the room it wants, so it ends. */
	if (st) {
		if (consumed)
			__atomic_store_n(consumed, n, __ATOMIC_RELEASE);
		cu.cuStreamSynchronize(st);
		cu.cuStreamDestroy(st);
	}
	cuflag_slot_release(s);
	cuflag_disconnect(c);
	if (ring)
		cu.cuMemFreeHost(ring);
	if (mod)
		cu.cuModuleUnload(mod);
	gpu_dev_close(&g);
	return status;
}
