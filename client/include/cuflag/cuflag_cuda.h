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
 * slot with -EIO instead of hanging; a process that polls the eventfd itself
 * learns the same by calling cuflag_slot_wait(s, target, 0) (which returns -EIO)
 * or by checking its stream with cuStreamQuery().
 *
 * Return: 0, or -ENOSYS (the library was built without CUDA), -EINVAL (NULL
 * argument), -ENODEV (no current context for the
 * stream, or the pages cannot be mapped for this device), -EIO (the driver
 * refused both the write and the host function; the slot is not armed),
 * -ENOMEM, or an error of cuflag_slot_arm().
 */
CUFLAG_API int cuflag_cuda_signal(cuflag_slot *s, CUstream stream, uint32_t *target);

#ifdef __cplusplus
}
#endif

#endif
