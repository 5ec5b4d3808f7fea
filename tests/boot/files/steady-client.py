#!/usr/bin/python3
# SPDX-License-Identifier: MIT
"""A client in the middle of its run: it completes work on every slot, as
the simulated device (a store into the flag), and counts what the daemon
signals, until STOP exists; then it waits until every completion is counted.

    steady-client.py PROGRESS STOP [SLOTS]

PROGRESS is rewritten about every 0.1 s with "armed counted epochs". At the
end it prints "armed=N counted=N epochs=E" and exits 0 only when every
armed completion was counted exactly once.

It has no restart code: when the daemon is restarted under it (an upgrade),
the library resumes with the new one by itself.
"""

import os
import select
import sys
import time

import cuflag


def main():
    progress, stop = sys.argv[1], sys.argv[2]
    nslots = int(sys.argv[3]) if len(sys.argv) > 3 else 8
    client = cuflag.Client()
    slots = client.acquire_many(nslots)
    armed = counted = 0
    epochs = {client.epoch}
    poller = select.poll()
    for s in slots:
        poller.register(s.fd, select.POLLIN)
    last = 0.0

    def collect(ms):
        nonlocal counted
        poller.poll(ms)
        for s in slots:
            counted += s.consume()
        epochs.add(client.epoch)

    def report(final=False):
        nonlocal last
        now = time.monotonic()
        if final or now - last > 0.1:
            tmp = progress + ".tmp"
            with open(tmp, "w") as f:
                f.write("%d %d %d\n" % (armed, counted, len(epochs)))
            os.replace(tmp, progress)
            last = now

    while not os.path.exists(stop):
        for s in slots:
            s.store(s.arm())
            armed += 1
        collect(1)
        report()
    deadline = time.monotonic() + 20
    while counted < armed and time.monotonic() < deadline:
        collect(100)
    # Anything counted twice would show up here, late.
    collect(200)
    report(final=True)
    print("armed=%d counted=%d epochs=%d" % (armed, counted, len(epochs)))
    client.close()
    return 0 if counted == armed else 1


if __name__ == "__main__":
    sys.exit(main())
