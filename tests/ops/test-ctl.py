#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""cuflagctl against a real cuflagd: --json output parses and matches what the
daemon holds (its settings, a client with 5 slots of which 2 are armed and 3
more in a group, its process name and cgroup), the tables name the same
things, a parked scanner is explained as its mode has it, and the exit codes
say what went wrong. Where this process may make a cgroup v2 (root), the
client runs in one whose name holds a quote: named as the daemon cleans it,
in clients --json and on cuflag_client_info."""
import json
import os
import shutil
import subprocess
import tempfile
import time

from opsutil import CUFLAGD, ctl, ctl_json, expect, running_daemon, wait_for

SLOT_HOLDER = os.environ["SLOT_HOLDER"]


def check_settings(sock):
    st = ctl_json(sock, "stats")
    expect(st["protocol"] == 3, "protocol 3")
    expect(st["slab"] == "memfd", "memfd slab")
    expect(st["max_clients"] == 7, "max_clients from the command line")
    expect(st["slots_per_client"] == 16, "slots_per_client from the command line")
    expect(st["spin_us"] == 123, "spin_us from the command line")
    expect(st["clients"] == 0 and st["slots"] == 0 and st["pending"] == 0, "idle daemon")
    expect(len(st["epoch"]) == 16 and int(st["epoch"], 16) != 0, "epoch in hex")
    for key in ("uptime_ms", "armed", "wakes", "completions", "parks", "passes",
                "bad_arms", "dropped", "scanner"):
        expect(key in st, f"stats has {key}")
    return st


def cgroup_of(pid="self"):
    """A process's cgroup v2 path, as /proc says it; None without cgroup v2."""
    with open(f"/proc/{pid}/cgroup") as f:
        return next((ln[3:].strip() for ln in f if ln.startswith("0::")), None)


def own_cgroup():
    """This process's cgroup v2 path, and where it lies in the file system
    (None where there is no cgroup v2 mounted)."""
    path = cgroup_of()
    with open("/proc/self/mountinfo") as f:
        for ln in f:
            mnt, _, fs = ln.partition(" - ")
            if path and fs.split()[0] == "cgroup2" and mnt.split()[3] == "/":
                return path, mnt.split()[4] + path
    return path, None


def make_cgroup():
    """A child cgroup of ours named with a quote (the daemon makes it '_'),
    or None where we may not make one."""
    path, where = own_cgroup()
    if not where:
        return None
    name = f'cuflag-ctl-"q"-{os.getpid()}.scope'
    try:
        os.mkdir(os.path.join(where, name))
    except OSError as e:
        print(f"ctl: no cgroup of our own ({e}): the client runs in ours")
        return None
    return os.path.join(path, name), os.path.join(where, name)


def remove_cgroup(cg):
    # The holder has exited and been reaped: the cgroup empties at once or soon.
    for _ in range(100):
        try:
            os.rmdir(cg[1])
            return
        except OSError:
            time.sleep(0.05)


def check_who(sock, holder_pid, cg):
    """Who the client is: its comm, and its cgroup as /proc says it (made
    printable ASCII without quotes); with our cgroup, its unit too."""
    path = cgroup_of(holder_pid)
    c = ctl_json(sock, "clients")["clients"][0]
    expect(c["comm"] == "slot-holder", f"clients: comm {c}")
    if path is None:
        expect("cgroup" not in c, "no cgroup v2: no cgroup")
        return
    clean = path.replace('"', "_").replace("\\", "_")[:127]
    expect(c["cgroup"] == clean, f"clients: cgroup {c.get('cgroup')} is {clean}")
    text = ctl("--socket", sock, "metrics").stdout
    info = [ln for ln in text.splitlines() if ln.startswith("cuflag_client_info{")]
    expect(len(info) == 1 and f'cgroup="{clean}"' in info[0] and info[0].endswith("} 1"),
           f"cuflag_client_info: {info}")
    expect(sum('cgroup="' in ln for ln in text.splitlines()) == 1,
           "the cgroup on cuflag_client_info alone")
    if cg:
        unit = os.path.basename(clean)
        expect(c["unit"] == unit and f'unit="{unit}"' in info[0], f"unit {unit}: {c}")
    print(f"ctl: client {holder_pid} named: comm slot-holder, cgroup {clean}, "
          f"unit {c.get('unit', '-')}")
    promtool = shutil.which("promtool")
    if promtool:
        r = subprocess.run([promtool, "check", "metrics"], input=text, text=True,
                           capture_output=True)
        expect(r.returncode == 0, f"promtool check metrics: {r.stdout}{r.stderr}")


