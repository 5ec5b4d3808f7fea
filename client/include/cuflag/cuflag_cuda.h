/* SPDX-License-Identifier: MIT */
/*
 * The CUDA binding of libcuflag-client (CUDA Driver API only).
 *
 * cuflag_cuda_signal() makes a stream complete a slot's next timeline value:
 * after the work already enqueued on the stream, the device stores the value
 * into the slot's flag (cuStreamWriteValue32), and the slot is armed, so the
 * daemon signals the slot's eventfd when the store lands.
 *
 * Inside a CUDA graph, a fixed value would complete the slot at the graph's
 * first launch only. On a stream under capture cuflag_cuda_signal() records
 * instead a node that advances the flag by one at each launch, and the host
 * arms once per launch with cuflag_cuda_launched().
 */
#ifndef CUFLAG_CUFLAG_CUDA_H
#define CUFLAG_CUFLAG_CUDA_H

#include <cuda.h>

#include "cuflag.h"

#ifdef __cplusplus
extern "C" {
#endif

/** Set to 1 to make every signal use the host-function fallback. */
#define CUFLAG_CUDA_FORCE_HOSTFN_ENV "CUFLAG_CUDA_FORCE_HOSTFN"

/**
 * cuflag_cuda_signal() - complete the slot's next value after @stream's work.
 * @target: receives the value, as cuflag_slot_arm() does.
 *
 * On first use in a context, the client's flag pages are registered in it
 * (cuMemHostRegister, DEVICEMAP|PORTABLE; undone at disconnect). If the
 * stream memory operation is refused, the same store is done by a host
 * function on the stream (cuLaunchHostFunc); set CUFLAG_CUDA_FORCE_HOSTFN=1
 * to force that path. Streams of several contexts and devices may signal
 * slots of one client.
 *
 * On a stream under graph capture (cuStreamBeginCapture(), or a framework's
 * capture such as torch.cuda.graph) the call records a kernel node (a host
 * node when CUFLAG_CUDA_FORCE_HOSTFN=1 or the kernel cannot be loaded) that
 * advances the flag by one at each launch of the graph, after the work
 * captured before it. It reserves and arms nothing and sets *@target to 0:
 * after each launch, cuflag_cuda_launched() arms the value that launch
 * completes. A slot signalled so is best given to that one graph: values are
 * armed in the order the host calls, and the advances land in the order the
 * launches run, so the two must agree (launches of one graph, or of graphs
 * and signals on one stream, run in the order they were made). The set-up of
 * a first use (registration, the kernel's module) is made in the relaxed
 * capture mode, so it does not invalidate a capture in the global mode.
 * Launching the graph after the slot's client disconnected writes to freed
 * memory: destroy such graphs first.
 *
 * A device fault in the stream's context ends cuflag_slot_wait() on this
 * slot with -EIO instead of hanging (the wait checks the slot's last stream
 * with cuStreamQuery() whenever 100 ms pass without a signal); a process that
 * polls the eventfd itself calls cuflag_cuda_check() when a slot makes no
 * progress for a while. Keep the stream alive while a wait may probe it.
 *
 * Return: 0, or -ENOSYS (the library was built without CUDA), -EINVAL (NULL
 * argument), -ENODEV (no current context for the
 * stream, or the pages cannot be mapped for this device), -EIO (the driver
 * refused both the write and the host function, or the stream's context has
 * faulted; the slot is not armed),
 * -ENOMEM, -ECHILD (the slot's client was connected by the parent of this
 * process), -EPERM (an imported slot), or an error of cuflag_slot_arm().
 */
CUFLAG_API int cuflag_cuda_signal(cuflag_slot *s, CUstream stream, uint32_t *target);

/**
 * cuflag_cuda_launched() - arm the value a graph launch completes.
 * @stream: the stream the graph was launched on (cuGraphLaunch()), just
 *          before this call; it becomes the stream the fault probe checks.
 * @target: receives the value, as cuflag_slot_arm() does.
 *
 * For a slot whose cuflag_cuda_signal() was captured into the graph: call it
 * once per launch (per captured signal of the slot), in launch order. It is
 * cuflag_slot_arm() plus what lets cuflag_slot_wait() report a device fault
 * of the launch with -EIO (cuflag_slot_arm() alone would leave the wait
 * without a stream to check).
 *
 * Return: 0, or -ENOSYS (built without CUDA), -EINVAL (NULL argument),
 * -ENODEV (no driver, or no context for the stream), -ENOMEM, -ECHILD (the
 * slot's client was connected by the parent of this process), -EPERM (an
 * imported slot), or an error of cuflag_slot_arm().
 */
CUFLAG_API int cuflag_cuda_launched(cuflag_slot *s, CUstream stream, uint32_t *target);

/**
 * cuflag_cuda_slot_devptr() - the slot's flag as a device address, for a
 * kernel that completes the slot from inside (cuflag/cuflag_device.h).
 * @out: receives the address, valid in the calling thread's current context
 *       (and, the registration being PORTABLE, usually in every context of
 *       the process: ask each context to be sure).
 *
 * On first use in a context the client's flag pages are registered in it,
 * exactly as by cuflag_cuda_signal() (cuMemHostRegister, DEVICEMAP|PORTABLE;
 * undone at disconnect). Nothing is armed: arm the values the kernel will
 * write with cuflag_slot_arm() or cuflag_slot_arm_many(), and let the kernel
 * store only those (see cuflag_slot_arm_many() for what a kernel ahead of
 * the arms gets). The address stays valid while the client is connected,
 * across daemon restarts (the flag pages are this process's memory, handed
 * to each new daemon; with --slab cuda-ipc the client cannot resume at all),
 * until cuflag_disconnect(): let the kernels that hold it end first. A
 * child of fork(2) gets -ECHILD and must connect anew; the address the
 * parent got means nothing in the child's own contexts.
 * Return: 0, or -ENOSYS (built without CUDA), -EINVAL (NULL argument, or no
 * context is current in this thread: cuCtxSetCurrent() or
 * cuDevicePrimaryCtxRetain() first; a framework such as PyTorch or CuPy makes
 * its context current when it first uses the device), -ENODEV (no driver,
 * cuInit() not called, or the pages cannot be mapped for this device),
 * -ENOMEM, -ECHILD (the slot's client was connected by the parent of this
 * process), -EPERM (an imported slot: its flag is the daemon's to write).
 */
CUFLAG_API int cuflag_cuda_slot_devptr(cuflag_slot *s, CUdeviceptr *out);

/**
 * cuflag_cuda_wait() - make @stream wait, on the GPU, until the slot's
 * timeline reaches @value: work queued on @stream after this call runs only
 * then, with no host thread involved. For an imported slot
 * (cuflag_slot_import()) the timeline is the exporter's, so a consumer's
 * stream waits for the producer's work, across processes, as
 * cudaStreamWaitEvent() on an IPC event does, with a host-side fd beside it.
 *
 * The stream waits on the slot's flag (cuStreamWaitValue32, which compares
 * as unsigned numbers); the timeline compares values 2^31 apart (see
 * cuflag_slot_wait()), so the call looks at the value reached now: @value
 * reached already enqueues nothing; a @value ahead across the wrap at 2^32
 * waits in two steps (for the flag to wrap, then to reach @value). Name a
 * value less than 2^31 ahead of the one reached, and do not let the
 * timeline run 2^32 past @value before the stream gets to the wait.
 * The flag pages are registered in the stream's context on first use, as by
 * cuflag_cuda_signal(). Under graph capture the wait is recorded like any
 * memory operation: each launch waits for the same @value.
 * Return: 0, or -ENOSYS (built without CUDA), -EINVAL (NULL slot), -ENODEV
 * (no driver, no context for the stream, or the pages cannot be mapped for
 * this device), -EIO (the driver refused the wait: stream memory operations
 * unsupported, or the context has faulted), -EPIPE (an imported slot whose
 * exporter's slot went before @value was reached), -ENOMEM, -ECHILD (the
 * slot's client was connected by the parent of this process).
 */
CUFLAG_API int cuflag_cuda_wait(cuflag_slot *s, CUstream stream, uint32_t value);

/**
 * cuflag_cuda_capturing() - is @stream being captured into a graph?
 * Lets a caller that must not record into a graph (a synchronize) tell
 * beforehand, and one that got *target 0 from cuflag_cuda_signal() tell a
 * capture from a timeline value that wrapped to 0.
 * Return: 1 (capturing), 0 (not capturing, or a capture that was
 * invalidated), -ENOSYS (built without CUDA), -ENODEV (no driver, or the
 * driver does not know the stream, e.g. the legacy stream 0 with no current
 * context), -EIO (the stream's context has faulted).
 */
CUFLAG_API int cuflag_cuda_capturing(CUstream stream);

/**
 * cuflag_cuda_check() - has a device fault stopped the slot's work?
 * Checks the stream of the slot's last cuflag_cuda_signal() (non-blocking).
 * Return: 0 (no fault seen, or the slot was never signalled from CUDA),
 * -EIO (the stream's context has faulted: the flag will not advance),
 * -EINVAL (NULL slot), -ENOSYS (built without CUDA), -ECHILD (the slot's client
 * was connected by the parent of this process).
 */
CUFLAG_API int cuflag_cuda_check(cuflag_slot *s);

#ifdef __cplusplus
}
#endif

#endif
