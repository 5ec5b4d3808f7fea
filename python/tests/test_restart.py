# SPDX-License-Identifier: MIT
"""The daemon restarts under a client: the client resumes by itself (or
at once with Client.reconnect()), handing the new daemon its region and
eventfds; every completion is counted once, Client.fd keeps its number and
is the new connection, and wait_async() and completions() carry on."""

import asyncio
import errno
import select
import unittest

import cuflag
from cuflag._timeout import timeout as within  # asyncio.timeout() before 3.11 too
from daemon import Daemon, open_fds, start_later

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

    def start_later(self, start, delay=0.1):
        """Start the next daemon in delay seconds, from another thread."""
        self.addCleanup(start_later(delay, start))

    def across_restart(self, stop, resume):
        """Two slots through a restart: the first signalled by the old
        daemon, the second's arm completed while no daemon runs. stop stops
        the daemon; resume(start, slots) brings the next one (start()) and
        resumes. Checks that the slots kept their ids and eventfds, the
        client its fd number, and that each completion is counted once, and
        that the slots work on; returns them."""
        s1, s2 = self.client.acquire_many(2)
        ids, fds = (s1.id, s2.id), (s1.fd, s2.fd)
        epoch, old_fd = self.client.epoch, self.client.fd
        t1 = s1.arm()
        s1.store(t1)
        s1.wait(t1, timeout=TIMEOUT_S)
        # The old daemon has signalled slot 1: its counter is readable.
        readable, _, _ = select.select([s1], [], [], TIMEOUT_S)
        self.assertEqual(readable, [s1])
        t2 = s2.arm()
        start = self.restart_daemon(stop)
        s2.store(t2)  # lands while no daemon runs
        s2.wait(t2, timeout=TIMEOUT_S)  # seen on the flag meanwhile
        resume(start, (s1, s2))

        self.assertFalse(self.client.daemon_gone)
        self.assertNotEqual(self.client.epoch, epoch)
        self.assertEqual(self.client.fd, old_fd)  # the number stays; the connection is new
        self.assertFalse(hung_up(self.client.fd))
        self.assertEqual(((s1.id, s2.id), (s1.fd, s2.fd)), (ids, fds))
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
        return s1, s2

    def test_resumes_by_itself(self):
        """No reconnect(): the first call that needs the daemon waits for
        one and resumes."""
        def resume(start, slots):
            self.start_later(start)
            self.client.acquire().release()

        for slot in self.across_restart(self.daemon.kill, resume):
            slot.release()

    def test_awaits_resume_by_themselves(self):
        """A wait_async() and a completions() in progress through a SIGTERM
        and then a SIGKILL restart, with no restart code: the loop resumes,
        watches the new connection (so it sees the next hang-up too), and
        the new daemon's signals wake them."""
        waited, counted = self.client.acquire_many(2)
        old_fd = self.client.fd

        async def main():
            loop = asyncio.get_running_loop()
            counts = []

            async def count():
                async for n in counted.completions():
                    counts.append(n)

            counter = asyncio.create_task(count())
            for rounds, how in enumerate(("stop", "kill"), 1):
                target = waited.arm()
                c = counted.arm()
                counted.store(c)  # signalled by the daemon about to go
                waiter = asyncio.create_task(waited.wait_async(target))
                await asyncio.sleep(0.01)
                watch = self.client._dispatchers[loop]
                epoch = self.client.epoch
                stop = getattr(self.daemon, how)
                start = await asyncio.to_thread(self.restart_daemon, stop)
                c = counted.arm()  # queued for the next daemon
                counted.store(c)
                gone = self.daemon
                self.start_later(start)
                async with within(TIMEOUT_S * 2):
                    # The loop may resume before Daemon() saw the new one
                    # ready: the next round stops that one, once it is known.
                    while self.client.epoch == epoch or self.daemon is gone:
                        await asyncio.sleep(0.005)
                await asyncio.sleep(0.01)
                self.assertIs(self.client._dispatchers.get(loop), watch)
                self.assertEqual(watch.state, 0)
                self.assertEqual(self.client.fd, old_fd)
                self.assertFalse(waiter.done())
                waited.store(target)  # signalled by the new daemon
                async with within(TIMEOUT_S):
                    await waiter
                    while sum(counts) < 2 * rounds:
                        await asyncio.sleep(0.001)
            await asyncio.sleep(0.05)
            counter.cancel()
            self.assertEqual(sum(counts), 4)
            self.assertEqual(waited.consume(), 2)

        asyncio.run(main())
        waited.release()
        counted.release()

    def test_resumed_elsewhere(self):
        """A resume made by a blocking call before the loop saw the hang-up
        (the kernel drops a registration of the old connection then): the
        loop's watch still follows the client to the new connection, and
        so sees the next restart and resumes by itself."""
        slot = self.client.acquire()

        async def main():
            loop = asyncio.get_running_loop()
            target = slot.arm()
            waiter = asyncio.create_task(slot.wait_async(target))
            await asyncio.sleep(0.01)
            watch = self.client._dispatchers[loop]
            # All within one turn of the loop: it sees nothing meanwhile.
            self.restart_daemon(stop=self.daemon.kill)()
            self.client.acquire().release()  # resumes
            self.assertFalse(self.client.daemon_gone)
            await asyncio.sleep(0.01)
            self.assertEqual(watch.state, 0)
            # The next restart, with nothing but the loop to resume.
            epoch = self.client.epoch
            start = await asyncio.to_thread(self.restart_daemon, self.daemon.kill)
            self.start_later(start)
            async with within(TIMEOUT_S * 2):
                while self.client.epoch == epoch:
                    await asyncio.sleep(0.005)
            self.assertFalse(waiter.done())
            slot.store(target)
            async with within(TIMEOUT_S):
                await waiter
                # The wait may have seen the flag before the daemon signalled.
                counts = []
                async for n in slot.completions():
                    counts.append(n)
                    break
            await asyncio.sleep(0.01)
            self.assertEqual(counts + [slot.consume()], [1, 0])

        asyncio.run(main())
        slot.release()

    def test_other_layout(self):
        """A daemon with another layout cannot take the region: acquire()
        and completions() raise ESTALE; a wait goes on with the flag, and
        the loop resumes with a daemon of the right layout once one is
        back."""
        slot = self.client.acquire()
        target = slot.arm()
        self.restart_daemon()
        self.daemon = Daemon("--queue-size", "16", directory=self.daemon.dir)
        self.addCleanup(self.daemon.stop)
        for call in (self.client.acquire, self.client.reconnect):
            with self.assertRaises(OSError) as cm:
                call()
            self.assertEqual(cm.exception.errno, errno.ESTALE)

        async def main():
            with self.assertRaises(OSError) as cm:
                async with within(TIMEOUT_S):
                    async for _ in slot.completions():
                        pass
            self.assertEqual(cm.exception.errno, errno.ESTALE)
            waiter = asyncio.create_task(slot.wait_async(target))
            await asyncio.sleep(0.05)
            self.assertFalse(waiter.done())
            epoch = self.client.epoch
            self.start_later(self.restart_daemon(self.daemon.stop), 0)
            async with within(TIMEOUT_S * 2):
                while self.client.epoch == epoch:
                    await asyncio.sleep(0.01)
            slot.store(target)
            counts = []
            async with within(TIMEOUT_S):
                await waiter
                async for n in slot.completions():
                    counts.append(n)
                    break
            self.assertEqual(counts, [1])

        asyncio.run(main())
        slot.release()

    def test_reconnect(self):
        def resume(start, slots):
            with self.assertRaises((ConnectionRefusedError, FileNotFoundError)):
                self.client.reconnect()
            self.assertTrue(self.client.daemon_gone)  # a failure changes nothing
            start()
            self.client.reconnect()

        s1, s2 = self.across_restart(None, resume)
        s3 = self.client.acquire()
        t3 = s3.arm()
        s3.store(t3)
        s3.wait(t3, timeout=TIMEOUT_S)

        async def main():
            loop = asyncio.get_running_loop()
            t = s2.arm()
            loop.call_later(0.01, s2.store, t)
            async with within(TIMEOUT_S):
                await s2.wait_async(t)
            # Through the eventfd, with the new connection watched.
            watch = self.client._dispatchers[loop]
            self.assertEqual(watch.state, 0)
            counts = []
            t = s1.arm()
            loop.call_later(0.01, s1.store, t)
            async with within(TIMEOUT_S):
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
            watch = self.client._dispatchers[loop]
            # SIGTERM with the loop busy: the hang-up is not seen by the loop.
            self.daemon.stop(keep_dir=True)
            self.daemon = Daemon(directory=self.daemon.dir)
            self.addCleanup(self.daemon.stop)
            self.client.reconnect()
            self.assertEqual(self.client.fd, old_fd)  # the number stays; the connection is new
            await asyncio.sleep(0.01)
            self.assertIs(self.client._dispatchers.get(loop), watch)
            self.assertFalse(waiter.done())
            self.assertEqual(watch.state, 0)  # the new connection did not hang up
            slot.store(target)
            async with within(TIMEOUT_S):
                await waiter
            self.assertEqual(slot.consume(), 1)

        asyncio.run(main())
        self.assertEqual(self.client._dispatchers, {})
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
            async with within(TIMEOUT_S * 5):
                await self.client.reconnect_async(retry_interval=0.005)
            self.assertFalse(self.client.daemon_gone)
            async with within(TIMEOUT_S):
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
