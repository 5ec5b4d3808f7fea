/* SPDX-License-Identifier: MIT */
/*
 * The CUDA IPC slab (--slab cuda-ipc): each client's flags live in a
 * cuMemCreate allocation on host NUMA node 0, exported as a POSIX fd. The
 * daemon maps it for host access and its scanner reads it with plain loads,
 * as with a memfd. Built from slab-cuda.c with cuda.h, else slab-none.c.
 */
#ifndef CUFLAGD_SLAB_H
#define CUFLAGD_SLAB_H

#include <stddef.h>
#include <stdint.h>

struct slab_alloc {
	uint64_t size;
	uint64_t handle; /* CUmemGenericAllocationHandle */
	uint64_t va;     /* the daemon's host mapping */
	int fd;          /* exported handle, closed once handed to the client */
};

/* Load the driver, make device 0's primary context current. 0 or -errno. */
int slab_cuda_init(void);
/* The size of an allocation for need bytes (rounded to the granularity),
 * which the client maps: the HELLO reply says it before the allocation. */
uint64_t slab_cuda_size(uint64_t need);
/* An allocation of at least need bytes, zeroed, mapped, exported. */
int slab_cuda_alloc(uint64_t need, struct slab_alloc *a);
void slab_cuda_free(struct slab_alloc *a);

#endif
