#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""The README's "Getting started" without systemd, step by step, as the
README says it: the commands between its markers are run, in order,
against this build tree, and what each prints must match what the README
shows under it. So the README and the product cannot drift apart.

In the README's block a line "$ COMMAND" is a step (sudo dropped: the test
runs as root) and the lines up to the next step are what it prints: each
must be found in the step's output, digits standing for any number and
"..." for anything. A step run by "sudo -b" or ending in "&" is started in
the background and its lines are awaited; it is stopped (SIGTERM) at the
end; an "export" holds for the steps after it, as in one shell. The build
steps (meson, ninja) are what meson test has just done: skipped; so is
"newgrp" (every step runs as root); of "apt-get install", the packages it
names must be installed here (the build just used them).

It runs in a mount namespace of its own, with an empty /run and a copy of
/etc, so that the daemon's socket directory and the groupadd/usermod of the
steps touch nothing of the machine's. Needs root and unshare: 77 without."""
import os
import re
import shlex
import shutil
import signal
import subprocess
import sys
import tempfile
import time

SOURCE_ROOT = os.environ["SOURCE_ROOT"]
BUILD_ROOT = os.environ["BUILD_ROOT"]
BEGIN = "<!-- getting-started without systemd: tests/ops/test-getting-started.py runs it -->"
END = "<!-- end of getting-started without systemd -->"


def steps(readme):
    """[(command, [expected line, ...]), ...] from the README's block."""
    text = open(readme).read()
    if BEGIN not in text or END not in text:
        sys.exit(f"{readme}: the getting-started markers are missing")
    block = text[text.index(BEGIN):text.index(END)]
    out = []
    for line in block.splitlines():
        line = line.strip()
        if line.startswith("$ "):
            out.append((line[2:], []))
        elif out and line and not line.startswith("```"):
            out[-1][1].append(line)
    if not out:
        sys.exit(f"{readme}: no steps between the getting-started markers")
    return out


def pattern(line):
    """A shown line as a regex: digits are any number, ... is anything."""
    parts = []
    for piece in re.split(r"(\.\.\.|\d+)", line):
        if piece == "...":
            parts.append(".*")
        elif piece.isdigit():
            parts.append(r"\d+")
        else:
            parts.append(re.escape(piece))
    return re.compile("".join(parts))


def local(cmd):
    """The step as this tree runs it: build/ is the build tree, as root;
    "sudo -b X" is "X &"."""
    if cmd.startswith("sudo -b "):
        cmd = cmd[len("sudo -b "):] + " &"
    cmd = re.sub(r"^sudo ", "", cmd)
    return re.sub(r"(?<![\w/.-])build/", BUILD_ROOT + "/", cmd)


def check_installed(cmd):
    """The packages an "apt-get install" step names are real: installed
    here, where the build just used them."""
    names = [a for a in shlex.split(cmd, comments=True)[3:] if not a.startswith("-")]
    if not shutil.which("dpkg-query"):
        print(f"getting-started: skipped (no dpkg here): {cmd}")
        return
    r = subprocess.run(["dpkg-query", "-W", "-f", "${db:Status-Status} ${Package}\n", *names],
                       capture_output=True, text=True)
    installed = {ln.split()[1] for ln in r.stdout.splitlines() if ln.startswith("installed ")}
    if not names or set(names) - installed:
        sys.exit(f"getting-started: `{cmd}`: not installed here: "
                 f"{sorted(set(names) - installed) or 'no package named'}")


def missing(expected, output):
    return [e for e in expected if not pattern(e).search(output)]


