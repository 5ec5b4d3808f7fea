# SPDX-License-Identifier: MIT
"""Completions across processes: a slot exported as an fd, passed over a
Unix socket to another process that awaits it on asyncio, a group that
imports it too, EPERM on an import, BrokenPipeError once the exporter's
slot is released."""

import asyncio
import errno
import os
import socket

import cuflag
from daemon import DaemonTestCase

N = 20


def consumer(sock_path, chan):
    """The other process: import the handle it is sent, await N values on
    asyncio (each as the producer sends it), then the end."""
    async def run(client, slot):
        total = 0
        for _ in range(N):
            value = int(chan.recv(16))
            await slot.wait_async(value)
            total += slot.consume()
        while total < N:
            await asyncio.sleep(0.001)
            total += slot.consume()
        chan.send(str(total).encode())
        while True:
            try:
                slot.consume()
            except BrokenPipeError:
                break
            await asyncio.sleep(0.001)
        chan.send(b"gone")

    _, fds, _, _ = socket.recv_fds(chan, 16, 1)
    with cuflag.Client(sock_path) as client:
        slot = client.import_slot(fds[0])
        os.close(fds[0])
        chan.send(b"imported")  # its count starts now
        asyncio.run(run(client, slot))
        slot.release()


class Export(DaemonTestCase):
    def test_other_process_asyncio(self):
        a, b = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        pid = os.fork()
        if pid == 0:
            a.close()
            code = 0
            try:
                consumer(self.daemon.socket, b)
            except BaseException:
                import traceback
                traceback.print_exc()
                code = 1
            os._exit(code)
        b.close()
        with a:
            slot = self.client.acquire()
            fd = slot.export()
            socket.send_fds(a, [b"h"], [fd])
            os.close(fd)
            self.assertEqual(a.recv(16), b"imported")
            for _ in range(N):
                value = slot.arm()
                slot.complete(value)
                a.send(str(value).encode())
            self.assertEqual(int(a.recv(16)), N)
            slot.release()
            self.assertEqual(a.recv(16), b"gone")
        _, status = os.waitpid(pid, 0)
        self.assertEqual(status, 0)

    def test_group_and_eperm(self):
        exporter = self.client.acquire()
        fd = exporter.export()
        other = cuflag.Client(self.daemon.socket)
        self.addCleanup(other.close)
        imported = other.import_slot(fd)
        with other.group() as group:
            grouped = group.import_slot(fd)
            os.close(fd)
            for call in (imported.arm, imported.export):
                with self.assertRaises(OSError) as cm:
                    call()
                self.assertEqual(cm.exception.errno, errno.EPERM)
            value = exporter.arm_many(3) + 2
            exporter.complete(value)
            imported.wait(value, timeout=5)
            grouped.wait(value, timeout=5)
            total = 0
            while total < 3:
                total += imported.consume()
            self.assertEqual(total, 3)
            exporter.release()
            with self.assertRaises(BrokenPipeError):
                imported.wait(value + 1, timeout=5)
            grouped.release()
        imported.release()

    def test_bad_fds(self):
        r, w = os.pipe()
        os.close(w)
        with self.assertRaises(OSError) as cm:
            self.client.import_slot(w)
        self.assertEqual(cm.exception.errno, errno.EBADF)
        with self.assertRaises(OSError) as cm:
            self.client.import_slot(r)
        self.assertEqual(cm.exception.errno, errno.EINVAL)
        os.close(r)
