# SPDX-License-Identifier: MIT
"""The daemon restarts under a client: Client.reconnect() hands the new
daemon the client's region and eventfds, every completion is counted once,
Client.fd is the new connection, and wait_async() carries on."""

import asyncio
import select
import unittest

import cuflag
from daemon import Daemon, open_fds

TIMEOUT_S = 2


def hung_up(fd):
    p = select.poll()
    p.register(fd, select.POLLRDHUP)
    events = dict(p.poll(0)).get(fd, 0)
    return bool(events & (select.POLLRDHUP | select.POLLHUP | select.POLLERR))


class RestartTest(unittest.TestCase):
    """Each test starts its own daemon, to stop it under the client."""

    def setUp(self):
        fds = open_fds()
        self.addCleanup(lambda: self.assertEqual(open_fds(), fds, "fds leaked"))
        self.daemon = Daemon()
        self.addCleanup(self.daemon.stop)  # harmless once stopped
        self.client = cuflag.Client(self.daemon.socket)
        self.addCleanup(self.client.close)

    def restart_daemon(self, stop=None):
        """Stop the daemon (SIGTERM unless told), wait until the client
        sees the hang-up; return a function that starts the next one on
        the same socket path."""
        (stop or self.daemon.stop)(keep_dir=True)
        fd = self.client.fd
        readable, _, _ = select.select([fd], [], [], TIMEOUT_S)
        self.assertEqual(readable, [fd])
        self.assertTrue(self.client.daemon_gone)

        def start():
            self.daemon = Daemon(directory=self.daemon.dir)
            self.addCleanup(self.daemon.stop)
            return self.daemon

        return start

    def test_reconnect(self):
        s1, s2 = self.client.acquire_many(2)
        ids, fds = (s1.id, s2.id), (s1.fd, s2.fd)
        epoch = self.client.epoch
        old_fd = self.client.fd
        t1 = s1.arm()
        s1.store(t1)
        s1.wait(t1, timeout=TIMEOUT_S)
        # The old daemon has signalled slot 1: its counter is readable.
        readable, _, _ = select.select([s1], [], [], TIMEOUT_S)
        self.assertEqual(readable, [s1])
        t2 = s2.arm()

        start = self.restart_daemon()
        s2.store(t2)  # lands while no daemon runs
        with self.assertRaises((ConnectionRefusedError, FileNotFoundError)):
            self.client.reconnect()
        self.assertTrue(self.client.daemon_gone)  # a failure changes nothing
        start()
        self.client.reconnect()

        self.assertFalse(self.client.daemon_gone)
        self.assertNotEqual(self.client.epoch, epoch)
        self.assertEqual(self.client.fd, old_fd)  # the number stays; the connection is new
        self.assertFalse(hung_up(self.client.fd))
        self.assertEqual((s1.id, s2.id), ids)
        self.assertEqual((s1.fd, s2.fd), fds)
        self.assertEqual(s1.consume(), 1)  # signalled by the old daemon
        readable, _, _ = select.select([s2], [], [], TIMEOUT_S)
        self.assertEqual(readable, [s2])
        self.assertEqual(s2.consume(), 1)  # by the new one
        # Nothing twice.
        readable, _, _ = select.select([s1, s2], [], [], 0.05)
        self.assertEqual(readable, [])
        self.assertEqual(s1.consume() + s2.consume(), 0)

        # The slots work on with the new daemon.
        for slot in (s1, s2):
            t = slot.arm()
            slot.store(t)
            slot.wait(t, timeout=TIMEOUT_S)
            readable, _, _ = select.select([slot], [], [], TIMEOUT_S)
            self.assertEqual(readable, [slot])
            self.assertEqual(slot.consume(), 1)
        s3 = self.client.acquire()
        t3 = s3.arm()
        s3.store(t3)
        s3.wait(t3, timeout=TIMEOUT_S)

        async def main():
            loop = asyncio.get_running_loop()
            t = s2.arm()
            loop.call_later(0.01, s2.store, t)
            async with asyncio.timeout(TIMEOUT_S):
                await s2.wait_async(t)
            # Through the eventfd, with the new connection watched.
            self.assertFalse(self.client._gone)
            counts = []
            t = s1.arm()
            loop.call_later(0.01, s1.store, t)
            async with asyncio.timeout(TIMEOUT_S):
                async for n in s1.completions():
                    counts.append(n)
                    break
            self.assertEqual(counts, [1])

        asyncio.run(main())
        self.assertFalse(self.client.daemon_gone)
        for slot in (s1, s2, s3):
            slot.release()

    def test_wait_async_across_restart(self):
        """A wait in progress while the daemon restarts: its reader of the
        connection moves to the new one, and the signal of the new daemon
        wakes it."""
        slot = self.client.acquire()
        target = slot.arm()
        old_fd = self.client.fd

        async def main():
            loop = asyncio.get_running_loop()
            waiter = asyncio.create_task(slot.wait_async(target))
            await asyncio.sleep(0.01)
            watch = self.client._hangup_watches[loop]
            # SIGTERM with the loop busy: the hang-up is not seen by the loop.
            self.daemon.stop(keep_dir=True)
            self.daemon = Daemon(directory=self.daemon.dir)
            self.addCleanup(self.daemon.stop)
            self.client.reconnect()
            self.assertIs(self.client._hangup_watches.get(loop), watch)
            self.assertEqual(watch.fd, self.client.fd)
            self.assertEqual(self.client.fd, old_fd)  # the number stays; the connection is new
            await asyncio.sleep(0.01)
            self.assertFalse(waiter.done())
            self.assertFalse(self.client._gone)  # the new fd did not hang up
            slot.store(target)
            async with asyncio.timeout(TIMEOUT_S):
                await waiter
            self.assertEqual(slot.consume(), 1)

        asyncio.run(main())
        self.assertEqual(self.client._hangup_watches, {})
        slot.release()

    def test_reconnect_async(self):
        slot = self.client.acquire()
        target = slot.arm()
        start = self.restart_daemon(stop=self.daemon.kill)
        slot.store(target)

        async def main():
            loop = asyncio.get_running_loop()
            with self.assertRaises(TimeoutError):
                await self.client.reconnect_async(retry_interval=0.005, timeout=0.02)
            loop.call_later(0.05, start)
            async with asyncio.timeout(TIMEOUT_S * 5):
                await self.client.reconnect_async(retry_interval=0.005)
            self.assertFalse(self.client.daemon_gone)
            async with asyncio.timeout(TIMEOUT_S):
                await slot.wait_async(target)
                async for n in slot.completions():
                    self.assertEqual(n, 1)
                    break

        asyncio.run(main())
        slot.release()

    def test_no_daemon(self):
        self.daemon.stop()
        with self.assertRaises((ConnectionRefusedError, FileNotFoundError)):
            self.client.reconnect()
        with self.assertRaises(ValueError):
            asyncio.run(self.client.reconnect_async(retry_interval=0))

    def test_closed(self):
        self.client.close()
        with self.assertRaises(ValueError):
            self.client.reconnect()


if __name__ == "__main__":
    unittest.main()