def check_age(sock):
    """A client's age grows with the time it is connected, in clients as in
    the metrics' cuflag_client_age_seconds."""
    time.sleep(1.2)  # let the holder be a second old, at least
    age = ctl_json(sock, "clients")["clients"][0]["age_s"]
    metric = [float(ln.split()[-1]) for ln in ctl("--socket", sock, "metrics").stdout.splitlines()
              if ln.startswith("cuflag_client_age_seconds{")]
    expect(age >= 1, f"clients: age {age} s for a client connected over a second ago")
    expect(len(metric) == 1 and abs(metric[0] - age) < 2,
           f"clients: age {age} s, cuflag_client_age_seconds {metric}")
    table = ctl("--socket", sock, "clients").stdout.splitlines()
    expect(table[1].split()[8] not in ("0", "0s"), f"clients table: age: {table[1]}")
    print(f"ctl: client age {age} s, cuflag_client_age_seconds {metric[0]}")


def check_holder(sock, holder_pid, epoch):
    # The arms reach the daemon through the region's queue: wait until drained.
    clients = wait_for("2 pending arms", lambda: (lambda c: c if c["clients"] and
                       c["clients"][0]["pending"] == 2 else None)(ctl_json(sock, "clients")))
    expect(len(clients["clients"]) == 1, "one client")
    c = clients["clients"][0]
    expect(c["pid"] == holder_pid, f"client pid {c['pid']} is the holder's {holder_pid}")
    expect(c["uid"] == os.getuid() and c["gid"] == os.getgid(), "client uid and gid")
    expect(c["slots"] == 8, "client holds 5 slots and 3 in a group")
    expect(c["armed"] == 2 and c["wakes"] == 0, "2 arms, no wakes")
    expect(c["id"] != 0 and "connected_ms" in c, "client id and connection time")
    expect(0 <= c["age_s"] < 60, "client age in seconds")
    check_age(sock)

    status = ctl_json(sock, "status")
    expect(status["clients"] == 1 and status["slots"] == 8 and status["pending"] == 2,
           "status counts the client")
    expect(status["grouped_slots"] == 3, f"of its slots, 3 in a group: {status}")
    expect(status["epoch"] == epoch, "same epoch")
    expect(status["scanner"] in ("spinning", "parked"), "scanner state named")
    expect("armed" not in status, "status is the short view")

    table = ctl("--socket", sock, "clients").stdout.splitlines()
    expect(table[0].split() == ["ID", "PID", "UID", "GID", "SLOTS", "ARMED", "WAKES",
                                "PENDING", "AGE", "COMM", "UNIT"], "clients table header")
    expect(table[1].split()[1:5] == [str(holder_pid), str(os.getuid()), str(os.getgid()),
                                     "8"], "clients table row")
    expect(table[1].split()[9] == "slot-holder", f"clients table: comm: {table[1]}")
    human = ctl("--socket", sock, "status").stdout
    expect("memfd" in human and epoch in human, "status table")
    # The default scanner parks while it sleeps until the armed slots are
    # due (here they never are: it looks at most every backstop), and the
    # table says that this is no contradiction.
    expect_parked_why(sock, "adaptive", "parked (sleeping until the next completion is due)")


def expect_parked_why(sock, mode, why):
    """Parked with slots pending, explained as the scanner mode has it."""
    expect(ctl_json(sock, "status")["scanner_mode"] == mode, f"scanner mode {mode}")
    # The adaptive scanner wakes for a look every backstop: the table is
    # asked until it catches it parked, as the JSON was.
    wait_for("the scanner to park", lambda: ctl_json(sock, "status")["scanner"] == "parked")
    wait_for(f"{mode}: parked next to pending explained ({why})",
             lambda: why in ctl("--socket", sock, "status").stdout)


