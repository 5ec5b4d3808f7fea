/* SPDX-License-Identifier: MIT */
#include "base/slab.h"

#include <errno.h>
#include <string.h>
#include <unistd.h>

#include "base/log.h"
#include "cu.h"

static CUmemAllocationProp prop;
static size_t granularity;

int slab_cuda_init(void)
{
	CUcontext ctx;
	CUdevice dev;
	int rc = gpu_load();

	if (rc)
		return -ENODEV;
	if (cu.cuDeviceGet(&dev, 0) != CUDA_SUCCESS ||
	    cu.cuDevicePrimaryCtxRetain(&ctx, dev) != CUDA_SUCCESS ||
	    cu.cuCtxSetCurrent(ctx) != CUDA_SUCCESS)
		return -ENODEV;
	memset(&prop, 0, sizeof(prop));
	prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
	prop.requestedHandleTypes = CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR;
	prop.location.type = CU_MEM_LOCATION_TYPE_HOST_NUMA;
	prop.location.id = 0;
	if (cu.cuMemGetAllocationGranularity(&granularity, &prop,
					     CU_MEM_ALLOC_GRANULARITY_MINIMUM) != CUDA_SUCCESS ||
	    !granularity) {
		log_err("cuda-ipc: host NUMA allocations are not supported here");
		return -ENOTSUP;
	}
	log_info("cuda-ipc slab: host NUMA node 0, granularity %zu bytes", granularity);
	return 0;
}

uint64_t slab_cuda_size(uint64_t need)
{
	return granularity ? (need + granularity - 1) / granularity * granularity : need;
}

int slab_cuda_alloc(uint64_t need, struct slab_alloc *a)
{
	CUmemAccessDesc acc = { .location = { .type = CU_MEM_LOCATION_TYPE_HOST_NUMA, .id = 0 },
				.flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE };
	CUmemGenericAllocationHandle h = 0;
	CUdeviceptr va = 0;
	CUresult e;
	int fd = -1;

	memset(a, 0, sizeof(*a));
	a->fd = -1;
	a->size = slab_cuda_size(need);
	if ((e = cu.cuMemCreate(&h, a->size, &prop, 0)) != CUDA_SUCCESS)
		goto fail;
	if ((e = cu.cuMemAddressReserve(&va, a->size, 0, 0, 0)) != CUDA_SUCCESS)
		goto fail;
	if ((e = cu.cuMemMap(va, a->size, 0, h, 0)) != CUDA_SUCCESS)
		goto fail;
	if ((e = cu.cuMemSetAccess(va, a->size, &acc, 1)) != CUDA_SUCCESS)
		goto fail;
	if ((e = cu.cuMemExportToShareableHandle(&fd, h, CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR,
						 0)) != CUDA_SUCCESS)
		goto fail;
	memset((void *)(uintptr_t)va, 0, a->size);
	a->handle = h;
	a->va = va;
	a->fd = fd;
	return 0;
fail:
	gpu_err("cuda-ipc allocation", e);
	if (va) {
		cu.cuMemUnmap(va, a->size);
		cu.cuMemAddressFree(va, a->size);
	}
	if (h)
		cu.cuMemRelease(h);
	return -ENOMEM;
}

void slab_cuda_free(struct slab_alloc *a)
{
	if (a->va) {
		cu.cuMemUnmap(a->va, a->size);
		cu.cuMemAddressFree(a->va, a->size);
	}
	if (a->handle)
		cu.cuMemRelease(a->handle);
	if (a->fd >= 0)
		close(a->fd);
	memset(a, 0, sizeof(*a));
	a->fd = -1;
}
