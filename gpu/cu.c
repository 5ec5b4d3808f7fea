/* SPDX-License-Identifier: MIT */
#include "cu.h"

#include <dlfcn.h>
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "cuda-dl.h"

struct gpu_cu cu;

#define GPU_CU_SYM(f) CUFLAG_CUDA_SYM(struct gpu_cu, f, f),
static const struct cuflag_cuda_sym syms[] = { GPU_CU_FNS(GPU_CU_SYM) };
#undef GPU_CU_SYM

int gpu_no_driver_quiet;

int gpu_load(void)
{
	static int loaded;
	const char *missing = "?";
	CUresult e;
	int n = 0, rc;

	if (loaded)
		return 0;
	rc = cuflag_cuda_resolve(&cu, syms, sizeof(syms) / sizeof(syms[0]), &missing);
	if (rc == -ENODEV) {
		if (!gpu_no_driver_quiet)
			fprintf(stderr, "%s: no NVIDIA driver here (%s)\n",
				program_invocation_short_name, dlerror());
		return GPU_EXIT_SKIP;
	}
	if (rc) {
		fprintf(stderr, "%s: libcuda.so.1 lacks %s (driver too old?)\n",
			program_invocation_short_name, missing);
		return 1;
	}
	e = cu.cuInit(0);
	if (e != CUDA_SUCCESS) {
		gpu_err("cuInit", e);
		fprintf(stderr, "%s: no usable GPU here\n", program_invocation_short_name);
		return GPU_EXIT_SKIP;
	}
	e = cu.cuDeviceGetCount(&n);
	if (e != CUDA_SUCCESS || n < 1) {
		if (e != CUDA_SUCCESS)
			gpu_err("cuDeviceGetCount", e);
		fprintf(stderr, "%s: no CUDA device here\n", program_invocation_short_name);
		return GPU_EXIT_SKIP;
	}
	loaded = 1;
	return 0;
}

int gpu_err(const char *what, CUresult e)
{
	const char *name = NULL, *text = NULL;

	if (cu.cuGetErrorName)
		cu.cuGetErrorName(e, &name);
	if (cu.cuGetErrorString)
		cu.cuGetErrorString(e, &text);
	fprintf(stderr, "%s: %s failed: %s (%d): %s\n", program_invocation_short_name, what, name ? name : "?", (int)e,
		text ? text : "?");
	return -1;
}

int gpu_dev_open(struct gpu_dev *g, int ordinal)
{
	char log[4096] = "";
	CUjit_option jo[] = { CU_JIT_ERROR_LOG_BUFFER, CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES };
	void *jv[] = { log, (void *)(uintptr_t)sizeof(log) };
	CUresult e;

	memset(g, 0, sizeof(*g));
	CU_TRY(cu.cuDeviceGet(&g->dev, ordinal));
	CU_TRY(cu.cuDeviceGetName(g->name, sizeof(g->name), g->dev));
	CU_TRY(cu.cuDevicePrimaryCtxRetain(&g->ctx, g->dev));
	CU_TRY(cu.cuCtxSetCurrent(g->ctx));
	e = cu.cuModuleLoadDataEx(&g->mod, gpu_ptx, 2, jo, jv);
	if (e != CUDA_SUCCESS) {
		gpu_err("cuModuleLoadDataEx (the gate and noop kernels)", e);
		if (log[0])
			fprintf(stderr, "%s: PTX JIT log: %s\n", program_invocation_short_name, log);
		goto fail;
	}
	CU_TRY(cu.cuModuleGetFunction(&g->gate, g->mod, "cuflag_bench_gate"));
	CU_TRY(cu.cuModuleGetFunction(&g->noop, g->mod, "cuflag_bench_noop"));
	CU_TRY(cu.cuModuleGetFunction(&g->busy, g->mod, "cuflag_busy"));
	CU_TRY(cu.cuModuleGetFunction(&g->fault, g->mod, "cuflag_fault"));
	return 0;
fail:
	gpu_dev_close(g);
	return -1;
}

void gpu_dev_close(struct gpu_dev *g)
{
	if (g->mod)
		cu.cuModuleUnload(g->mod);
	if (g->ctx)
		cu.cuDevicePrimaryCtxRelease(g->dev);
	memset(g, 0, sizeof(*g));
}


int gpu_launch1(CUfunction f, CUstream stream, void **params)
{
	CUresult e = cu.cuLaunchKernel(f, 1, 1, 1, 1, 1, 1, 0, stream, params, NULL);
	return e == CUDA_SUCCESS ? 0 : gpu_err("cuLaunchKernel", e);
}
