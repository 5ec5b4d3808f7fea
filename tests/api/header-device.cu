// SPDX-License-Identifier: MIT
// The device header alone in a kernel, as a user writes one: nvcc and NVRTC
// must compile it, and what they make must carry the documented PTX.
#include <cuflag/cuflag_device.h>

extern "C" __global__ void cuflag_header_check(cuflag_device_u32 *flag, cuflag_device_u32 *data,
					       cuflag_device_u32 n)
{
	for (cuflag_device_u32 i = 1; i <= n; i++) {
		data[i % 8] = i;
		cuflag_device_signal(flag, i);
	}
	cuflag_device_advance(flag + 1);
}
