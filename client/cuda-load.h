/* SPDX-License-Identifier: MIT */
/*
 * The driver entry points the CUDA binding uses, resolved from libcuda.so.1
 * at first use (by shared/cuda-dl.c, the loader the GPU programs use too).
 * Loading the driver lazily keeps libcuflag-client usable on a node (or in a
 * container) without the NVIDIA driver: only the CUDA calls fail there, with
 * -ENODEV, while everything else works.
 */
#ifndef CUFLAG_CUDA_LOAD_H
#define CUFLAG_CUDA_LOAD_H

#include <cuda.h>

struct cuflag_cuda_api {
	CUresult (*StreamGetCtx)(CUstream, CUcontext *);
	CUresult (*CtxGetCurrent)(CUcontext *);
	CUresult (*CtxPushCurrent)(CUcontext);
	CUresult (*CtxPopCurrent)(CUcontext *);
	CUresult (*MemHostRegister)(void *, size_t, unsigned int);
	CUresult (*MemHostUnregister)(void *);
	CUresult (*MemHostGetDevicePointer)(CUdeviceptr *, void *, unsigned int);
	CUresult (*StreamWriteValue32)(CUstream, CUdeviceptr, cuuint32_t, unsigned int);
	CUresult (*StreamWaitValue32)(CUstream, CUdeviceptr, cuuint32_t, unsigned int);
	CUresult (*LaunchHostFunc)(CUstream, CUhostFn, void *);
	CUresult (*StreamQuery)(CUstream);
	/* Graph capture: the per-launch advance (cuda-graph.c). */
	CUresult (*StreamIsCapturing)(CUstream, CUstreamCaptureStatus *);
	CUresult (*ThreadExchangeStreamCaptureMode)(CUstreamCaptureMode *);
	CUresult (*ModuleLoadData)(CUmodule *, const void *);
	CUresult (*ModuleGetFunction)(CUfunction *, CUmodule, const char *);
	CUresult (*ModuleUnload)(CUmodule);
	CUresult (*LaunchKernel)(CUfunction, unsigned, unsigned, unsigned, unsigned, unsigned,
				 unsigned, unsigned, CUstream, void **, void **);
	/* The CUDA IPC slab. */
	CUresult (*Init)(unsigned int);
	CUresult (*DeviceGetCount)(int *);
	CUresult (*MemImportFromShareableHandle)(CUmemGenericAllocationHandle *, void *,
						 CUmemAllocationHandleType);
	CUresult (*MemAddressReserve)(CUdeviceptr *, size_t, size_t, CUdeviceptr,
				      unsigned long long);
	CUresult (*MemAddressFree)(CUdeviceptr, size_t);
	CUresult (*MemMap)(CUdeviceptr, size_t, size_t, CUmemGenericAllocationHandle,
			   unsigned long long);
	CUresult (*MemUnmap)(CUdeviceptr, size_t);
	CUresult (*MemSetAccess)(CUdeviceptr, size_t, const CUmemAccessDesc *, size_t);
	CUresult (*MemRelease)(CUmemGenericAllocationHandle);
};

extern struct cuflag_cuda_api cuflag__cu;

/* Resolve every entry point once; 0, or -ENODEV when the driver is missing. */
int cuflag__cuda_load(void);

#endif
