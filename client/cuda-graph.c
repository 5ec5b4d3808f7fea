/* SPDX-License-Identifier: MIT */
/*
 * The per-launch advance a graph capture records in place of the flag store.
 *
 * The kernel is PTX written by hand and compiled by the driver at load time,
 * so the library needs no CUDA compiler. One thread reads the flag (host
 * memory mapped into the device: ld.volatile is a relaxed load at system
 * scope, so it reads the host's memory, not a cached copy), adds one and
 * stores it back. The flag has one writer, the device, and launches of one
 * graph run one after another, so no atomic is needed (a system-scope atomic
 * on host memory is not available on every bus). membar.sys first, as
 * cuStreamWriteValue32 fences before its store.
 */
#include "cuda-graph.h"

#include <errno.h>

#include "cuda-load.h"

static const char advance_ptx[] =
	".version 6.0\n"
	".target sm_50\n"
	".address_size 64\n"
	"\n"
	".visible .entry cuflag_advance(\n"
	"	.param .u64 flag\n"
	")\n"
	"{\n"
	"	.reg .b32 %r<3>;\n"
	"	.reg .b64 %rd<3>;\n"
	"\n"
	"	ld.param.u64 %rd1, [flag];\n"
	"	cvta.to.global.u64 %rd2, %rd1;\n"
	"	membar.sys;\n"
	"	ld.volatile.global.u32 %r1, [%rd2];\n"
	"	add.u32 %r2, %r1, 1;\n"
	"	st.volatile.global.u32 [%rd2], %r2;\n"
	"	ret;\n"
	"}\n";

int cuflag__capturing(CUstream stream)
{
	CUstreamCaptureStatus st;

	switch (cuflag__cu.StreamIsCapturing(stream, &st)) {
	case CUDA_SUCCESS:
		return st == CU_STREAM_CAPTURE_STATUS_ACTIVE;
	case CUDA_ERROR_NOT_INITIALIZED:
	case CUDA_ERROR_DEINITIALIZED:
	case CUDA_ERROR_INVALID_CONTEXT:
	case CUDA_ERROR_CONTEXT_IS_DESTROYED:
	case CUDA_ERROR_INVALID_HANDLE:
	case CUDA_ERROR_INVALID_VALUE:
		return -ENODEV;
	default:
		/* A faulted context answers every call with its fault. */
		return -EIO;
	}
}

CUstreamCaptureMode cuflag__capture_relax(void)
{
	CUstreamCaptureMode mode = CU_STREAM_CAPTURE_MODE_RELAXED;

	/* Cannot fail for a valid mode; if it did, the thread keeps its mode. */
	if (cuflag__cu.ThreadExchangeStreamCaptureMode(&mode) != CUDA_SUCCESS)
		return CU_STREAM_CAPTURE_MODE_RELAXED;
	return mode;
}

void cuflag__capture_restore(CUstreamCaptureMode mode)
{
	(void)cuflag__cu.ThreadExchangeStreamCaptureMode(&mode);
}

int cuflag__advance_load(struct cuflag_advance *a)
{
	if (cuflag__cu.ModuleLoadData(&a->mod, advance_ptx) != CUDA_SUCCESS) {
		a->mod = NULL;
		return -ENODEV;
	}
	if (cuflag__cu.ModuleGetFunction(&a->fn, a->mod, "cuflag_advance") != CUDA_SUCCESS) {
		(void)cuflag__cu.ModuleUnload(a->mod);
		a->mod = NULL;
		a->fn = NULL;
		return -ENODEV;
	}
	return 0;
}

void cuflag__advance_unload(struct cuflag_advance *a)
{
	if (a->mod)
		(void)cuflag__cu.ModuleUnload(a->mod);
	a->mod = NULL;
	a->fn = NULL;
}

static void CUDA_CB advance_host(void *arg)
{
	uint32_t *flag = arg;

	__atomic_store_n(flag, __atomic_load_n(flag, __ATOMIC_ACQUIRE) + 1, __ATOMIC_RELEASE);
}

int cuflag__advance_enqueue(const struct cuflag_advance *a, CUstream stream, CUdeviceptr dflag,
			    volatile uint32_t *flag, int force_hostfn)
{
	void *params[] = { &dflag };

	if (!force_hostfn && a->fn &&
	    cuflag__cu.LaunchKernel(a->fn, 1, 1, 1, 1, 1, 1, 0, stream, params, NULL) ==
		    CUDA_SUCCESS)
		return 0;
	/* The flag itself is the argument: it lives as long as the client's
	 * region, which a graph that signals the client's slots must not
	 * outlive (nothing per launch is allocated, nothing to free). */
	if (cuflag__cu.LaunchHostFunc(stream, advance_host, (void *)(uintptr_t)flag) != CUDA_SUCCESS)
		return -EIO;
	return 0;
}
