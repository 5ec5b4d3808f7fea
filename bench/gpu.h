/* SPDX-License-Identifier: MIT */
/*
 * The GPU mode's shared parts: the Driver API entry points (resolved from
 * libcuda.so.1 at run time, so cuflag-bench starts on a machine without the
 * driver and its GPU mode reports a skip there), error reporting, kernels.
 */
#ifndef CUFLAG_BENCH_GPU_H
#define CUFLAG_BENCH_GPU_H

#include <cuda.h>

/* Every entry point used; cuda.h maps some names to their _v2 symbols. */
#define BENCH_CU_FNS(X)                                                                    \
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
	X(cuMemHostGetDevicePointer)

#define BENCH_CU_DECL(f) __typeof__(f) *f;
struct bench_cu {
	BENCH_CU_FNS(BENCH_CU_DECL)
};
#undef BENCH_CU_DECL
extern struct bench_cu cu;

/* Load libcuda.so.1 and cuInit; 0, or BENCH_EXIT_SKIP with a message. */
int gpu_load(void);
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

/* The device, its primary context (current on return), and the two kernels. */
struct gpu_dev {
	CUdevice dev;
	CUcontext ctx;
	CUmodule mod;
	CUfunction gate; /* (u32 *gate, u32 want, u64 timeout_ns): spins until *gate >= want */
	CUfunction noop;
	char name[128];
};
int gpu_dev_open(struct gpu_dev *g, int ordinal);
void gpu_dev_close(struct gpu_dev *g);

/* gpu-ptx.c */
extern const char bench_gpu_ptx[];

/* gpu-tput.c: throughput rows (flag-write ceiling, hostfunc, cuflagd). */
struct bench_opts;
struct bench_report;
struct bench_daemon;
void gpu_throughput(const struct bench_opts *o, struct bench_report *r,
		    const struct bench_daemon *d);

/* How long the gate kernel waits for its gate before it gives up by itself. */
#define GATE_TIMEOUT_NS 10000000000ull

#endif
