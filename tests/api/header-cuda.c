/* SPDX-License-Identifier: MIT */
/* The CUDA header compiles alone against cuda.h and links (the driver is
 * loaded at first use, so this runs without one). */
#include <cuflag/cuflag_cuda.h>

int main(void)
{
	/* No slot: the binding says so without touching the driver. */
	return cuflag_cuda_signal(0, 0, 0) == -22 ? 0 : 1;
}
