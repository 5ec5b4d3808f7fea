/* SPDX-License-Identifier: MIT */
#include "cuda-load.h"

#include <errno.h>
#include <pthread.h>

#include "cuda-dl.h"

struct cuflag_cuda_api cuflag__cu;

static pthread_once_t once = PTHREAD_ONCE_INIT;
static int load_rc = -ENODEV;

#define SYM(field, api) CUFLAG_CUDA_SYM(struct cuflag_cuda_api, field, api)

static const struct cuflag_cuda_sym syms[] = {
	SYM(StreamGetCtx, cuStreamGetCtx),
	SYM(CtxGetCurrent, cuCtxGetCurrent),
	SYM(CtxPushCurrent, cuCtxPushCurrent),
	SYM(CtxPopCurrent, cuCtxPopCurrent),
	SYM(MemHostRegister, cuMemHostRegister),
	SYM(MemHostUnregister, cuMemHostUnregister),
	SYM(MemHostGetDevicePointer, cuMemHostGetDevicePointer),
	SYM(StreamWriteValue32, cuStreamWriteValue32),
	SYM(StreamWaitValue32, cuStreamWaitValue32),
	SYM(LaunchHostFunc, cuLaunchHostFunc),
	SYM(StreamQuery, cuStreamQuery),
	SYM(StreamIsCapturing, cuStreamIsCapturing),
	SYM(ThreadExchangeStreamCaptureMode, cuThreadExchangeStreamCaptureMode),
	SYM(ModuleLoadData, cuModuleLoadData),
	SYM(ModuleGetFunction, cuModuleGetFunction),
	SYM(ModuleUnload, cuModuleUnload),
	SYM(LaunchKernel, cuLaunchKernel),
	SYM(Init, cuInit),
	SYM(DeviceGetCount, cuDeviceGetCount),
	SYM(MemImportFromShareableHandle, cuMemImportFromShareableHandle),
	SYM(MemAddressReserve, cuMemAddressReserve),
	SYM(MemAddressFree, cuMemAddressFree),
	SYM(MemMap, cuMemMap),
	SYM(MemUnmap, cuMemUnmap),
	SYM(MemSetAccess, cuMemSetAccess),
	SYM(MemRelease, cuMemRelease),
};

static void load(void)
{
	/* A missing driver or entry point leaves every CUDA call -ENODEV. */
	if (cuflag_cuda_resolve(&cuflag__cu, syms, sizeof(syms) / sizeof(syms[0]), NULL) == 0)
		load_rc = 0;
}

int cuflag__cuda_load(void)
{
	pthread_once(&once, load);
	return load_rc;
}
