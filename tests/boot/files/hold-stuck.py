# SPDX-License-Identifier: MIT
"""A client for the exporter's boot check: completes N (argv[1]) slots' work
at once, then arms one slot and never completes it, and holds everything
until the file argv[2] exists."""
import os
import sys
import time

import cuflag

n, stop = int(sys.argv[1]), sys.argv[2]
with cuflag.Client() as c:
    s = c.acquire()
    for _ in range(n):
        t = s.arm()
        s.store(t)
        s.wait(t, timeout=5)
    stuck = c.acquire()
    stuck.arm()
    print("holding", os.getpid(), flush=True)
    while not os.path.exists(stop):
        time.sleep(0.1)
