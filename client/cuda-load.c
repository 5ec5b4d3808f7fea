/* SPDX-License-Identifier: MIT */
#include "cuda-load.h"

#include <dlfcn.h>
#include <errno.h>
#include <pthread.h>

struct cuflag_cuda_api cuflag__cu;

static pthread_once_t once = PTHREAD_ONCE_INIT;
static int load_rc = -ENODEV;

/* The exported name cuda.h binds a call to (it maps many to _v2 and so on). */
#define XSTR(x) STR(x)
#define STR(x) #x
#define RESOLVE(field, api)                                                                \
	do {                                                                               \
		*(void **)&cuflag__cu.field = dlsym(h, XSTR(api));                          \
		if (!cuflag__cu.field)                                                     \
			return;                                                            \
	} while (0)

static void load(void)
{
	/* The driver stays loaded for the life of the process, as with -lcuda. */
	void *h = dlopen("libcuda.so.1", RTLD_NOW | RTLD_GLOBAL);

	if (!h)
		return;
	RESOLVE(StreamGetCtx, cuStreamGetCtx);
	RESOLVE(CtxPushCurrent, cuCtxPushCurrent);
	RESOLVE(CtxPopCurrent, cuCtxPopCurrent);
	RESOLVE(MemHostRegister, cuMemHostRegister);
	RESOLVE(MemHostUnregister, cuMemHostUnregister);
	RESOLVE(MemHostGetDevicePointer, cuMemHostGetDevicePointer);
	RESOLVE(StreamWriteValue32, cuStreamWriteValue32);
	RESOLVE(LaunchHostFunc, cuLaunchHostFunc);
	RESOLVE(StreamQuery, cuStreamQuery);
	RESOLVE(StreamIsCapturing, cuStreamIsCapturing);
	RESOLVE(ThreadExchangeStreamCaptureMode, cuThreadExchangeStreamCaptureMode);
	RESOLVE(ModuleLoadData, cuModuleLoadData);
	RESOLVE(ModuleGetFunction, cuModuleGetFunction);
	RESOLVE(ModuleUnload, cuModuleUnload);
	RESOLVE(LaunchKernel, cuLaunchKernel);
	RESOLVE(Init, cuInit);
	RESOLVE(DeviceGetCount, cuDeviceGetCount);
	RESOLVE(MemImportFromShareableHandle, cuMemImportFromShareableHandle);
	RESOLVE(MemAddressReserve, cuMemAddressReserve);
	RESOLVE(MemAddressFree, cuMemAddressFree);
	RESOLVE(MemMap, cuMemMap);
	RESOLVE(MemUnmap, cuMemUnmap);
	RESOLVE(MemSetAccess, cuMemSetAccess);
	RESOLVE(MemRelease, cuMemRelease);
	load_rc = 0;
}

int cuflag__cuda_load(void)
{
	pthread_once(&once, load);
	return load_rc;
}