def run_steps():
    env = {k: v for k, v in os.environ.items() if k not in
           ("CUFLAG_SOCKET", "NOTIFY_SOCKET", "INVOCATION_ID", "LISTEN_FDS", "LISTEN_PID",
            "LD_LIBRARY_PATH", "PYTHONPATH", "CUFLAG_LIBRARY")}
    background = []
    try:
        for cmd, expected in steps(os.path.join(SOURCE_ROOT, "README.md")):
            if re.match(r"(meson|ninja) ", cmd):
                print(f"getting-started: skipped (the tree meson test built): {cmd}")
                continue
            if re.match(r"(newgrp|sg) ", cmd):
                print(f"getting-started: skipped (the steps run as root): {cmd}")
                continue
            if cmd.startswith("sudo apt-get install "):
                check_installed(cmd)
                print(f"getting-started: ok (installed): {cmd}")
                continue
            sh = local(cmd)
            if sh.startswith("export "):  # for the steps after it, as in one shell
                env.update(a.split("=", 1) for a in shlex.split(sh)[1:])
            elif sh.endswith("&"):
                log = tempfile.TemporaryFile("w+")
                # exec: the process stopped at the end is the step's own
                # (a shell in between would leave it running, orphaned).
                p = subprocess.Popen(["sh", "-c", "exec " + sh[:-1]], cwd=SOURCE_ROOT, env=env,
                                     stdout=log, stderr=subprocess.STDOUT, text=True)
                background.append((p, log))
                end = time.monotonic() + 10
                while True:
                    log.seek(0)
                    output = log.read()
                    if not missing(expected, output):
                        break
                    if p.poll() is not None or time.monotonic() > end:
                        sys.exit(f"getting-started: `{cmd}` did not print {missing(expected, output)}:\n{output}")
                    time.sleep(0.02)
            else:
                r = subprocess.run(["sh", "-c", sh], cwd=SOURCE_ROOT, env=env, text=True,
                                   stdout=subprocess.PIPE, stderr=subprocess.STDOUT, timeout=120)
                output = r.stdout
                if r.returncode != 0:
                    sys.exit(f"getting-started: `{cmd}` exited {r.returncode}:\n{output}")
                if missing(expected, output):
                    sys.exit(f"getting-started: `{cmd}` did not print {missing(expected, output)}:\n{output}")
            print(f"getting-started: ok: {cmd}")
        # Started by hand, the daemon speaks of the shell's limits, never
        # of a unit's LimitNOFILE= (there is no unit; ops/fd-limit makes the
        # warning fire).
        for _, log in background:
            log.seek(0)
            if "LimitNOFILE" in log.read():
                sys.exit("getting-started: the daemon started by hand speaks of LimitNOFILE")
    finally:
        for p, _ in background:
            if p.poll() is None:
                p.send_signal(signal.SIGTERM)
            try:
                p.wait(timeout=10)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()


def inside():
    """In the private mount namespace: an empty /run, a copy of /etc as on
    a machine that never had cuflag (no user or group cuflag, as the
    packages make) but has the user the README names, then the steps."""
    tmp = tempfile.mkdtemp(prefix="cuflag-start-")
    try:
        subprocess.run(["cp", "-a", "/etc", os.path.join(tmp, "etc")], check=True)
        subprocess.run(["mount", "--bind", os.path.join(tmp, "etc"), "/etc"], check=True)
        subprocess.run(["mount", "-t", "tmpfs", "-o", "mode=0755", "tmpfs", "/run"], check=True)
        for undo in (["userdel", "cuflag"], ["groupdel", "cuflag"]):
            subprocess.run(undo, stderr=subprocess.DEVNULL)  # absent: fine
        if subprocess.run(["id", "alice"], capture_output=True).returncode != 0:
            subprocess.run(["useradd", "--no-create-home", "alice"], check=True)
        run_steps()
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    print("getting-started: ok")


def main():
    if len(sys.argv) > 1 and sys.argv[1] == "--inside":
        inside()
        return
    if os.geteuid() != 0:
        print("getting-started: skipped: not root")
        sys.exit(77)
    for tool in ("unshare", "useradd", "groupadd", "usermod"):
        if not shutil.which(tool):
            print(f"getting-started: skipped: {tool} not found")
            sys.exit(77)
    rc = subprocess.run(["unshare", "--mount", "--propagation", "private", sys.executable,
                         os.path.abspath(__file__), "--inside"]).returncode
    sys.exit(rc)


if __name__ == "__main__":
    main()
