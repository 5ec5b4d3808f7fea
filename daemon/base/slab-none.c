/* SPDX-License-Identifier: MIT */
/* Built without cuda.h: --slab cuda-ipc is refused at start. */
#include <errno.h>

#include "base/slab.h"

int slab_cuda_init(void)
{
	return -ENOTSUP;
}

uint64_t slab_cuda_size(uint64_t need)
{
	return need;
}

int slab_cuda_alloc(uint64_t need, struct slab_alloc *a)
{
	(void)need;
	(void)a;
	return -ENOTSUP;
}

void slab_cuda_free(struct slab_alloc *a)
{
	(void)a;
}
