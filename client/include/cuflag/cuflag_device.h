/* SPDX-License-Identifier: MIT */
/*
 * cuflag_device.h: complete a cuflag slot from inside a running kernel.
 *
 * Header only, device code only, no link dependency: include it in a .cu file
 * compiled by nvcc, or in a program compiled by NVRTC (no host header is
 * needed then). It needs compute capability 7.0 or newer (the PTX release
 * and system-scope qualifiers).
 *
 * The host side: cuflag_cuda_slot_devptr() gives the slot's flag as a device
 * address (pass it to the kernel as a pointer to a 32-bit unsigned integer),
 * cuflag_slot_arm() / cuflag_slot_arm_many() reserve and arm the values the
 * kernel will complete. See cuflag_cuda.h and docs/device-signals.md.
 *
 * Memory-order contract. Both functions are release operations at system
 * scope (cuda::thread_scope_system, the scope that includes the host):
 *   - every write the calling thread made before the call, and every write
 *     that happens before the call in the CUDA memory model (writes of
 *     other threads of the block followed by __syncthreads(), writes of
 *     other blocks that the caller acquired through an atomic or a fence),
 *     is visible to a host thread that has seen the flag reach the value;
 *   - cuflagd reads the flag with an acquire load and signals the slot's
 *     eventfd (or the group's) after it; a host thread that wakes from that
 *     eventfd, or that reads the flag itself with an acquire load
 *     (cuflag_slot_wait()), sees those writes. Host memory (mapped pinned,
 *     or a host-registered region) is where such data must live for the host
 *     to read it without a copy.
 * Neither function waits for the store to reach the host: it is posted, and
 * the flag's new value becomes visible to the host about a microsecond later.
 *
 * The same in PTX (for Triton, numba, or hand-written PTX; sm_70, PTX 6.0):
 *   signal:   st.release.sys.u32 [flag], value;
 *   advance:  red.release.sys.add.u32 [flag], 1;
 * (Triton: tl.atomic_xchg(flag, value, sem="release", scope="sys") and
 *  tl.atomic_add(flag, 1, sem="release", scope="sys"); numba:
 *  cuda.threadfence_system() before the store or cuda.atomic.add.)
 *
 * Which values to write: the flag is the slot's timeline. Store only values
 * the host has reserved (cuflag_slot_arm*() returned them), in increasing
 * order, at most 2^31 ahead of what the host last consumed; the daemon counts
 * min(flag, highest value armed) minus what it signalled before, so a store
 * ahead of the arms is counted once the arms reach it, never more.
 * Advances from several devices to one flag are not atomic with each other
 * (atomics to host memory are atomic per device): one device per flag.
 */
#ifndef CUFLAG_CUFLAG_DEVICE_H
#define CUFLAG_CUFLAG_DEVICE_H

#if !defined(__CUDACC__) && !defined(__CUDACC_RTC__)
#error "cuflag_device.h is CUDA device code: compile it with nvcc or NVRTC"
#endif

#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ < 700
#error "cuflag_device.h needs compute capability 7.0 or newer (st.release.sys)"
#endif

/* NVRTC may lack <stdint.h>: the flag is an unsigned int, which is what
 * uint32_t is wherever CUDA runs. */
typedef unsigned int cuflag_device_u32;
static_assert(sizeof(cuflag_device_u32) == 4, "a cuflag flag is 32 bits");

/**
 * cuflag_device_signal() - store @value into the flag, release, system scope.
 * @flag: the slot's device address (cuflag_cuda_slot_devptr()).
 * @value: a value the host armed; one thread stores each value.
 *
 * For one writer that knows the value it completes (value n for the n-th
 * item of a persistent loop, counted from the first value the host reserved).
 */
static __device__ __forceinline__ void cuflag_device_signal(cuflag_device_u32 *flag,
							    cuflag_device_u32 value)
{
	asm volatile("st.release.sys.u32 [%0], %1;" : : "l"(flag), "r"(value) : "memory");
}

/**
 * cuflag_device_advance() - add one to the flag, release, system scope.
 * @flag: the slot's device address (cuflag_cuda_slot_devptr()).
 *
 * For many writers (threads or blocks) that each complete one value, in any
 * order: after k calls the flag has moved k values on.
 */
static __device__ __forceinline__ void cuflag_device_advance(cuflag_device_u32 *flag)
{
	asm volatile("red.release.sys.add.u32 [%0], 1;" : : "l"(flag) : "memory");
}

#endif
