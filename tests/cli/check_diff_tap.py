#!/usr/bin/env python3
"""`mmlab diff` speaks TAP and says what kind of difference it saw: a plan
line and one `ok`/`not ok` line per test; a test whose only differences are
the model's own mechanism counters is `ok` with that note and counted apart
from the tests that agree; `--expect-nfc` judges those counters only with
`--counters all`; `--json` holds the same totals, the commit and the command
line; `--full` shows the lines the default cuts.

usage: check_diff_tap.py MMLAB SCENARIOS_DIR OUTDIR"""
import json
import re
import subprocess
import sys


def diff(mmlab, *args):
    r = subprocess.run([mmlab, "diff", *args], capture_output=True, text=True)
    return r.returncode, r.stdout


def fail(msg):
    sys.exit("check_diff_tap.py: " + msg)


def main():
    mmlab, scen, out = sys.argv[1:4]
    longterm = f"{scen}/gup_longterm.mms"
    batch = "model:gup.walk=batch"
    js = f"{out}/diff.json"
    rc, text = diff(mmlab, "--b", batch, "--expect-nfc", "--filter", "*hugetlb-2048kB", "--json", js, longterm)
    lines = text.splitlines()
    if lines[:1] != ["TAP version 13"] or not re.fullmatch(r"1\.\.(\d+)", lines[1]):
        fail(f"no TAP header and plan: {lines[:2]}")
    plan = int(lines[1][3:])
    results = [l for l in lines if re.match(r"(not )?ok \d+ - ", l)]
    if len(results) != plan or plan == 0:
        fail(f"plan 1..{plan} but {len(results)} test lines")
    counters_only = [l for l in results if l.endswith("# only model-only counters differ")]
    if not counters_only:
        fail("no test with only model-only counters differing (gup.grab moves under gup.walk=batch on hugetlb)")
    if rc != 0:
        fail(f"--expect-nfc failed on model-only counters alone (exit {rc})")
    j = json.load(open(js))
    t = j["totals"]
    if t["counters_only"] != len(counters_only) or t["tests"] != plan or t["agree"] + t["counters_only"] != plan:
        fail(f"JSON totals {t} disagree with the TAP ({plan} tests, {len(counters_only)} counters only)")
    if "diff" not in j["command"] or not j["commit"] or len(j["tests"]) != plan:
        fail(f"JSON lacks the command, commit or a record per test: {j['command']!r} {j['commit']!r}")
    rc, text = diff(mmlab, "--b", batch, "--expect-nfc", "--counters", "all", "--filter", "*hugetlb-2048kB", longterm)
    if rc != 1 or "not ok" not in text:
        fail(f"--expect-nfc --counters all passed model-only counter differences (exit {rc})")
    # The default cuts a statement's state lines at 4 a side; --full does not.
    args = ["--b", "model:cow.policy=fixed", "--filter", "cow-anon-basic-fork-thp-pte-64kB", f"{scen}/cow.mms"]
    _, cut = diff(mmlab, *args)
    _, full = diff(mmlab, "--full", *args)
    if "more lines (--full shows them)" not in cut or "more lines" in full or len(full) <= len(cut):
        fail("--full does not show the lines the default cuts")
    # The TAP line counts the statements that differ, with --full as without.
    counts = [re.search(r"end state differs after (\d+) statement", t) for t in (cut, full)]
    if not all(counts) or counts[0].group(1) != counts[1].group(1) or counts[0].group(1) == "0":
        fail(f"--full changes the count of differing statements: {[c.group(0) if c else None for c in counts]}")
    print(f"TAP plan 1..{plan}, {len(counters_only)} counters-only tests, JSON totals agree, --counters all and --full work")


main()
