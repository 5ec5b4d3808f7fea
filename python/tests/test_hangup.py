# SPDX-License-Identifier: MIT
"""The daemon goes away (SIGKILL) and does not come back: Client.fd hangs
up, waits go on by looking at the flag itself, the calls that need the
daemon (acquire, an arm that finds the queue full, completions()) raise
ConnectionError(ENOTCONN) once the client's resume timeout has passed, and
several waiters share one reader of the connection."""

import asyncio
import errno
import os
import select
import socket
import threading
import time
import unittest

import cuflag
from cuflag._timeout import timeout as within  # asyncio.timeout() before 3.11 too
from daemon import Daemon, open_fds

TIMEOUT_S = 2
RESUME_TIMEOUT_S = 0.2


class HangupTest(unittest.TestCase):
    """Each test starts its own daemon, to kill it."""

    def setUp(self):
        fds = open_fds()
        self.addCleanup(lambda: self.assertEqual(open_fds(), fds, "fds leaked"))
        self.daemon = Daemon("--queue-size", "16")
        self.addCleanup(self.daemon.stop)  # harmless once killed
        self.client = cuflag.Client(self.daemon.socket, resume_timeout=RESUME_TIMEOUT_S)
        self.addCleanup(self.client.close)

    def assert_hung_up(self):
        fd = self.client.fd
        readable, _, _ = select.select([fd], [], [], TIMEOUT_S)
        self.assertEqual(readable, [fd])
        p = select.poll()
        p.register(fd, select.POLLRDHUP)
        events = dict(p.poll(0)).get(fd, 0)
        self.assertTrue(events & (select.POLLRDHUP | select.POLLHUP), hex(events))
        self.assertTrue(self.client.daemon_gone)

    def assert_not_connected(self, cm, started):
        """The error of a call that waited for the resume timeout."""
        self.assertIsInstance(cm.exception, ConnectionError)
        self.assertEqual(cm.exception.errno, errno.ENOTCONN)
        took = time.monotonic() - started
        self.assertGreaterEqual(took, RESUME_TIMEOUT_S * 0.9)
        self.assertLess(took, TIMEOUT_S)

    async def wait_then_kill(self, slot, target):
        """A wait_async() of target in progress when the daemon is killed:
        its task, and the loop's watch once it has seen the hang-up (it
        tries to resume from then on)."""
        waiter = asyncio.create_task(slot.wait_async(target))
        await asyncio.sleep(0.01)
        self.assertFalse(waiter.done())
        self.assertIsNotNone(slot._watch)
        watch = self.client._dispatchers[asyncio.get_running_loop()]
        await asyncio.to_thread(self.daemon.kill)
        async with within(TIMEOUT_S):
            while watch.state == 0:
                await asyncio.sleep(0.001)
        return waiter, watch

    def test_fd(self):
        fd = self.client.fd
        self.assertIsInstance(fd, int)
        self.assertGreaterEqual(fd, 0)
        self.assertFalse(self.client.daemon_gone)
        readable, _, _ = select.select([fd], [], [], 0.02)
        self.assertEqual(readable, [])
        self.daemon.kill()
        self.assert_hung_up()

    def test_resume_timeout(self):
        self.assertEqual(self.client.resume_timeout, RESUME_TIMEOUT_S)
        for forever in (None, float("inf")):
            self.client.resume_timeout = forever
            self.assertIsNone(self.client.resume_timeout)
        self.client.resume_timeout = 1
        self.assertEqual(self.client.resume_timeout, 1.0)
        for bad in (-1, float("nan")):
            with self.assertRaises(ValueError):
                self.client.resume_timeout = bad
            with self.assertRaises(ValueError):
                cuflag.Client(self.daemon.socket, resume_timeout=bad)
        self.assertEqual(self.client.resume_timeout, 1.0)
        with cuflag.Client(self.daemon.socket) as other:
            self.assertEqual(other.resume_timeout, cuflag.DEFAULT_RESUME_TIMEOUT_S)
        self.client.close()
        with self.assertRaises(ValueError):
            self.client.resume_timeout = 1

    def test_acquire_gives_up(self):
        self.daemon.kill()
        started = time.monotonic()
        with self.assertRaises(OSError) as cm:
            self.client.acquire()
        self.assert_not_connected(cm, started)

    def test_arm_gives_up(self):
        """Arms wait in the region's queue for the next daemon; one that
        finds it full waits for a daemon up to the resume timeout."""
        slot = self.client.acquire()
        self.daemon.kill()
        self.assert_hung_up()
        for _ in range(16):  # the queue's room
            slot.arm()
        started = time.monotonic()
        with self.assertRaises(OSError) as cm:
            slot.arm()
        self.assert_not_connected(cm, started)
        slot.release()

    def test_wait_outlives_daemon(self):
        """A blocking wait looks at the flag itself, unbounded by the resume
        timeout."""
        slot = self.client.acquire()
        target = slot.arm()
        self.daemon.kill()
        self.assert_hung_up()
        timer = threading.Timer(RESUME_TIMEOUT_S * 2, slot.store, (target,))
        timer.start()
        self.addCleanup(timer.join)
        slot.wait(target, timeout=TIMEOUT_S * 2)
        slot.release()

    def test_wait_async_outlives_daemon(self):
        slot = self.client.acquire()
        target = slot.arm()

        async def main():
            loop = asyncio.get_running_loop()
            waiter, watch = await self.wait_then_kill(slot, target)
            # Past the resume timeout too: a wait is not bounded by it.
            await asyncio.sleep(RESUME_TIMEOUT_S * 2)
            self.assertFalse(waiter.done())
            self.assertNotEqual(watch.state, 0)  # resuming
            start = time.monotonic()
            slot.store(target)
            async with within(TIMEOUT_S):
                await waiter
            self.assertLess(time.monotonic() - start, TIMEOUT_S)
            # Nobody awaits: no more resume attempts, and the watches go.
            await asyncio.sleep(0.05)
            self.assertTrue(watch.closed)
            self.assertIsNone(slot._watch)
            self.assertEqual(self.client._dispatchers, {})
            # A later wait finds the daemon gone and looks at the flag.
            second = slot.arm()
            loop.call_later(0.01, slot.store, second)
            async with within(TIMEOUT_S):
                await slot.wait_async(second)

        asyncio.run(main())
        self.assert_hung_up()
        slot.release()

    def test_waiters_share_one_reader(self):
        slots = self.client.acquire_many(3)
        targets = [s.arm() for s in slots]

        async def main():
            loop = asyncio.get_running_loop()
            waits = [asyncio.create_task(s.wait_async(t)) for s, t in zip(slots, targets)]
            waits.append(asyncio.create_task(slots[0].wait_async(targets[0])))
            await asyncio.sleep(0.01)
            self.assertEqual(list(self.client._dispatchers), [loop])
            watch = self.client._dispatchers[loop]
            self.assertEqual(watch.users, 4)
            # One slot completes while the daemon is there: its reader stays
            # for the others.
            slots[1].store(targets[1])
            async with within(TIMEOUT_S):
                await waits[1]
            await asyncio.sleep(0)
            self.assertIs(self.client._dispatchers.get(loop), watch)
            await asyncio.to_thread(self.daemon.kill)
            async with within(TIMEOUT_S):
                while watch.state == 0:
                    await asyncio.sleep(0.001)
            # The same watch, still one for the three waiters left.
            self.assertIs(self.client._dispatchers.get(loop), watch)
            self.assertEqual(watch.users, 3)
            for s, t in zip(slots, targets):
                s.store(t)
            async with within(TIMEOUT_S):
                await asyncio.gather(*waits)
            await asyncio.sleep(0.05)
            self.assertEqual(self.client._dispatchers, {})
            self.assertTrue(all(s._watch is None for s in slots))

        asyncio.run(main())
        for s in slots:
            s.release()

    def test_completions_give_up(self):
        """completions() hands out what was signalled, waits for a daemon up
        to the resume timeout, then raises ConnectionError(ENOTCONN); what
        lands meanwhile stays counted for a later consume()."""
        with self.client.acquire() as slot:
            target = slot.arm()
            slot.store(target)
            slot.wait(target, timeout=TIMEOUT_S)
            late = slot.arm()

            async def main():
                counts = []
                started = None
                with self.assertRaises(OSError) as cm:
                    async with within(TIMEOUT_S):
                        async for n in slot.completions():
                            counts.append(n)
                            if sum(counts) == 1:
                                # The resume timeout runs from the hang-up,
                                # which the loop may see before kill returns.
                                started = time.monotonic()
                                await asyncio.to_thread(self.daemon.kill)
                self.assert_not_connected(cm, started)
                self.assertEqual(counts, [1])

            asyncio.run(main())
            slot.store(late)
            self.assertEqual(slot.consume(), 0)  # nobody signalled it

    def test_silent_listener(self):
        """While the daemon restarts under a socket unit, its socket listens
        and nothing answers yet: the loop's resume attempts wait in a worker
        thread, and neither completions() nor wait_async() holds up the
        loop meanwhile."""
        self.client.resume_timeout = None
        slot = self.client.acquire()
        target = slot.arm()

        async def main():
            stall = 0.0

            async def ticker():
                nonlocal stall
                while True:
                    t = time.monotonic()
                    await asyncio.sleep(0.002)
                    stall = max(stall, time.monotonic() - t)

            async def count():
                async for _ in slot.completions():
                    pass

            tasks = [asyncio.create_task(f()) for f in (ticker, count)]
            waiter, watch = await self.wait_then_kill(slot, target)
            os.makedirs(self.daemon.dir, exist_ok=True)  # stop() removes it again
            with socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET) as silent:
                silent.bind(self.daemon.socket)
                silent.listen()
                stall = 0.0
                await asyncio.sleep(0.3)
                self.assertNotEqual(watch.state, 0)  # resuming
            # Closed: the attempt waiting for its answer ends. An attempt
            # made on the loop would have held it until the library's reply
            # timeout (5 s); the margin is for a loaded machine.
            self.assertLess(stall, 1.0)
            slot.store(target)
            async with within(TIMEOUT_S):
                await waiter
            for task in tasks:
                task.cancel()

        asyncio.run(main())
        slot.release()

    def test_close_while_waiting(self):
        slot = self.client.acquire()
        target = slot.arm()

        async def main():
            waiter = asyncio.create_task(slot.wait_async(target))
            await asyncio.sleep(0.01)
            self.client.close()
            with self.assertRaises(ValueError):
                await waiter
            self.assertEqual(self.client._dispatchers, {})
            with self.assertRaises(ValueError):
                self.client.fd

        asyncio.run(main())

    def test_close_while_resuming(self):
        """close() while the loop tries to resume: the attempts stop, and
        the watch's duplicate of the connection is closed (setUp checks)."""
        slot = self.client.acquire()
        target = slot.arm()

        async def main():
            waiter, watch = await self.wait_then_kill(slot, target)
            async with within(TIMEOUT_S):
                while watch.state == 0:
                    await asyncio.sleep(0.001)
            await asyncio.sleep(0.06)  # a few attempts
            self.client.close()
            with self.assertRaises(ValueError):
                await waiter
            self.assertTrue(watch.closed)

        asyncio.run(main())


if __name__ == "__main__":
    unittest.main()