def check_spin_mode(tmp):
    """The spinning scanner parks only when its armed slots stall, and says so."""
    with running_daemon(tmp, "--scanner-mode", "spin", "--pending-spin-ms", "1",
                        sock=os.path.join(tmp, "spin.sock")) as sock:
        holder = subprocess.Popen([SLOT_HOLDER, sock, "1", "1"], stdin=subprocess.PIPE,
                                  stdout=subprocess.PIPE, text=True)
        expect(holder.stdout.readline().split() == ["ready", str(holder.pid)], "holder ready")
        wait_for("the arm", lambda: ctl_json(sock, "status")["pending"] == 1)
        expect_parked_why(sock, "spin", "parked (pending slots stalled: polled on a timer)")
        holder.stdin.close()
        expect(holder.wait(timeout=10) == 0, "holder exits cleanly")


def expect_one_line(err, prog, args, pointer=True):
    """A usage error says what is wrong in a line, then (where the usage is
    the answer) where to read it: not the whole usage."""
    lines = err.splitlines()
    expect(len(lines) <= 2 and prog in lines[0],
           f"{prog} {args}: one line, not the usage: {err}")
    if pointer:
        expect(f"'{prog} --help'" in lines[-1], f"{prog} {args}: a pointer to --help: {err}")


def check_errors(tmp, sock):
    r = ctl("--socket", os.path.join(tmp, "none.sock"), "status", check=False)
    expect(r.returncode == 1 and r.stderr and not r.stdout, "unreachable daemon: exit 1")
    # The hint speaks of systemctl only where systemd runs this host.
    systemd = os.path.isdir("/run/systemd/system")
    expect(("systemctl" in r.stderr) == systemd and "is cuflagd running" in r.stderr,
           f"no socket: a hint for a host {'with' if systemd else 'without'} systemd: {r.stderr}")
    for args in ([], ["bogus"], ["status", "stats"], ["--nope", "status"]):
        r = ctl("--socket", sock, *args, check=False)
        expect(r.returncode == 2 and r.stderr, f"usage error {args}: exit 2")
        expect_one_line(r.stderr, "cuflagctl", args)
    # cuflagd too: a wrong option is one line and where to read more.
    for args in (["--bogus"], ["--max-clients", "x"], ["extra"]):
        r = subprocess.run([CUFLAGD, *args], capture_output=True, text=True, timeout=10)
        expect(r.returncode == 2 and not r.stdout, f"cuflagd {args}: exit 2")
        expect_one_line(r.stderr, "cuflagd", args, pointer=args != ["--max-clients", "x"])
    expect(ctl("--help").stdout.startswith("Usage:"), "--help")
    # $CUFLAG_SOCKET is the default socket.
    r = ctl("status", "--json", env=dict(os.environ, CUFLAG_SOCKET=sock))
    expect(json.loads(r.stdout)["protocol"] == 3, "$CUFLAG_SOCKET")


def main():
    with tempfile.TemporaryDirectory(prefix="cuflag-ctl-") as tmp:
        with running_daemon(tmp, "--max-clients", "7", "--slots-per-client", "16",
                            "--spin-us", "123") as sock:
            epoch = check_settings(sock)["epoch"]
            cg = make_cgroup()
            # Into its cgroup before it connects: the daemon reads it at accept.
            enter = (lambda: open(os.path.join(cg[1], "cgroup.procs"), "w").write(
                str(os.getpid()))) if cg else None
            holder = subprocess.Popen([SLOT_HOLDER, sock, "5", "2", "3"], stdin=subprocess.PIPE,
                                      stdout=subprocess.PIPE, text=True, preexec_fn=enter)
            line = holder.stdout.readline().split()
            expect(line == ["ready", str(holder.pid)], f"holder ready: {line}")
            check_holder(sock, holder.pid, epoch)
            check_who(sock, holder.pid, cg)
            holder.stdin.close()
            expect(holder.wait(timeout=10) == 0, "holder exits cleanly")
            if cg:
                remove_cgroup(cg)
            wait_for("the client to go", lambda: ctl_json(sock, "clients")["clients"] == [])
            expect(ctl_json(sock, "status")["slots"] == 0, "slots freed")
            check_errors(tmp, sock)
        check_spin_mode(tmp)
    print("ctl: ok")


if __name__ == "__main__":
    main()
