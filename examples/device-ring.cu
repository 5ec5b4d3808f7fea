// SPDX-License-Identifier: MIT
// The producer of device-ring.c: a persistent kernel that writes items into
// a ring in host memory and completes one cuflag timeline value per item,
// from inside, with cuflag_device_signal(). The ring's credit comes back
// from the host in *consumed; every wait is bounded by %globaltimer.
#include <cuflag/cuflag_device.h>

#include "device-ring.h"

static __device__ __forceinline__ unsigned long long now_ns(void)
{
	unsigned long long t;
	asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
	return t;
}

extern "C" __global__ void ring_produce(cuflag_device_u32 *flag, cuflag_device_u32 first,
					cuflag_device_u32 n, struct ring_item *ring,
					const cuflag_device_u32 *consumed, unsigned long long work_ns)
{
	for (cuflag_device_u32 k = 0; k < n; k++) {
		unsigned long long t = now_ns(), end = t + RING_STALL_NS;
		cuflag_device_u32 c;
		// Room in the ring: the host has consumed up to k - RING_SIZE.
		for (;;) {
			asm volatile("ld.acquire.sys.u32 %0, [%1];" : "=r"(c) : "l"(consumed) : "memory");
			if ((int)(k - c) < (int)RING_SIZE) // signed: a host done with the ring
				break;                       // hands back more than there is
			if (now_ns() > end)
				return; // the host went away
		}
		// The "work" of one item, then the item, then its signal: the
		// release store makes the item visible to whoever wakes for it.
		while (now_ns() - t < work_ns)
			;
		struct ring_item *it = &ring[k % RING_SIZE];
		it->seq = k;
		it->check = k * 2654435761u;
		it->made_ns = now_ns();
		cuflag_device_signal(flag, first + k);
	}
}
