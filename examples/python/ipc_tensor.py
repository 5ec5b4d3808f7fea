#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""One process's GPU work awaited by another on asyncio.

A producer process fills a tensor in device memory that it shares by CUDA
IPC, and signals a cuflag slot after that work on its stream; it hands the
consumer the IPC handle and the slot's export (an fd, over a Unix socket).
The consumer imports the slot and, for each value the producer sends (at
once, before the work is done), awaits it on its asyncio loop and reads the
tensor; with --gpu-wait its stream waits for the value on the GPU instead
(slot.cuda_wait()), and it awaits only its own copy.

The CUDA calls go straight to the driver (ctypes, libcuda.so.1): no PyTorch
or CuPy is needed. Exit 77 without a GPU.

    cuflagd --socket /tmp/cuflag.sock &
    CUFLAG_SOCKET=/tmp/cuflag.sock python3 ipc_tensor.py [--gpu-wait] [--rounds N]
"""

import argparse
import asyncio
import ctypes
import os
import socket
import struct
import sys

import cuflag

SKIP = 77
ELEMS = 1 << 22          # 16 MiB of uint32
FILLS = 8                # the "computation": the tensor filled this many times


class Cuda:
    """The few Driver API calls the example makes, checked."""

    def __init__(self):
        try:
            self.lib = ctypes.CDLL("libcuda.so.1")
        except OSError:
            print("ipc_tensor.py: no NVIDIA driver here", file=sys.stderr)
            sys.exit(SKIP)
        if self.lib.cuInit(0) != 0:
            print("ipc_tensor.py: no usable GPU here", file=sys.stderr)
            sys.exit(SKIP)
        dev, ctx = ctypes.c_int(), ctypes.c_void_p()
        self.call("cuDeviceGet", ctypes.byref(dev), 0)
        self.call("cuDevicePrimaryCtxRetain", ctypes.byref(ctx), dev)
        self.call("cuCtxSetCurrent", ctx)
        stream = ctypes.c_void_p()
        self.call("cuStreamCreate", ctypes.byref(stream), 1)  # CU_STREAM_NON_BLOCKING
        self.stream = stream.value

    def call(self, name, *args):
        rc = getattr(self.lib, name)(*args)
        if rc != 0:
            raise RuntimeError(f"{name} failed: CUresult {rc}")


class IpcHandle(ctypes.Structure):
    _fields_ = [("reserved", ctypes.c_ubyte * 64)]


def producer(chan, rounds):
    cu = Cuda()
    tensor = ctypes.c_uint64()
    cu.call("cuMemAlloc_v2", ctypes.byref(tensor), ctypes.c_size_t(ELEMS * 4))
    handle = IpcHandle()
    cu.call("cuIpcGetMemHandle", ctypes.byref(handle), tensor)
    with cuflag.Client() as client:
        slot = client.acquire()
        fd = slot.export()
        socket.send_fds(chan, [bytes(handle.reserved)], [fd])
        os.close(fd)
        chan.recv(8)  # imported: an import counts from when it is made
        for r in range(rounds):
            pattern = 0x1000 + r
            for k in range(FILLS):  # the last fill is the result
                cu.call("cuMemsetD32Async", tensor, ctypes.c_uint(pattern if k == FILLS - 1 else k),
                        ctypes.c_size_t(ELEMS), ctypes.c_void_p(cu.stream))
            value = slot.signal(cu.stream)
            chan.send(struct.pack("<II", value, pattern))  # before the work is done
            chan.recv(8)
        cu.call("cuStreamSynchronize", ctypes.c_void_p(cu.stream))
        slot.release()  # the consumer's import ends (BrokenPipeError there)
    chan.shutdown(socket.SHUT_WR)
    chan.recv(1)


async def consume(client, imported, cu, tensor, chan, gpu_wait):
    host = (ctypes.c_uint32 * ELEMS)()
    own = client.acquire() if gpu_wait else None
    loop = asyncio.get_running_loop()
    rounds = counted = 0
    while True:
        msg = await loop.sock_recv(chan, 8)
        if not msg:
            break
        value, pattern = struct.unpack("<II", msg)
        if gpu_wait:
            # The stream waits on the GPU; the loop awaits only the copy.
            imported.cuda_wait(cu.stream, value)
            cu.call("cuMemcpyDtoHAsync_v2", host, tensor, ctypes.c_size_t(ELEMS * 4),
                    ctypes.c_void_p(cu.stream))
            await own.wait_async(own.signal(cu.stream))
        else:
            await imported.wait_async(value)
            cu.call("cuMemcpyDtoH_v2", host, tensor, ctypes.c_size_t(ELEMS * 4))
        counted += imported.consume()
        if bytes(host) != struct.pack("<I", pattern) * ELEMS:
            raise SystemExit(f"ipc_tensor.py: FAIL round {rounds}: tensor read before its value")
        rounds += 1
        await loop.sock_sendall(chan, msg)
    while True:  # the producer released its slot: the rest, then EPIPE
        try:
            counted += imported.consume()
        except BrokenPipeError:
            break
        await asyncio.sleep(0.001)
    if counted != rounds:
        raise SystemExit(f"ipc_tensor.py: FAIL {counted} completions for {rounds} rounds")
    print(f"ipc_tensor.py consumer: {rounds} tensors read "
          f"({'its stream waited on the GPU' if gpu_wait else 'awaited on asyncio'}), "
          "each completion counted once")
    if own is not None:
        own.release()


def consumer(chan, gpu_wait):
    msg, fds, _, _ = socket.recv_fds(chan, 64, 1)
    cu = Cuda()
    handle = IpcHandle()
    ctypes.memmove(ctypes.addressof(handle), msg, len(msg))
    tensor = ctypes.c_uint64()
    cu.call("cuIpcOpenMemHandle_v2", ctypes.byref(tensor), handle, 1)  # LAZY_ENABLE_PEER_ACCESS
    with cuflag.Client() as client:
        imported = client.import_slot(fds[0])
        os.close(fds[0])
        chan.send(b"imported")
        chan.setblocking(False)
        asyncio.run(consume(client, imported, cu, tensor, chan, gpu_wait))
        imported.release()
    cu.call("cuIpcCloseMemHandle", tensor)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--gpu-wait", action="store_true")
    ap.add_argument("--rounds", type=int, default=100)
    args = ap.parse_args()
    try:
        ctypes.CDLL("libcuda.so.1")
    except OSError:
        print("ipc_tensor.py: no NVIDIA driver here", file=sys.stderr)
        return SKIP
    a, b = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    # Two processes, each initializing CUDA on its own after the fork.
    pid = os.fork()
    if pid == 0:
        a.close()
        code = 0
        try:
            consumer(b, args.gpu_wait)
        except BaseException as e:  # noqa: BLE001 - reported, then the exit status
            print(f"ipc_tensor.py consumer: {e!r}", file=sys.stderr)
            code = e.code if isinstance(e, SystemExit) and isinstance(e.code, int) else 1
        os._exit(code)
    b.close()
    producer(a, args.rounds)
    _, status = os.waitpid(pid, 0)
    code = os.waitstatus_to_exitcode(status)
    if code == 0:
        print("ipc_tensor.py: ok")
    return code


if __name__ == "__main__":
    sys.exit(main())
