/* SPDX-License-Identifier: MIT */
/* The CUDA header compiles alone against cuda.h and links (the driver is
 * loaded at first use, so this runs without one). */
#include <cuflag/cuflag_cuda.h>

int main(void)
{
	CUdeviceptr dptr = 0;

	/* No slot: the binding says so without touching the driver. */
	if (cuflag_cuda_signal(0, 0, 0) != -22 || cuflag_cuda_slot_devptr(0, &dptr) != -22)
		return 1;
	return cuflag_slot_arm_many(0, 1, 0) == -22 ? 0 : 1;
}
