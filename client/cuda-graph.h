/* SPDX-License-Identifier: MIT */
/*
 * Signals recorded into a CUDA graph (cuda-graph.c). A store of a fixed value
 * would complete the slot at the graph's first launch only; what a capture
 * records instead advances the flag by one at every launch, and the host arms
 * once per launch.
 */
#ifndef CUFLAG_CUDA_GRAPH_H
#define CUFLAG_CUDA_GRAPH_H

#include <cuda.h>
#include <stdint.h>

/* The advance kernel of one context; fn is NULL until loaded. */
struct cuflag_advance {
	CUmodule mod;
	CUfunction fn;
};

/* 1 when stream is being captured, 0 when not (or its capture was
 * invalidated: then every enqueue fails by itself), -ENODEV when the driver
 * does not know the stream, -EIO when its context has faulted. */
int cuflag__capturing(CUstream stream);

/*
 * Set-up calls (registering pages, loading a module) are refused while a
 * capture in the global mode is under way, and the refusal invalidates that
 * capture. Between these two the calling thread makes them in the relaxed
 * mode, which capture allows.
 */
CUstreamCaptureMode cuflag__capture_relax(void);
void cuflag__capture_restore(CUstreamCaptureMode mode);

/* Load the advance kernel into the current context: 0 or -ENODEV. */
int cuflag__advance_load(struct cuflag_advance *a);
/* Unload it (its context current); harmless when it was never loaded. */
void cuflag__advance_unload(struct cuflag_advance *a);

/*
 * Enqueue "flag += 1" on stream, after the work enqueued so far: the kernel
 * (dflag, the flag's device address) or, without a kernel or when forced, a
 * host function on the host address. 0, or -EIO when the driver refused.
 */
int cuflag__advance_enqueue(const struct cuflag_advance *a, CUstream stream, CUdeviceptr dflag,
			    volatile uint32_t *flag, int force_hostfn);

#endif
