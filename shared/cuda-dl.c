/* SPDX-License-Identifier: MIT */
#include "cuda-dl.h"

#include <dlfcn.h>
#include <errno.h>
#include <string.h>

int cuflag_cuda_resolve(void *table, const struct cuflag_cuda_sym *syms, size_t n,
			const char **missing)
{
	void *h = dlopen("libcuda.so.1", RTLD_NOW | RTLD_GLOBAL);

	if (!h)
		return -ENODEV;
	for (size_t i = 0; i < n; i++) {
		void *f = dlsym(h, syms[i].name);

		if (!f) {
			if (missing)
				*missing = syms[i].name;
			return -ENOENT;
		}
		/* A function pointer stored through its bytes: the table's field
		 * has the entry point's own type. */
		memcpy((char *)table + syms[i].offset, &f, sizeof(f));
	}
	return 0;
}
