#!/usr/bin/env python3
"""Checks that every ratio row of a `mmlab bench` report.json carries a 95%
interval around its ratio (ctest cli.bench_ratio_intervals)."""
import json
import sys


def check(name, ratio, ci):
    if ci is None:
        sys.exit(f"{name}: no interval (ratio {ratio})")
    lo, hi = ci
    if not (0 < lo <= ratio <= hi):
        sys.exit(f"{name}: ratio {ratio} outside its interval [{lo}, {hi}]")


def main():
    r = json.load(open(sys.argv[1]))
    n = 0
    for case in ("64K", "2M"):
        check(f"fault {case} vs 4K", r["fault"][case]["vs_4k"], r["fault"][case]["vs_4k_ci95"])
        check(f"fork {case} vs 4K", r["fork"][case]["fork_vs_4k"], r["fork"][case]["fork_vs_4k_ci95"])
        n += 2
    for case in ("4K", "64K", "2M"):
        f = r["fault"][case]
        check(f"fault {case} zeroing vs memset", f["zeroing_vs_memset"], f["zeroing_vs_memset_ci95"])
        k = r["fork"][case]
        check(f"fork {case} copy vs memcpy", k["copy_vs_memcpy"], k["copy_vs_memcpy_ci95"])
        n += 2
    t = r["fault"]["trace"]
    check("trace on vs off", t["on_vs_off"], t["on_vs_off_ci95"])
    n += 1
    for folio, paths in r["data"].items():
        for path, ops in paths.items():
            for op, d in ops.items():
                check(f"data {folio} {path} {op}", d["model_vs_native_bandwidth"], d["model_vs_native_bandwidth_ci95"])
                n += 1
    for col, c in r["cow"]["usemem"].items():
        if col != "base":
            check(f"cow usemem {col} vs base", c["vs_base"], c["vs_base_ci95"])
            n += 1
    print(f"{n} ratios, each inside its interval")


main()
