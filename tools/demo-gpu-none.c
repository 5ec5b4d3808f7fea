/* SPDX-License-Identifier: MIT */
/* Built without cuda.h: the demo runs on the simulated device. */
#include "demo.h"

int demo_gpu(cuflag_client *c, const struct demo_opts *o, struct demo_result *r)
{
	(void)c;
	(void)o;
	(void)r;
	return 77;
}
