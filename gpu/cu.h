/* SPDX-License-Identifier: MIT */
/*
 * What the GPU programs (cuflag-bench, cuflag-demo, the gpu tests) share: the
 * Driver API entry points, resolved from libcuda.so.1 at run time so each
 * program starts on a machine without the driver and reports a skip there;
 * error reporting; a device with its primary context and the kernels.
 */
#ifndef CUFLAG_GPU_CU_H
#define CUFLAG_GPU_CU_H

#include <cuda.h>

/* Every entry point used; cuda.h maps some names to their _v2 symbols. */
#define GPU_CU_FNS(X)                                                                    \
	X(cuInit)                                                                          \
	X(cuDriverGetVersion)                                                              \
	X(cuGetErrorName)                                                                  \
	X(cuGetErrorString)                                                                \
	X(cuDeviceGetCount)                                                                \
	X(cuDeviceGet)                                                                     \
	X(cuDeviceGetName)                                                                 \
	X(cuDevicePrimaryCtxRetain)                                                        \
	X(cuDevicePrimaryCtxRelease)                                                       \
	X(cuCtxSetCurrent)                                                                 \
	X(cuCtxSynchronize)                                                                \
	X(cuModuleLoadDataEx)                                                              \
	X(cuModuleUnload)                                                                  \
	X(cuModuleGetFunction)                                                             \
	X(cuLaunchKernel)                                                                  \
	X(cuStreamCreate)                                                                  \
	X(cuStreamDestroy)                                                                 \
	X(cuStreamSynchronize)                                                             \
	X(cuStreamWriteValue32)                                                            \
	X(cuLaunchHostFunc)                                                                \
	X(cuEventCreate)                                                                   \
	X(cuEventDestroy)                                                                  \
	X(cuEventRecord)                                                                   \
	X(cuEventQuery)                                                                    \
	X(cuEventSynchronize)                                                              \
	X(cuMemHostAlloc)                                                                  \
	X(cuMemFreeHost)                                                                   \
	X(cuMemHostGetDevicePointer)                                                       \
	X(cuCtxCreate)                                                                     \
	X(cuCtxDestroy)                                                                    \
	X(cuCtxPushCurrent)                                                                \
	X(cuCtxPopCurrent)                                                                 \
	X(cuStreamQuery)                                                                   \
	X(cuMemGetAllocationGranularity)                                                   \
	X(cuMemCreate)                                                                     \
	X(cuMemRelease)                                                                    \
	X(cuMemAddressReserve)                                                             \
	X(cuMemAddressFree)                                                                \
	X(cuMemMap)                                                                        \
	X(cuMemUnmap)                                                                      \
	X(cuMemSetAccess)                                                                  \
	X(cuMemExportToShareableHandle)                                                    \
	X(cuMemHostRegister)                                                               \
	X(cuMemHostUnregister)                                                             \
	X(cuMemAlloc)                                                                      \
	X(cuMemFree)                                                                       \
	X(cuMemsetD32Async)                                                                \
	X(cuMemcpyDtoHAsync)                                                               \
	X(cuIpcGetMemHandle)                                                               \
	X(cuIpcOpenMemHandle)                                                              \
	X(cuIpcCloseMemHandle)                                                             \
	X(cuIpcGetEventHandle)                                                             \
	X(cuIpcOpenEventHandle)                                                            \
	X(cuStreamWaitEvent)                                                               \
	X(cuStreamWaitValue32)

#define GPU_CU_DECL(f) __typeof__(f) *f;
struct gpu_cu {
	GPU_CU_FNS(GPU_CU_DECL)
};
#undef GPU_CU_DECL
extern struct gpu_cu cu;

/* Exit status of a program that needs a GPU and finds none. */
#define GPU_EXIT_SKIP 77

/* Load libcuda.so.1 and cuInit; 0, GPU_EXIT_SKIP (no driver or device, said
 * on stderr), or 1 (a driver too old). */
int gpu_load(void);

/* Set: no driver at all is no news (a program that falls back to something
 * else says so itself), and gpu_load() prints nothing about it. */
extern int gpu_no_driver_quiet;
/* Print "what: NAME (text)" for a failed call; returns -1. */
int gpu_err(const char *what, CUresult e);

/* Evaluate a Driver API call; on failure print it and jump to fail. */
#define CU_TRY(call)                                                                       \
	do {                                                                               \
		CUresult e_ = (call);                                                      \
		if (e_ != CUDA_SUCCESS) {                                                  \
			gpu_err(#call, e_);                                                \
			goto fail;                                                         \
		}                                                                          \
	} while (0)

/* The device, its primary context (current on return), and the kernels. */
struct gpu_dev {
	CUdevice dev;
	CUcontext ctx;
	CUmodule mod;
	CUfunction gate; /* (u32 *gate, u32 want, u64 timeout_ns): spins until *gate >= want */
	CUfunction noop;
	CUfunction busy;  /* (u64 ns): one thread busy for ns of %globaltimer */
	CUfunction fault; /* (u64 addr): reads addr: a bad one faults the context */
	char name[128];
};
int gpu_dev_open(struct gpu_dev *g, int ordinal);
void gpu_dev_close(struct gpu_dev *g);

/* ptx.c */
extern const char gpu_ptx[];

/* Launch a one-thread kernel on stream with the given parameters. */
int gpu_launch1(CUfunction f, CUstream stream, void **params);

/* How long the gate kernel waits for its gate before it gives up by itself. */
#define GATE_TIMEOUT_NS 10000000000ull

#endif /* CUFLAG_GPU_CU_H */
