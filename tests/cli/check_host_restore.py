#!/usr/bin/env python3
"""ctest host.restore: what a killed host run leaves, and `mmlab host
restore` putting it back. Run as check_host_restore.py MMLAB KILLED_RUN
(KILLED_RUN: tests/host/killed_run.cpp, which writes one setting through the
journal as a run does and waits for its SIGKILL).

A child writes khugepaged's scan_sleep_millisecs (harmless: how long the
thread sleeps between scans) and is killed with SIGKILL. `mmlab host
restore` must refuse while the child lives, naming its pid, and as nobody;
after the kill the setting must still be changed and the journal name it;
then the restore must name the setting, the value and the killed pid, and
the setting must be back. Killed once more, the next run to take the lock
must do the same, saying so on stderr. The original value is written back
whatever happens, so a failing run leaves the machine as it found it."""
import os
import signal
import subprocess
import sys

REL = "transparent_hugepage/khugepaged/scan_sleep_millisecs"
PATH = "/sys/kernel/mm/" + REL
JOURNAL = "/var/tmp/mmlab-host.restore"


def read_setting():
    with open(PATH) as f:
        return f.read().strip()


def write_setting(value):
    with open(PATH, "w") as f:
        f.write(value)


def restore(mmlab):
    return subprocess.run([mmlab, "host", "restore"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                          timeout=60)


def fail(msg):
    sys.exit(f"FAIL: {msg}")


def start_child(killed_run, value):
    """The child, once it has written the setting; None where the host cannot."""
    child = subprocess.Popen([killed_run, REL, value], stdout=subprocess.PIPE, text=True)
    line = child.stdout.readline().strip()
    if line.startswith("host backend unavailable"):
        child.wait()
        print(line)
        return None
    if line != "ready":
        child.kill()
        child.wait()
        fail(f"the child said {line!r}, expected 'ready' (exit {child.returncode})")
    return child


def check_refused_while_alive(mmlab, child, value):
    r = restore(mmlab)
    if r.returncode != 1 or f"pid {child.pid}" not in r.stderr or not r.stderr.startswith("mmlab host restore: "):
        fail(f"with the run alive, expected exit 1 naming pid {child.pid}; exit {r.returncode}, "
             f"stdout {r.stdout!r}, stderr {r.stderr!r}")
    if read_setting() != value:
        fail(f"a refused restore changed {PATH}: {read_setting()}")


def check_refused_without_root(mmlab, value):
    """As nobody (where setpriv can make one that may run the binary): exit 1, saying root is needed."""
    cmd = ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", mmlab, "host", "restore"]
    try:
        r = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, timeout=60)
    except FileNotFoundError:
        return
    if r.returncode in (126, 127):  # nobody cannot reach the build tree
        return
    if r.returncode != 1 or not r.stderr.startswith("mmlab host restore: needs root"):
        fail(f"as nobody, expected exit 1 saying root is needed; exit {r.returncode}, stderr {r.stderr!r}")
    if read_setting() != value:
        fail(f"a restore without root changed {PATH}: {read_setting()}")


def check_left_changed(value):
    if read_setting() != value:
        fail(f"{PATH} reads {read_setting()} after the kill, expected {value} (the child's)")
    if not os.path.exists(JOURNAL) or PATH not in open(JOURNAL).read():
        fail(f"{JOURNAL} does not journal {PATH} after the kill")


def check_restored(mmlab, original, pid):
    r = restore(mmlab)
    want = f'restored {PATH} to "{original}" (left by a killed run, pid {pid})'
    if r.returncode != 0 or want not in r.stdout.splitlines():
        fail(f"expected exit 0 and the line {want!r}; exit {r.returncode}, stdout {r.stdout!r}, stderr {r.stderr!r}")
    if read_setting() != original:
        fail(f"{PATH} reads {read_setting()} after the restore, expected {original}")
    if os.path.exists(JOURNAL):
        fail(f"{JOURNAL} is still there after the restore")
    again = restore(mmlab)
    if again.returncode != 0 or again.stdout != "nothing to restore\n":
        fail(f"a second restore: exit {again.returncode}, stdout {again.stdout!r}, stderr {again.stderr!r}")
    print(r.stdout, end="")


def check_next_run_restores(killed_run, original):
    """Killed again, the next run to take the lock puts the setting back and says so on stderr."""
    child = start_child(killed_run, str(int(original) + 4321))
    child.send_signal(signal.SIGKILL)
    child.wait()
    r = subprocess.run([killed_run, "--next-run"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                       timeout=600)
    want = f'mmlab: restored {PATH} to "{original}" (left by a killed run, pid {child.pid})'
    if r.returncode != 0 or want not in r.stderr.splitlines():
        fail(f"the next run: expected exit 0 and the line {want!r} on stderr; exit {r.returncode}, "
             f"stderr {r.stderr!r}")
    if read_setting() != original or os.path.exists(JOURNAL):
        fail(f"after the next run {PATH} reads {read_setting()} (expected {original}), journal there: "
             f"{os.path.exists(JOURNAL)}")
    print(want)


def main():
    mmlab, killed_run = sys.argv[1:3]
    if os.geteuid() != 0:
        print("host backend unavailable: not root")
        return
    if not os.access(PATH, os.W_OK):
        print(f"host backend unavailable: {PATH} is not writable here")
        return
    # A journal an earlier killed run left would be replayed by the child
    # and put back a value other than the one read here: clear it first.
    first = restore(mmlab)
    if first.returncode != 0:
        fail(f"the first restore: exit {first.returncode}, stderr {first.stderr!r}")
    original = read_setting()
    value = str(int(original) + 1234)
    child = None
    try:
        child = start_child(killed_run, value)
        if child is None:
            return
        check_refused_while_alive(mmlab, child, value)
        child.send_signal(signal.SIGKILL)
        child.wait()
        check_left_changed(value)
        check_refused_without_root(mmlab, value)
        check_restored(mmlab, original, child.pid)
        check_next_run_restores(killed_run, original)
    finally:
        if child is not None and child.poll() is None:
            child.kill()
            child.wait()
        if read_setting() != original:
            write_setting(original)
            print(f"(wrote {PATH} back to {original} by hand)")


main()
