/* SPDX-License-Identifier: MIT */
/* Built without cuda.h: the CUDA entry point exists and says so. */
#include <errno.h>
#include <stdint.h>

#include "client-private.h"

/* The signature without CUstream, which is a pointer in cuda.h. */
CUFLAG_EXPORT int cuflag_cuda_signal(cuflag_slot *s, void *stream, uint32_t *target);

CUFLAG_EXPORT int cuflag_cuda_signal(cuflag_slot *s, void *stream, uint32_t *target)
{
	(void)s;
	(void)stream;
	(void)target;
	return -ENOSYS;
}

int cuflag__ipc_map(struct cuflag_client *c, int fd, uint64_t size)
{
	(void)c;
	(void)fd;
	(void)size;
	return -ENODEV;
}

void cuflag__ipc_unmap(struct cuflag_client *c)
{
	(void)c;
}

CUFLAG_EXPORT int cuflag_cuda_check(cuflag_slot *s);

CUFLAG_EXPORT int cuflag_cuda_check(cuflag_slot *s)
{
	(void)s;
	return -ENOSYS;
}

CUFLAG_EXPORT int cuflag_cuda_launched(cuflag_slot *s, void *stream, uint32_t *target);

CUFLAG_EXPORT int cuflag_cuda_launched(cuflag_slot *s, void *stream, uint32_t *target)
{
	(void)s;
	(void)stream;
	(void)target;
	return -ENOSYS;
}

CUFLAG_EXPORT int cuflag_cuda_capturing(void *stream);

CUFLAG_EXPORT int cuflag_cuda_capturing(void *stream)
{
	(void)stream;
	return -ENOSYS;
}

/* The signature without CUdeviceptr, an unsigned integer of pointer size in cuda.h. */
CUFLAG_EXPORT int cuflag_cuda_slot_devptr(cuflag_slot *s, unsigned long long *out);

CUFLAG_EXPORT int cuflag_cuda_slot_devptr(cuflag_slot *s, unsigned long long *out)
{
	(void)s;
	(void)out;
	return -ENOSYS;
}

/* The signature without CUstream, as cuflag_cuda_signal's above. */
CUFLAG_EXPORT int cuflag_cuda_wait(cuflag_slot *s, void *stream, uint32_t value);

CUFLAG_EXPORT int cuflag_cuda_wait(cuflag_slot *s, void *stream, uint32_t value)
{
	(void)s;
	(void)stream;
	(void)value;
	return -ENOSYS;
}
