#!/usr/bin/env python3
"""Replays every finding of tests/scenarios/races.mms 100 times beside
another test file, under `mmlab run -j 2` (issue 34, acceptance 4; not in
CI, run once: numbers in docs/RACES.md).

1. `mmlab run races.mms` prints, per reverted test, the finding's schedule
   line (`# replay mmlab-schedule v1 ...`) and its violation (`# found ...`).
2. A generated file holds each reverted test REPS times with its race line
   replaced by `race schedule="LINE"`, and once with one step of the line
   edited. It runs with -j 2 beside language_examples.mms.
3. Every copy must pass and print the same line (so the same choices, step
   count and step hash) and the same violation; each edited copy must fail
   with "diverged at step S", S the step edited.

Usage: scripts/races_replay.py [MMLAB] [REPS]   (default build/release/mmlab, 100)
"""
import os
import re
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
MMLAB = sys.argv[1] if len(sys.argv) > 1 else os.path.join(ROOT, "build/release/mmlab")
REPS = int(sys.argv[2]) if len(sys.argv) > 2 else 100
RACES = os.path.join(ROOT, "tests/scenarios/races.mms")
BESIDE = os.path.join(ROOT, "tests/scenarios/language_examples.mms")


def run(args):
    return subprocess.run([MMLAB, "run"] + args, capture_output=True, text=True)


def findings(out):
    """{test: (line, violation)} from a run's output (the finding of each test)."""
    res, found = {}, None
    for ln in out.splitlines():
        m = re.match(r"# found in [^:]*: [^:]*:\d+: (.*)", ln)
        if m:
            found = m.group(1)
        m = re.match(r"# replay (mmlab-schedule v1 .*)", ln)
        if m:
            name = re.search(r" test=(\S+)", m.group(1)).group(1)
            # The copies carry their own test names: compare the rest.
            res[name] = (re.sub(r" test=\S+", "", m.group(1)), found)
    return res


def edit_line(line):
    """The line with its middle step's site changed: (edited line, step)."""
    m = re.search(r" steps=(\S+)", line)
    steps = m.group(1)
    if len(re.search(r" sites=(\S+)", line).group(1).split(";")) > 64:
        return None, None  # two digits a step: not edited here
    at = len(steps) // 2
    new = "B" if steps[at] != "B" else "A"
    return line[: m.start(1) + at] + new + line[m.start(1) + at + 1 :], at


def main():
    text = open(RACES).read()
    first = run([RACES])
    if first.returncode != 0:
        print(first.stdout, first.stderr)
        return 1
    found = findings(first.stdout)
    blocks = re.split(r"(?m)^(?=test )", text)
    head, tests = blocks[0], blocks[1:]
    gen = [l for l in head.splitlines() if not l.startswith("#")]
    expect_edit = {}
    for t in tests:
        name = t.split()[1]
        if name not in found:
            continue
        line = re.search(r"# replay (mmlab-schedule v1 .* test=" + re.escape(name) + " .*)", first.stdout).group(1)
        for r in range(REPS):
            gen.append(re.sub(r"(?m)^race .*$", 'race schedule="' + line.replace('"', "%22") + '"',
                              t.replace("test " + name, f"test {name}-r{r}", 1)))
        edited, at = edit_line(line)
        if edited:
            gen.append(re.sub(r"(?m)^race .*$", 'race schedule="' + edited + '"',
                              t.replace("test " + name, f"test {name}-edited", 1)))
            expect_edit[f"{name}-edited"] = at
    with tempfile.NamedTemporaryFile("w", suffix=".mms", delete=False) as f:
        f.write("\n".join(gen) + "\n")
        path = f.name
    second = run(["-j", "2", path, BESIDE])
    os.unlink(path)
    again = findings(second.stdout)
    bad = 0
    for name, (line, violation) in sorted(found.items()):
        same = sum(1 for r in range(REPS) if again.get(f"{name}-r{r}") == (line, violation))
        passed = sum(1 for r in range(REPS) if re.search(rf"(?m)^ok \d+ {re.escape(name)}-r{r}$", second.stdout))
        steps = sum(int(c.split("*")[1]) if "*" in c else 1
                    for c in re.search(r" choices=(\S+)", line).group(1).split(","))
        h = re.search(r" hash=(\S+)", line).group(1)
        print(f"{name}: {passed}/{REPS} passed, {same}/{REPS} the same line (steps {steps}, hash {h}) and violation")
        bad += (passed != REPS) + (same != REPS)
    for name, at in sorted(expect_edit.items()):
        ok = re.search(rf"(?m)^not ok \d+ {re.escape(name)}$", second.stdout) and \
            f"diverged at step {at}" in second.stdout
        print(f"{name}: {'diverged at step ' + str(at) if ok else 'NOT reported as diverged'}")
        bad += not ok
    beside = re.search(r"# Totals: .*", second.stdout)
    print("run -j 2 beside", os.path.basename(BESIDE), "(the edited copies fail):", beside.group(0) if beside else "?")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
