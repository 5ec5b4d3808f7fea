// SPDX-License-Identifier: MIT
// Kernels of the GPU tests of signals from inside a kernel, written as a user
// writes them: CUDA C++ against cuflag/cuflag_device.h. Every wait on the
// host is bounded by %globaltimer, so a lost host can never hang the GPU.
#include <cuflag/cuflag_device.h>

typedef cuflag_device_u32 u32;
typedef unsigned long long u64;

static __device__ __forceinline__ u64 now_ns(void)
{
	u64 t;
	asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
	return t;
}

// The host's answer: an acquire load at system scope.
static __device__ __forceinline__ u32 load_acquire(const u32 *p)
{
	u32 v;
	asm volatile("ld.acquire.sys.u32 %0, [%1];" : "=r"(v) : "l"(p) : "memory");
	return v;
}

static __device__ __forceinline__ void pause_ns(u64 ns)
{
	for (u64 end = now_ns() + ns; now_ns() < end;)
		;
}

// One thread signals first .. first+n-1, writing data[v % 64] = v before
// each (host memory), pausing pace_ns after each.
extern "C" __global__ void devsig_stream(u32 *flag, u32 first, u32 n, u32 *data, u64 pace_ns)
{
	for (u32 k = 0; k < n; k++) {
		u32 v = first + k;
		data[v % 64] = v;
		cuflag_device_signal(flag, v);
		if (pace_ns)
			pause_ns(pace_ns);
	}
}

// A block writes a 64-word payload for value v (word j = v * 64 + j, each
// by its own thread), synchronises, and thread 0 signals v; then it waits
// for the host's ack of v before the next. Gives up after timeout_ns
// without an ack, writing the value it waited on into *stuck.
extern "C" __global__ void devsig_payload(u32 *flag, u32 first, u32 n, u32 *payload,
					   const u32 *ack, u32 *stuck, u64 timeout_ns)
{
	__shared__ int give_up;
	for (u32 k = 0; k < n; k++) {
		u32 v = first + k;
		if (threadIdx.x < 64)
			payload[threadIdx.x] = v * 64u + threadIdx.x;
		__syncthreads();
		if (threadIdx.x == 0) {
			cuflag_device_signal(flag, v);
			u64 end = now_ns() + timeout_ns;
			give_up = 0;
			while (load_acquire(ack) != v)
				if (now_ns() > end) {
					*stuck = v;
					give_up = 1;
					break;
				}
		}
		__syncthreads();
		if (give_up)
			return;
	}
}

// Each thread of the grid adds one to data[its index] and advances the flag
// once.
extern "C" __global__ void devsig_advance(u32 *flag, u32 *data)
{
	u32 i = blockIdx.x * blockDim.x + threadIdx.x;
	data[i] += 1;
	cuflag_device_advance(flag);
}

// Block b signals its own slot: flags[b] from firsts[b], n values.
extern "C" __global__ void devsig_group(u32 *const *flags, const u32 *firsts, u32 n)
{
	if (threadIdx.x)
		return;
	u32 *flag = flags[blockIdx.x], first = firsts[blockIdx.x];
	for (u32 k = 0; k < n; k++)
		cuflag_device_signal(flag, first + k);
}
