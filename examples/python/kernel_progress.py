#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""A persistent CuPy kernel streams its progress into an ``async for``.

One kernel runs for the whole program. For each step it does some work,
writes the step's result into host memory, and completes the slot's next
timeline value itself, with cuflag_device_signal() from
cuflag/cuflag_device.h (compiled by NVRTC through cupy.RawKernel). The
asyncio side never polls the GPU: ``async for n in slot.completions()``
sleeps in the event loop until cuflagd says n more steps are done, and
reads their results, which the signal's release order makes visible.

    cuflagd --socket /tmp/cuflag.sock &
    CUFLAG_SOCKET=/tmp/cuflag.sock python3 kernel_progress.py [--steps N] [--work-us U]

Needs CuPy and a GPU (exit 77 without them). The header is found in
$CUFLAG_INCLUDE, the source tree, or /usr/include. Prints one line per
1000 steps and a PASS line when every step arrived, in order, once.
"""

import argparse
import asyncio
import os
import sys
import time

import cuflag

SKIP = 77

SOURCE = r"""
#include <cuflag/cuflag_device.h>

extern "C" __global__ void progress(cuflag_device_u32 *flag, cuflag_device_u32 first,
                                    cuflag_device_u32 steps, cuflag_device_u32 *results,
                                    unsigned long long work_ns)
{
    for (cuflag_device_u32 k = 0; k < steps; k++) {
        unsigned long long t0, t;
        asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t0));
        do
            asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
        while (t - t0 < work_ns);              /* the step's work */
        results[k] = k * 2654435761u;          /* the step's result */
        cuflag_device_signal(flag, first + k); /* then its completion */
    }
}
"""


def include_dir():
    here = os.path.dirname(os.path.abspath(__file__))
    for d in (os.environ.get("CUFLAG_INCLUDE"),
              os.path.join(here, "..", "..", "client", "include"), "/usr/include"):
        if d and os.path.exists(os.path.join(d, "cuflag", "cuflag_device.h")):
            return os.path.abspath(d)
    sys.exit("cuflag/cuflag_device.h not found: set CUFLAG_INCLUDE")


async def follow(slot, first, steps, results):
    """Count the steps as the kernel completes them; check each result."""
    done = 0
    async for n in slot.completions():
        for k in range(done, done + n):
            if results[k] != (k * 2654435761) & 0xFFFFFFFF:
                raise AssertionError(f"step {k}: result {results[k]} not there at its wake")
        done += n
        if done // 1000 != (done - n) // 1000:
            print(f"  {done} of {steps} steps done", flush=True)
        if done >= steps:
            break
    if done != steps or slot.flag != (first + steps - 1) & 0xFFFFFFFF:
        raise AssertionError(f"{done} steps counted, {steps} armed")
    return done


async def main(args):
    try:
        import cupy
        import numpy
        cupy.cuda.Device(0).use()
        cupy.zeros(1)  # the runtime's context is current in this thread now
    except Exception as e:  # no CuPy, no driver, no device
        print(f"SKIP: no CuPy GPU here ({e})")
        return SKIP
    kernel = cupy.RawKernel(SOURCE, "progress", options=("-I" + include_dir(),))
    results_mem = cupy.cuda.alloc_pinned_memory(4 * args.steps)  # host memory the GPU writes
    results = numpy.frombuffer(results_mem, numpy.uint32, args.steps)
    results[:] = 0
    with cuflag.Client(args.socket) as client, client.acquire() as slot:
        flag = slot.device_pointer()
        first = slot.arm_many(args.steps)  # every step's value, armed before the launch
        t0 = time.monotonic()
        kernel((1,), (1,), (numpy.uint64(flag), numpy.uint32(first), numpy.uint32(args.steps),
                            numpy.uint64(results_mem.ptr), numpy.uint64(args.work_us * 1000)))
        done = await asyncio.wait_for(follow(slot, first, args.steps, results), args.timeout)
        cupy.cuda.Device(0).synchronize()
        dt = time.monotonic() - t0
    print(f"PASS: {done} steps of a persistent kernel streamed into async for, in order, "
          f"each once, {done / dt:.0f} steps/s")
    return 0


if __name__ == "__main__":
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--socket", default=None, help="cuflagd's socket (default: $CUFLAG_SOCKET)")
    p.add_argument("--steps", type=int, default=20000)
    p.add_argument("--work-us", type=int, default=50)
    p.add_argument("--timeout", type=float, default=120.0)
    sys.exit(asyncio.run(main(p.parse_args())))
