/* SPDX-License-Identifier: MIT */
/*
 * The one loader of the CUDA Driver API, for the client library and the GPU
 * programs (cuflagd's cuda-ipc slab, cuflag-bench, cuflag-demo, the gpu
 * tests). libcuda.so.1 is opened at run time rather than linked, so every
 * one of them starts on a machine without the NVIDIA driver and only its
 * CUDA work fails there. Each caller keeps its own table of entry points (a
 * struct of function pointers) and says where each one goes.
 */
#ifndef CUFLAG_CUDA_DL_H
#define CUFLAG_CUDA_DL_H

#include <stddef.h>

/* One entry point: its exported name and where its pointer goes. */
struct cuflag_cuda_sym {
	const char *name;
	size_t offset; /* in the caller's table */
};

#define CUFLAG_CUDA_STR(x) #x
#define CUFLAG_CUDA_XSTR(x) CUFLAG_CUDA_STR(x)
/*
 * The entry for the table field `field` of struct type, resolved as `api`
 * names it after cuda.h's macros (which map many calls to their _v2
 * symbols): include cuda.h first.
 */
#define CUFLAG_CUDA_SYM(type, field, api) { CUFLAG_CUDA_XSTR(api), offsetof(type, field) }

/*
 * Open libcuda.so.1 (it stays loaded for the life of the process, as with
 * -lcuda) and store each of the n entry points in syms at its offset in
 * table. 0; -ENODEV when the library cannot be opened (dlerror() says why);
 * -ENOENT when it lacks an entry point (a driver too old), *missing (when
 * not NULL) naming it. The entries before the missing one are filled in.
 */
int cuflag_cuda_resolve(void *table, const struct cuflag_cuda_sym *syms, size_t n,
			const char **missing);

#endif
