#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""cuflagd under an open-file limit below what its client and slot limits
could need. By default it fits itself to the limit (the fds left for slots
shared, a quarter a user) and says so at level info, with no warning. Limits
an operator gave that the open-file limit cannot hold are warned about in
the words of whoever set the limit: started by hand, the hard limit (ulimit
-Hn) and never systemd's LimitNOFILE; started by systemd (which sets
INVOCATION_ID for what it starts), LimitNOFILE= in the unit. Under the same
limit, client and slot limits that fit it bring no line at all."""
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

        lines = start_log(sock)
        expect(not [ln for ln in lines if ln.startswith(("<0>", "<1>", "<2>", "<3>", "<4>"))],
               f"by default: no warning: {lines}")
        w = warning(lines)
        expect(w and w.startswith("<6>") and f"open-file limit {LIMIT}:" in w,
               f"by default: the sizing said at level info: {lines}")

        given = ("--max-clients", "256", "--slots-per-client", "1024")
        w = warning(start_log(sock, *given))
        expect(w and w.startswith("<4>") and f"open-file limit {LIMIT} is below" in w,
               f"limits given: warned: {w}")
        expect("ulimit -Hn" in w, f"by hand: the shell's words: {w}")
        expect("LimitNOFILE" not in w, f"by hand: no systemd directive: {w}")

        w = warning(start_log(sock, *given, invocation="0123456789abcdef0123456789abcdef"))
        expect(w and "raise LimitNOFILE= in the unit" in w, f"under systemd: the unit's: {w}")
        expect("ulimit" not in w, f"under systemd: not the shell's words: {w}")

        lines = start_log(sock, "--max-clients", "4", "--slots-per-client", "64")
        expect(warning(lines) is None, f"limits that fit: no warning: {lines}")
    print("fd-limit: ok")


if __name__ == "__main__":
    main()
