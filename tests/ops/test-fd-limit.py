#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""cuflagd under an open-file limit too low for its client and slot limits
says so in the words of whoever set the limit: started by hand, the hard
limit (ulimit -Hn) and never systemd's LimitNOFILE; started by systemd
(which sets INVOCATION_ID for what it starts), LimitNOFILE= in the unit.
Under the same limit, client and slot limits that fit it bring no warning."""
import os
import resource
import select
import signal
import subprocess
import tempfile
import time

from opsutil import CUFLAGD, expect

LIMIT = 4096  # below the defaults' need (256 clients x 1027 fds + 128)


def low_limit():
    resource.setrlimit(resource.RLIMIT_NOFILE, (LIMIT, LIMIT))


def start_log(sock, *args, invocation=None):
    """The lines cuflagd logs up to "ready", started under LIMIT; it must
    then stop cleanly on SIGTERM."""
    env = {k: v for k, v in os.environ.items()
           if k not in ("INVOCATION_ID", "NOTIFY_SOCKET", "LISTEN_FDS", "LISTEN_PID")}
    if invocation:
        env["INVOCATION_ID"] = invocation
    d = subprocess.Popen([CUFLAGD, "--socket", sock, *args], env=env, preexec_fn=low_limit,
                         stdin=subprocess.DEVNULL, stderr=subprocess.PIPE)
    log, end = b"", time.monotonic() + 10
    while b"ready:" not in log:
        left = end - time.monotonic()
        expect(left > 0 and select.select([d.stderr], [], [], left)[0],
               f"cuflagd ready within 10 s: {log}")
        chunk = os.read(d.stderr.fileno(), 4096)
        if not chunk:
            expect(False, f"cuflagd exited early ({d.wait()}): {log}")
        log += chunk
    d.send_signal(signal.SIGTERM)
    d.stderr.read()
    expect(d.wait(timeout=10) == 0, "cuflagd exits 0")
    return log.decode(errors="replace").splitlines()


def warning(lines):
    found = [line for line in lines if "open-file limit" in line]
    return found[0] if found else None


def main():
    with tempfile.TemporaryDirectory(prefix="cuflag-fdlimit-") as tmp:
        sock = os.path.join(tmp, "cuflagd.sock")

        w = warning(start_log(sock))
        expect(w and f"open-file limit {LIMIT} is below" in w, f"by hand: warned: {w}")
        expect("ulimit -Hn" in w, f"by hand: the shell's words: {w}")
        expect("LimitNOFILE" not in w, f"by hand: no systemd directive: {w}")

        w = warning(start_log(sock, invocation="0123456789abcdef0123456789abcdef"))
        expect(w and "raise LimitNOFILE= in the unit" in w, f"under systemd: the unit's: {w}")
        expect("ulimit" not in w, f"under systemd: not the shell's words: {w}")

        lines = start_log(sock, "--max-clients", "4", "--slots-per-client", "64")
        expect(warning(lines) is None, f"limits that fit: no warning: {lines}")
    print("fd-limit: ok")


if __name__ == "__main__":
    main()
