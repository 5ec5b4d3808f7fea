#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""The wheel as a user gets it: scripts/build-wheel.sh builds it, then an
ordinary user (no root, no group) makes a fresh venv with each Python from
3.9 to 3.13 on this machine (pyenv's and the system's), installs the wheel
with `pip install --no-index` and nothing else, and runs
examples/python/quickstart.py, which must say "quickstart: ok": the
package loads the library the wheel brought, and that library starts the
user's own cuflagd (the one in the wheel) as no node daemon answers.

It runs in a mount namespace of its own: an empty /run (no node daemon at
/run/cuflagd/cuflagd.sock, whatever this machine runs), a copy of /etc with
the user in it, a libcuflag-client of the system (ldconfig's) hidden, and,
where pyenv's interpreters lie under /root (0700 here, as a user's own
pyenv lies under their own home), /root opened to the user with only
.pyenv in it. A version with no interpreter here is skipped, with a line
saying so; none at all: 77. Needs root, unshare, setpriv, useradd: 77
without.
    wheel-as-user.py SOURCE_ROOT WHEEL_BUILD_DIR"""
import os
import pwd
import shutil
import subprocess
import sys
import tempfile

USER = "cuflag-wheel"
VERSIONS = ["3.9", "3.10", "3.11", "3.12", "3.13"]


def interpreters(src):
    """(version, path) of every interpreter find-python.sh names."""
    found = []
    for v in VERSIONS:
        out = subprocess.run([os.path.join(src, "python", "tests", "find-python.sh"), v],
                             capture_output=True, text=True, check=True).stdout.split()
        if not out:
            print(f"python {v}: no interpreter here (pyenv or /usr/bin/python{v}): skipped")
        found += [(v, p) for p in out]
    return found


def build_wheel(src, build, dist):
    env = dict(os.environ, BUILD=build, DIST=dist)
    r = subprocess.run([os.path.join(src, "scripts", "build-wheel.sh")], env=env,
                       capture_output=True, text=True)
    sys.stdout.write(r.stdout + r.stderr)
    if r.returncode != 0:
        sys.exit("wheel: scripts/build-wheel.sh failed")
    wheels = [f for f in os.listdir(dist) if f.endswith(".whl")]
    if len(wheels) != 1:
        sys.exit(f"wheel: expected one wheel in {dist}, found {wheels}")
    return os.path.join(dist, wheels[0])


def hide_system_library():
    """Make the system's libcuflag-client (if ldconfig knows one) unloadable
    here: the wheel must not need it."""
    out = subprocess.run(["ldconfig", "-p"], capture_output=True, text=True).stdout
    for line in out.splitlines():
        if "libcuflag-client.so" in line and "=>" in line:
            path = os.path.realpath(line.split("=>")[1].strip())
            subprocess.run(["mount", "--bind", "/dev/null", path], check=True)
            print(f"hidden from the test: {path}")


def open_pyenv_to_users(tmp):
    """/root/.pyenv at its own path (its interpreters name it in their
    RPATH) but reachable by another user: a tmpfs on /root holding it."""
    pyenv = "/root/.pyenv"
    if not os.path.isdir(pyenv) or os.stat("/root").st_mode & 0o005 == 0o005:
        return
    hold = os.path.join(tmp, "pyenv-hold")
    os.mkdir(hold)
    subprocess.run(["mount", "--bind", pyenv, hold], check=True)
    subprocess.run(["mount", "-t", "tmpfs", "-o", "mode=0755", "tmpfs", "/root"], check=True)
    os.mkdir(pyenv)
    subprocess.run(["mount", "--move", hold, pyenv], check=True)


class User:
    """The test user: commands run with its uid and gid only, a clean
    environment (no CUFLAG_*, no LD_LIBRARY_PATH, no PYTHONPATH), its own
    home and runtime directory (0700, as a login gives them)."""

    def __init__(self, tmp):
        subprocess.run(["useradd", "--no-create-home", "--user-group", USER], check=True)
        pw = pwd.getpwnam(USER)
        self.uid, self.gid = pw.pw_uid, pw.pw_gid
        self.home = os.path.join(tmp, "home")
        self.runtime = os.path.join(tmp, "run-user")
        for d in (self.home, self.runtime):
            os.mkdir(d, 0o700)
            os.chown(d, self.uid, self.gid)

    def run(self, argv, path_first=None):
        env = {"HOME": self.home, "XDG_RUNTIME_DIR": self.runtime, "LANG": "C.UTF-8",
               "PATH": (path_first + ":" if path_first else "") + "/usr/bin:/bin"}
        return subprocess.run(["setpriv", f"--reuid={self.uid}", f"--regid={self.gid}",
                               "--clear-groups", "--", *argv], env=env, cwd=self.home,
                              capture_output=True, text=True, timeout=120)

    def processes(self, exe=None):
        """The pids of the user's processes (running exe, if given)."""
        pids = []
        for pid in os.listdir("/proc"):
            try:
                if not pid.isdigit() or os.stat(f"/proc/{pid}").st_uid != self.uid:
                    continue
                if exe is None or os.readlink(f"/proc/{pid}/exe") == exe:
                    pids.append(int(pid))
            except (FileNotFoundError, ProcessLookupError):
                pass
        return pids

    def stop_processes(self):
        """End what the user left running (its cuflagd, started on
        demand, would stay for its idle time): the test's own processes,
        found by their uid."""
        for pid in self.processes():
            try:
                os.kill(pid, 9)
            except ProcessLookupError:
                pass


