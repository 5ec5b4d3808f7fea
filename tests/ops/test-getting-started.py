#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""The README's "Getting started" without systemd, step by step, as the
README says it: the commands between its markers are run, in order, by
the user the README names (the one its usermod step adds to the group),
and what each prints must match what the README shows under it. So the
README and the product cannot drift apart, and a member of the group is
shown to use the daemon that root started.

In the README's block a line "$ COMMAND" (the user's prompt) or
"# COMMAND" (root's) is a step and the lines up to the next step are what it
prints: each must be found in the step's output, digits standing for any
number and "..." for anything. A "#" step runs as root; a "$" step runs as
the user, with the groups of a shell she logged in with before the steps,
and from a "newgrp GROUP" step on (which must find her a member of GROUP, as
newgrp would) with GROUP as her group and among her groups, as newgrp gives
it (setpriv). A step ending in "&" is started in the background and its
lines are awaited; it is stopped (SIGTERM) at the end; an "export" holds for
the steps after it, as in one shell. The build steps (meson, ninja) are what
meson test has just done: skipped; of "apt-get install", the packages it
names must be installed here (the build just used them).

The steps run in a copy of the checkout that the user can read (the build
tree may lie under a directory only root enters): the files and
directories the steps name (build/... from the build tree, the others from
the source tree), and the client library the programs load. It runs in a
mount namespace of its own, with an empty /run and a copy of /etc, so that
the daemon's socket directory and the groupadd/usermod of the steps touch
nothing of the machine's. Needs root, unshare and setpriv: 77 without."""
import grp
import os
import pwd
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
    """[(command, [expected line, ...], as root?), ...] from the README's block."""
    text = open(readme).read()
    if BEGIN not in text or END not in text:
        sys.exit(f"{readme}: the getting-started markers are missing")
    block = text[text.index(BEGIN):text.index(END)]
    out = []
    for line in block.splitlines():
        line = line.strip()
        if line.startswith(("$ ", "# ")):
            out.append((line[2:], [], line[0] == "#"))
        elif out and line and not line.startswith("```"):
            out[-1][1].append(line)
    if not out:
        sys.exit(f"{readme}: no steps between the getting-started markers")
    return out


def the_user(all_steps):
    """The user the README names: the last word of its usermod step."""
    for cmd, *_ in all_steps:
        words = shlex.split(cmd, comments=True)
        if "usermod" in words[:2]:
            return words[-1]
    sys.exit("getting-started: no usermod step names the user")


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


def run_here(cmd):
    """Whether the step is run (not done by meson test, not a check of
    what is installed, not newgrp)."""
    return not re.match(r"(meson|ninja|newgrp|apt-get install) ", cmd)


def local(cmd):
    """(in the background?, the shell command) of a step."""
    cmd = cmd.strip()
    background = cmd.endswith("&")
    return background, cmd[:-1] if background else cmd


def copy_checkout(all_steps, tmp):
    """tmp/checkout: what the steps name of the checkout, readable by all,
    so that the user runs the steps there as in her own checkout. A word
    (or a VAR=value's value) is a path of the checkout when it names one:
    build/... in the build tree, anything else in the source tree. The
    client library goes where the programs' RUNPATH ($ORIGIN/../client)
    looks for it."""
    top = os.path.join(tmp, "checkout")
    names = {"build/client/libcuflag-client.so.0": os.environ["CUFLAG_CLIENT_LIB"]}
    for cmd, *_ in all_steps:
        if not run_here(cmd):
            continue
        for word in shlex.split(cmd, comments=True):
            for path in word.split("=", 1)[-1].split(":"):
                if not path or path.startswith(("/", "-", ".")) or ".." in path.split("/"):
                    continue
                if path.startswith("build/"):
                    src = os.path.join(BUILD_ROOT, path[len("build/"):])
                else:
                    src = os.path.join(SOURCE_ROOT, path)
                if os.path.exists(src):
                    names[path] = src
    for path, src in names.items():
        dst = os.path.join(top, path)
        os.makedirs(os.path.dirname(dst), exist_ok=True)
        if os.path.isdir(src):
            shutil.copytree(src, dst, ignore=shutil.ignore_patterns("__pycache__"))
        else:
            shutil.copy2(src, dst)
    # Whatever the umask of the checkout: readable by all, and runnable
    # (directories: searchable) where the owner may.
    subprocess.run(["chmod", "-R", "a+rX", top], check=True)
    return top


def check_installed(cmd):
    """The packages an "apt-get install" step names are real: installed
    here, where the build just used them."""
    names = [a for a in shlex.split(cmd, comments=True)[2:] if not a.startswith("-")]
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


class Shell:
    """The user's shell: her ids, as a login gives them and as newgrp
    changes them; the argv that runs a command as her."""

    def __init__(self, user):
        pw = pwd.getpwnam(user)
        self.user, self.uid, self.gid = user, pw.pw_uid, pw.pw_gid
        self.groups = os.getgrouplist(user, pw.pw_gid)  # as she logged in
        self.home = pw.pw_dir

    def newgrp(self, cmd):
        """What newgrp does for a member: the group becomes hers and one of
        her groups. A user outside it would be asked for the group's
        password, so that is a failed step."""
        name = shlex.split(cmd, comments=True)[1]
        try:
            g = grp.getgrnam(name)
        except KeyError:
            sys.exit(f"getting-started: `{cmd}`: no group {name}")
        if self.user not in g.gr_mem and g.gr_gid != pwd.getpwnam(self.user).pw_gid:
            sys.exit(f"getting-started: `{cmd}`: {self.user} is not a member of {name}")
        self.gid = g.gr_gid
        if g.gr_gid not in self.groups:
            self.groups.append(g.gr_gid)

    def argv(self, sh):
        return ["setpriv", f"--reuid={self.uid}", f"--regid={self.gid}",
                f"--groups={','.join(map(str, self.groups))}", "sh", "-c", sh]


def run_steps(all_steps, user, checkout):
    env = {k: v for k, v in os.environ.items() if k not in
           ("CUFLAG_SOCKET", "NOTIFY_SOCKET", "INVOCATION_ID", "LISTEN_FDS", "LISTEN_PID",
            "LD_LIBRARY_PATH", "PYTHONPATH", "CUFLAG_LIBRARY")}
    shell = Shell(user)
    user_env = dict(env, HOME=shell.home, USER=user, LOGNAME=user)
    background = []
    try:
        for cmd, expected, root in all_steps:
            if re.match(r"(meson|ninja) ", cmd):
                print(f"getting-started: skipped (the tree meson test built): {cmd}")
                continue
            if cmd.startswith("newgrp "):
                shell.newgrp(cmd)
                print(f"getting-started: ok ({user}: gid {shell.gid}, groups {shell.groups}): {cmd}")
                continue
            if cmd.startswith("apt-get install "):
                check_installed(cmd)
                print(f"getting-started: ok (installed): {cmd}")
                continue
            in_background, sh = local(cmd)
            if sh.startswith("export "):  # for the steps after it, as in one shell
                pairs = [a.split("=", 1) for a in shlex.split(sh)[1:]]
                env.update(pairs)
                user_env.update(pairs)
                print(f"getting-started: ok: {cmd}")
                continue
            # exec: the process stopped at the end is the step's own (a
            # shell in between would leave it running, orphaned); setpriv
            # execs it too.
            argv = ["sh", "-c", "exec " + sh] if root else shell.argv("exec " + sh)
            who = "root" if root else user
            if in_background:
                log = tempfile.TemporaryFile("w+")
                p = subprocess.Popen(argv, cwd=checkout, env=env if root else user_env,
                                     stdin=subprocess.DEVNULL, stdout=log,
                                     stderr=subprocess.STDOUT, text=True)
                background.append((p, log))
                end = time.monotonic() + 10
                while True:
                    log.seek(0)
                    output = log.read()
                    if not missing(expected, output):
                        break
                    if p.poll() is not None or time.monotonic() > end:
                        sys.exit(f"getting-started: `{cmd}` ({who}) did not print "
                                 f"{missing(expected, output)}:\n{output}")
                    time.sleep(0.02)
            else:
                r = subprocess.run(argv, cwd=checkout, env=env if root else user_env,
                                   text=True, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                   stderr=subprocess.STDOUT, timeout=120)
                output = r.stdout
                if r.returncode != 0:
                    sys.exit(f"getting-started: `{cmd}` ({who}) exited {r.returncode}:\n{output}")
                if missing(expected, output):
                    sys.exit(f"getting-started: `{cmd}` ({who}) did not print "
                             f"{missing(expected, output)}:\n{output}")
            print(f"getting-started: ok ({who}): {cmd}")
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
    # Stopped (meson test's timeout), still stop the daemons started.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit("getting-started: terminated"))
    all_steps = steps(os.path.join(SOURCE_ROOT, "README.md"))
    user = the_user(all_steps)
    tmp = tempfile.mkdtemp(prefix="cuflag-start-")
    try:
        os.chmod(tmp, 0o755)  # the user reaches the checkout's copy in it
        subprocess.run(["cp", "-a", "/etc", os.path.join(tmp, "etc")], check=True)
        subprocess.run(["mount", "--bind", os.path.join(tmp, "etc"), "/etc"], check=True)
        subprocess.run(["mount", "-t", "tmpfs", "-o", "mode=0755", "tmpfs", "/run"], check=True)
        for undo in (["userdel", "cuflag"], ["groupdel", "cuflag"]):
            subprocess.run(undo, stderr=subprocess.DEVNULL)  # absent: fine
        if subprocess.run(["id", user], capture_output=True).returncode != 0:
            subprocess.run(["useradd", "--no-create-home", user], check=True)
        run_steps(all_steps, user, copy_checkout(all_steps, tmp))
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
    for tool in ("unshare", "setpriv", "useradd", "groupadd", "usermod"):
        if not shutil.which(tool):
            print(f"getting-started: skipped: {tool} not found")
            sys.exit(77)
    rc = subprocess.run(["unshare", "--mount", "--propagation", "private", sys.executable,
                         os.path.abspath(__file__), "--inside"]).returncode
    sys.exit(rc)


if __name__ == "__main__":
    main()
