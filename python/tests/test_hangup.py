# SPDX-License-Identifier: MIT
"""The daemon goes away (SIGKILL) under a waiting client: Client.fd hangs
up, wait_async() goes on by looking at the flag itself, completions()
ends with ENOTCONN, and several waiters share one reader of the fd."""

import asyncio
import errno
import select
import time
import unittest

import cuflag
from daemon import Daemon, open_fds

TIMEOUT_S = 2


class HangupTest(unittest.TestCase):
    """Each test starts its own daemon, to kill it."""

    def setUp(self):
        fds = open_fds()
        self.addCleanup(lambda: self.assertEqual(open_fds(), fds, "fds leaked"))
        self.daemon = Daemon()
        self.addCleanup(self.daemon.stop)  # harmless once killed
        self.client = cuflag.Client(self.daemon.socket)
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

    def test_fd(self):
        fd = self.client.fd
        self.assertIsInstance(fd, int)
        self.assertGreaterEqual(fd, 0)
        self.assertFalse(self.client.daemon_gone)
        readable, _, _ = select.select([fd], [], [], 0.02)
        self.assertEqual(readable, [])
        self.daemon.kill()
        self.assert_hung_up()

    def test_wait_async_outlives_daemon(self):
        slot = self.client.acquire()
        target = slot.arm()

        async def main():
            waiter = asyncio.create_task(slot.wait_async(target))
            await asyncio.sleep(0.01)
            self.assertFalse(waiter.done())
            self.assertIsNotNone(slot._watch)
            await asyncio.to_thread(self.daemon.kill)
            # The loop learns of the hang-up, and no reader of it remains.
            async with asyncio.timeout(TIMEOUT_S):
                while self.client._hangup_watches:
                    await asyncio.sleep(0.001)
            self.assertFalse(waiter.done())
            start = time.monotonic()
            slot.store(target)
            async with asyncio.timeout(TIMEOUT_S):
                await waiter
            self.assertLess(time.monotonic() - start, TIMEOUT_S)
            # A later wait needs no reader at all.
            second = slot.arm()
            loop = asyncio.get_running_loop()
            loop.call_later(0.01, slot.store, second)
            async with asyncio.timeout(TIMEOUT_S):
                await slot.wait_async(second)
            await asyncio.sleep(0)
            self.assertIsNone(slot._watch)
            self.assertEqual(self.client._hangup_watches, {})

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
            self.assertEqual(list(self.client._hangup_watches), [loop])
            watch = self.client._hangup_watches[loop]
            self.assertEqual(len(watch.waiters), 4)
            # One slot completes while the daemon is there: its reader stays
            # for the others.
            slots[1].store(targets[1])
            async with asyncio.timeout(TIMEOUT_S):
                await waits[1]
            await asyncio.sleep(0)
            self.assertIs(self.client._hangup_watches.get(loop), watch)
            await asyncio.to_thread(self.daemon.kill)
            for s, t in zip(slots, targets):
                s.store(t)
            async with asyncio.timeout(TIMEOUT_S):
                await asyncio.gather(*waits)
            await asyncio.sleep(0)
            self.assertEqual(self.client._hangup_watches, {})
            self.assertTrue(all(s._watch is None for s in slots))

        asyncio.run(main())
        for s in slots:
            s.release()

    def test_completions_end(self):
        with self.client.acquire() as slot:
            target = slot.arm()
            slot.store(target)
            slot.wait(target, timeout=TIMEOUT_S)

            async def main():
                counts = []
                with self.assertRaises(OSError) as e:
                    async with asyncio.timeout(TIMEOUT_S):
                        async for n in slot.completions():
                            counts.append(n)
                            if sum(counts) == 1:
                                await asyncio.to_thread(self.daemon.kill)
                self.assertEqual(e.exception.errno, errno.ENOTCONN)
                self.assertEqual(counts, [1])

            asyncio.run(main())

    def test_close_while_waiting(self):
        slot = self.client.acquire()
        target = slot.arm()

        async def main():
            waiter = asyncio.create_task(slot.wait_async(target))
            await asyncio.sleep(0.01)
            self.client.close()
            with self.assertRaises(ValueError):
                await waiter
            self.assertEqual(self.client._hangup_watches, {})
            with self.assertRaises(ValueError):
                self.client.fd

        asyncio.run(main())


if __name__ == "__main__":
    unittest.main()