def check(what, r, want=None):
    out = r.stdout + r.stderr
    if r.returncode != 0 or (want is not None and want not in out):
        sys.stdout.write(out)
        sys.exit(f"wheel: {what} failed (exit {r.returncode})")
    return out


def one_python(user, version, py, wheel, quickstart):
    venv = os.path.join(user.home, "venv-" + os.path.basename(os.path.dirname(
        os.path.dirname(py))) + "-" + version)
    vpy = os.path.join(venv, "bin", "python")
    check(f"{py} -m venv", user.run([py, "-m", "venv", venv]))
    check("pip install --no-index",
          user.run([os.path.join(venv, "bin", "pip"), "install", "--no-index", "--no-cache-dir",
                    "--disable-pip-version-check", "--quiet", wheel]))
    lib = check("the library's path", user.run(
        [vpy, "-c", "import cuflag; print(cuflag.library_path())"])).strip()
    if not lib.startswith(venv + "/"):
        sys.exit(f"wheel: {py}: the package loaded {lib}, not the wheel's own")
    # The entry points and `python -m` run the programs the wheel brought.
    check("cuflagd --version", user.run(["cuflagd", "--version"], path_first=venv + "/bin"),
          "cuflagd ")
    check("python -m cuflag.ctl --version", user.run([vpy, "-m", "cuflag.ctl", "--version"]),
          "cuflagctl ")
    out = check("quickstart.py", user.run([vpy, quickstart]), "quickstart: ok")
    # The daemon it talked to is the user's own, started from the wheel.
    lib_dir = os.path.dirname(lib)
    daemons = user.processes(os.path.join(lib_dir, "cuflagd"))
    if len(daemons) != 1:
        sys.exit(f"wheel: {py}: {len(daemons)} cuflagd of {lib_dir} running as the user, not 1")
    user.stop_processes()
    print(f"python {version} ({py}): venv, pip install --no-index, quickstart: ok")
    return out


def inside(tmp, wheel, quickstart, src):
    subprocess.run(["cp", "-a", "/etc", os.path.join(tmp, "etc")], check=True)
    subprocess.run(["mount", "--bind", os.path.join(tmp, "etc"), "/etc"], check=True)
    subprocess.run(["mount", "-t", "tmpfs", "-o", "mode=0755", "tmpfs", "/run"], check=True)
    hide_system_library()
    found = interpreters(src)
    open_pyenv_to_users(tmp)
    if not found:
        print("wheel: no Python from 3.9 to 3.13 here: skipped")
        sys.exit(77)
    user = User(tmp)
    try:
        for version, py in found:
            one_python(user, version, py, wheel, quickstart)
    finally:
        user.stop_processes()
    print(f"wheel: ok ({len(found)} interpreters, as uid {user.uid})")


def main():
    if len(sys.argv) == 6 and sys.argv[1] == "--inside":
        inside(*sys.argv[2:])
        return
    src, build = sys.argv[1], sys.argv[2]
    if os.geteuid() != 0:
        print("wheel: skipped: not root (a test user is made)")
        sys.exit(77)
    for tool in ("unshare", "setpriv", "useradd", "objdump"):
        if not shutil.which(tool):
            print(f"wheel: skipped: {tool} not found")
            sys.exit(77)
    tmp = tempfile.mkdtemp(prefix="cuflag-wheel-")
    try:
        os.chmod(tmp, 0o755)  # the user reaches the wheel and the example in it
        wheel = build_wheel(src, build, os.path.join(tmp, "dist"))
        quickstart = shutil.copy(os.path.join(src, "examples", "python", "quickstart.py"), tmp)
        rc = subprocess.run(["unshare", "--mount", "--propagation", "private", sys.executable,
                             os.path.abspath(__file__), "--inside", tmp, wheel, quickstart,
                             src]).returncode
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    sys.exit(rc)


if __name__ == "__main__":
    main()
