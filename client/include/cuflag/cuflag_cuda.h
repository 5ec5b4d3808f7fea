/* SPDX-License-Identifier: MIT */
/*
 * The CUDA binding of libcuflag-client (CUDA Driver API only).
 *
 * cuflag_cuda_signal() makes a stream complete a slot's next timeline value:
 * after the work already enqueued on the stream, the device stores the value
 * into the slot's flag (cuStreamWriteValue32), and the slot is armed, so the
 * daemon signals the slot's eventfd when the store lands.
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
 * A device fault in the stream's context ends cuflag_slot_wait() on this
 * slot with -EIO instead of hanging (the wait checks the slot's last stream
 * with cuStreamQuery() whenever 100 ms pass without a signal); a process that
 * polls the eventfd itself calls cuflag_cuda_check() when a slot makes no
 * progress for a while. Keep the stream alive while a wait may probe it.
 *
 * Return: 0, or -ENOSYS (the library was built without CUDA), -EINVAL (NULL
 * argument), -ENODEV (no current context for the
 * stream, or the pages cannot be mapped for this device), -EIO (the driver
 * refused both the write and the host function; the slot is not armed),
 * -ENOMEM, -ECHILD (the slot's client was connected by the parent of this
 * process), or an error of cuflag_slot_arm().
 */
CUFLAG_API int cuflag_cuda_signal(cuflag_slot *s, CUstream stream, uint32_t *target);

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
