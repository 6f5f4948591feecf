#!/usr/bin/env python3
"""mmlab explore's reports (docs/RACES.md): an exploration's counts and
schedule line, the line replaying to the same violation, --explain's
interleaving, an edited line diverging at its step, and a crash of the
child process reported as the outcome `crash` with its schedule line.

usage: check_explore.py MMLAB LANGUAGE_EXAMPLES.mms
"""
import os
import re
import subprocess
import sys


def explore(mmlab, *args, env=None):
    p = subprocess.run([mmlab, "explore", *args], capture_output=True, text=True, env=env)
    return p.returncode, p.stdout + p.stderr


def main():
    mmlab, mms = sys.argv[1], sys.argv[2]
    bad = []

    def check(cond, what, out):
        if not cond:
            bad.append(f"{what}\n{out}")

    # The block's own strategy (dfs=1) under `expect violation`: found, exit 0.
    rc, out = explore(mmlab, mms, "--test", "lang-race-expect-violation")
    check(rc == 0, "expect-violation test: exit 0", out)
    check(re.search(r"^outcomes: clean \d+, violation [1-9]\d*,", out, re.M), "violations counted", out)
    check("exhausted " in out, "DFS reports exhausted N schedules", out)
    m = re.search(r"^schedule: (mmlab-schedule v1 .*)$", out, re.M)
    check(m, "a schedule line", out)
    if m:
        line = m.group(1)
        rc2, out2 = explore(mmlab, mms, "--test", "lang-race-expect-violation", "--schedule", line, "--explain")
        check(rc2 == 0 and "replay: violation" in out2, "the line replays to the violation", out2)
        check(re.search(r"^\s+\d+\s+down_write acquire rwsem#\d+", out2, re.M), "--explain shows F's steps", out2)
        check(re.search(r"^\s+\d+\s{40,}start start", out2, re.M), "--explain puts W in its own column", out2)
        edited = re.sub(r"steps=(.)(.)(.)(.)", lambda s: "steps=" + s.group(1) + s.group(2) + s.group(3) + ("A" if s.group(4) != "A" else "B"), line)
        rc3, out3 = explore(mmlab, mms, "--test", "lang-race-expect-violation", "--schedule", edited)
        check(rc3 == 1 and "diverged at step 3: expected T" in out3, "an edited line diverges at step 3", out3)

    # Clean: PCT with its counts, exit 0.
    rc, out = explore(mmlab, mms, "--test", "lang-race", "--runs", "40", "--seed", "5")
    check(rc == 0, "clean test: exit 0", out)
    check("runs: 40 in " in out and "violation 0," in out, "40 clean runs", out)
    check(re.search(r"^k: \d+ counted, \d+ unfiltered", out, re.M), "k filtered and unfiltered", out)
    check(re.search(r"^sites preempted \(\d+ of \d+\)", out, re.M), "sites preempted", out)

    # A crash of the child: the outcome crash, with the crashing run's line.
    # Under ASan the planted SIGSEGV must kill the child as it would a
    # release build: ASan's own SEGV handler would turn it into an abort.
    asan = os.environ.get("ASAN_OPTIONS", "")
    env = dict(os.environ, MMLAB_EXPLORE_TEST_CRASH="3:10",
               ASAN_OPTIONS=(asan + ":" if asan else "") + "handle_segv=0")
    rc, out = explore(mmlab, mms, "--test", "lang-race", "--runs", "40", env=env)
    if "no fork under TSan" not in out:
        check(rc == 1, "crash: exit 1", out)
        check(re.search(r"^outcome: crash \(signal 11, .*\) in the session's run 3 \(pct d=2 seed 1 run 1\), after 11 steps$", out, re.M),
              "crash reported with its run", out)
        check(re.search(r"^schedule: mmlab-schedule v1 .* choices=\S+ sites=\S+ steps=\S{11}$", out, re.M),
              "crash's schedule line of 11 steps", out)

    # Two jobs share the seed's runs: the same 40 runs, counted once each.
    rc, out = explore(mmlab, mms, "--test", "lang-race", "--runs", "40", "--jobs", "2")
    if "no fork under TSan" not in out:
        check(rc == 0 and "jobs: 2" in out and "runs: 40 in " in out, "--jobs 2 makes the 40 runs", out)
        check("clean 42," in out, "40 runs and one profile run per job, all clean", out)

    for b in bad:
        print("FAIL:", b)
    print(f"{'FAIL' if bad else 'ok'}: {len(bad)} problem(s)")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
