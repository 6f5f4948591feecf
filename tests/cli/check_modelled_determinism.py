#!/usr/bin/env python3
"""cow-bench's modelled columns are deterministic where the counts are: two
runs of usemem and cow-rand with a cost profile, while two busy loops load
both CPUs, give identical modelled.* values in report.json, the per-write modelled
latency percentiles included (no timing is compared, only the modelled
figures, which are counts times fixed costs). --force: the profile may be of
another kind of machine than the one running the test.

usage: check_modelled_determinism.py MMLAB PROFILE OUTDIR"""
import json
import multiprocessing
import subprocess
import sys


def spin():
    while True:
        pass


def run(mmlab, profile, out):
    subprocess.run([mmlab, "cow-bench", "--quick", "--size", "8M", "--workload", "usemem,cow-rand", "--column",
                    "base,rfc,fixed-16K,fixed-64K", "--profile", profile, "--force", "--out", out],
                   check=True, stdout=subprocess.DEVNULL)
    r = json.load(open(out + "/report.json"))
    got = {}
    for w in ("usemem", "cow-rand"):
        for c, v in r["workloads"][w].items():
            m = v.get("modelled")
            if not m or "total_ms" not in m:
                sys.exit(f"{w}/{c}: no modelled values in report.json")
            got[(w, c)] = m
    return got


def main():
    mmlab, profile, out = sys.argv[1:4]
    loaders = [multiprocessing.Process(target=spin, daemon=True) for _ in range(2)]
    for p in loaders:
        p.start()
    try:
        a = run(mmlab, profile, out + "/a")
        b = run(mmlab, profile, out + "/b")
    finally:
        for p in loaders:
            p.terminate()
    bad = [k for k in a if a[k] != b[k]]
    if bad:
        sys.exit(f"modelled values differ between two runs: {bad[0]}: {a[bad[0]]} vs {b[bad[0]]}")
    if a[("usemem", "base")]["total_ms"] <= 0:
        sys.exit("usemem/base: a modelled total of 0")
    print(f"identical modelled values in two loaded runs: {len(a)} workload/column pairs (usemem, cow-rand)")


main()
