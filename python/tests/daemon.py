# SPDX-License-Identifier: MIT
"""Start the real cuflagd (path from $CUFLAGD, set by meson) on a private
socket for a test, wait until it accepts a connection, and stop it; or
start a second one on the socket of a stopped one (a restart)."""

import asyncio
import ctypes
import os
import shutil
import signal
import socket
import subprocess
import tempfile
import threading
import time
import unittest

import cuflag
from cuflag._timeout import timeout as within  # asyncio.timeout() before 3.11 too

_PR_SET_PDEATHSIG = 1
_READY_TIMEOUT_S = 10.0


def _die_with_parent():
    # The daemon must not outlive a test that crashes or is killed.
    libc = ctypes.CDLL(None, use_errno=True)
    libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)


def _accepts(path):
    with socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET) as s:
        try:
            s.connect(path)
        except OSError:
            return False
        return True


class Daemon:
    """``directory``: the directory of a daemon stopped with keep_dir, to
    listen on its socket path; the new daemon owns it from then on."""

    def __init__(self, *args, directory=None):
        self.dir = directory or tempfile.mkdtemp(prefix="cuflag-pytest-")
        self.socket = os.path.join(self.dir, "cuflagd.sock")
        binary = os.environ.get("CUFLAGD", "cuflagd")
        self.proc = subprocess.Popen([binary, "--socket", self.socket, *args],
                                     preexec_fn=_die_with_parent)
        # Ready once it accepts a connection; fail fast if it died.
        deadline = time.monotonic() + _READY_TIMEOUT_S
        while not _accepts(self.socket):
            if self.proc.poll() is not None:
                self._cleanup()
                raise RuntimeError(f"cuflagd exited before it was ready "
                                   f"(status {self.proc.returncode})")
            if time.monotonic() > deadline:
                self.stop()
                raise RuntimeError("cuflagd did not become ready")
            time.sleep(0.0005)

    def stop(self, keep_dir=False):
        """SIGTERM and wait; returns the exit status. keep_dir leaves the
        directory for a daemon started after this one."""
        if self.proc.poll() is None:
            self.proc.terminate()
        status = self.proc.wait(timeout=10)
        if not keep_dir:
            self._cleanup()
        return status

    def kill(self, keep_dir=False):
        """SIGKILL and wait: the daemon goes without a word to its clients."""
        self.proc.kill()
        self.proc.wait(timeout=10)
        if not keep_dir:
            self._cleanup()

    def _cleanup(self):
        shutil.rmtree(self.dir, ignore_errors=True)


def start_later(delay, start):
    """Call start() (which starts a Daemon) in delay seconds, from a thread
    that lives on until the function returned is called: the daemon dies
    with the thread that started it (PR_SET_PDEATHSIG names a thread)."""
    done = threading.Event()

    def run():
        time.sleep(delay)
        start()
        done.wait()

    thread = threading.Thread(target=run, daemon=True)
    thread.start()

    def finish():
        done.set()
        thread.join()

    return finish


def open_fds():
    return len(os.listdir("/proc/self/fd")) - 1  # less listdir's own fd


class DaemonTestCase(unittest.TestCase):
    """One daemon for the class, a client connected to it for each test;
    every test must close the fds it opens."""

    daemon_args = ()

    @classmethod
    def setUpClass(cls):
        cls.daemon = Daemon(*cls.daemon_args)

    @classmethod
    def tearDownClass(cls):
        status = cls.daemon.stop()
        if status != 0:
            raise AssertionError(f"cuflagd exited with status {status}")

    def setUp(self):
        fds = open_fds()
        self.addCleanup(lambda: self.assertEqual(open_fds(), fds, "fds leaked"))
        self.client = cuflag.Client(self.daemon.socket)
        self.addCleanup(self.client.close)


class RestartTestCase(unittest.TestCase):
    """A daemon of its own for each test, a client of it, and restart()."""

    AWAY_S = 0.1  # no daemon this long in a restart
    SETTLE_S = 10

    def setUp(self):
        fds = open_fds()
        self.addCleanup(lambda: self.assertEqual(open_fds(), fds, "fds leaked"))
        self.daemon = Daemon()
        self.addCleanup(lambda: self.daemon.stop())
        self.client = cuflag.Client(self.daemon.socket)
        self.addCleanup(self.client.close)

    def restart(self, how):
        """Stop the daemon (how: "stop" for SIGTERM, "kill" for SIGKILL)
        and start the next one on its socket AWAY_S later; returns once that
        one is ready."""
        getattr(self.daemon, how)(keep_dir=True)
        ready = threading.Event()

        def start():
            self.daemon = Daemon(directory=self.daemon.dir)
            ready.set()

        self.addCleanup(start_later(self.AWAY_S, start))
        self.assertTrue(ready.wait(self.SETTLE_S), "the next daemon did not start")

    async def restarts(self, counted, run_s=0.3):
        """From a running program's loop: restart the daemon with SIGTERM,
        SIGKILL, SIGTERM, SIGKILL, run_s apart. After each, wait until the
        client is served by the new daemon and counted() has grown: the
        program goes on by itself. Returns the epochs seen (5)."""
        epochs = [self.client.epoch]
        for how in ("stop", "kill", "stop", "kill"):
            await asyncio.sleep(run_s)
            before = counted()
            self.assertGreater(before, 0)
            await asyncio.to_thread(self.restart, how)
            async with within(self.SETTLE_S):
                while self.client.epoch == epochs[-1] or counted() <= before:
                    await asyncio.sleep(0.01)
            epochs.append(self.client.epoch)
        await asyncio.sleep(run_s)
        return epochs
