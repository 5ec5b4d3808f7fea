#!/usr/bin/python3
# SPDX-License-Identifier: MIT
"""A client in the middle of its run: it completes work on every slot, as
the simulated device (a store into the flag), and counts what the daemon
signals, until STOP exists; then it waits until every completion is counted.

    steady-client.py PROGRESS STOP [SLOTS] [--no-reconnect]

PROGRESS is rewritten about every 0.1 s with "armed counted reconnects".
At the end it prints "armed=N counted=N reconnects=R epochs=E" and exits 0
only when every armed completion was counted exactly once.

When the daemon goes away (an upgrade restarts it) the client calls
Client.reconnect() itself: the library does not yet resume on its own.
With --no-reconnect it has no restart code at all, and relies on the
library to carry it over to the new daemon.
"""

import os
import select
import sys
import time

import cuflag


def main():
    args = [a for a in sys.argv[1:] if a != "--no-reconnect"]
    own_resume = "--no-reconnect" not in sys.argv
    progress, stop = args[0], args[1]
    nslots = int(args[2]) if len(args) > 2 else 8
    client = cuflag.Client()
    slots = client.acquire_many(nslots)
    armed = counted = reconnects = 0
    epochs = {client.epoch}
    poller = select.poll()
    for s in slots:
        poller.register(s.fd, select.POLLIN)
    last = 0.0

    def resume():
        nonlocal reconnects
        if not own_resume:
            return
        deadline = time.monotonic() + 30
        while True:
            try:
                client.reconnect()
                break
            except (ConnectionRefusedError, FileNotFoundError):
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.02)
        reconnects += 1
        epochs.add(client.epoch)

    def collect(ms):
        nonlocal counted
        poller.poll(ms)
        for s in slots:
            counted += s.consume()

    def report(final=False):
        nonlocal last
        now = time.monotonic()
        if final or now - last > 0.1:
            tmp = progress + ".tmp"
            with open(tmp, "w") as f:
                f.write("%d %d %d\n" % (armed, counted, reconnects))
            os.replace(tmp, progress)
            last = now

    while not os.path.exists(stop):
        if client.daemon_gone:
            resume()
        epochs.add(client.epoch)
        for s in slots:
            s.store(s.arm())
            armed += 1
        collect(1)
        report()
    deadline = time.monotonic() + 20
    while counted < armed and time.monotonic() < deadline:
        if client.daemon_gone:
            resume()
        collect(100)
    # Anything counted twice would show up here, late.
    collect(200)
    report(final=True)
    print("armed=%d counted=%d reconnects=%d epochs=%d"
          % (armed, counted, reconnects, len(epochs)))
    client.close()
    return 0 if counted == armed else 1


if __name__ == "__main__":
    sys.exit(main())
