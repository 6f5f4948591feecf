#!/usr/bin/env python3
"""Checks the mechanics of cow-bench's snapshot, fragmented and fork-exec
workloads in a report.json (run with --column base,fixed-64K --quick)."""
import json
import sys


def check(cond, what, data):
    if not cond:
        sys.exit(f"FAIL: {what}: {json.dumps(data, indent=1)[:2000]}")


def main():
    rep = json.load(open(sys.argv[1]))
    w, params = rep["workloads"], rep["params"]

    for col in ("base", "fixed-64K"):
        s = w["snapshot"][col]
        check(s["writes"] == params["snapshot_writes"], f"snapshot {col}: every scheduled write measured", s)
        for q in ("p50", "p99", "max"):
            check(s["latency_us"][q] >= s["service_us"][q], f"snapshot {col}: latency from schedule >= service {q}", s)
        check(s["zero_subpages_copied"] == 0, f"snapshot {col}: the parent's data has no zero page", s)

    for name in ("snapshot", "fork-exec"):
        base, fixed = w[name]["base"], w[name]["fixed-64K"]
        check(base["exited_sharer_untouched"] == 0, f"{name} base: a 4K copy is the page being written", base)
        # Once the sharer is gone the survivor reuses: only the one fault in
        # flight when the exit returned may still copy.
        check(base["copied_after_exit"] <= 4096 and fixed["copied_after_exit"] <= 65536,
              f"{name}: the survivor reuses once the sharer is gone", w[name])
        check(fixed["exited_sharer_untouched"] <= fixed["bytes_copied"],
              f"{name} fixed-64K: untouched copies are copies", fixed)
        # Every page copied before the exit was written by then or is counted untouched.
        check(fixed["bytes_copied"] - fixed["copied_after_exit"]
              <= fixed["exited_sharer_untouched"] + fixed["bytes_written"],
              f"{name} fixed-64K: copied pages are written or untouched", fixed)

    f = w["fragmented"]["fixed-64K"]
    check(f["anon_fault_fallback"] > f["anon_fault_alloc"] >= 0, "fragmented fixed-64K: most 64K faults fall back", f)
    check(f["filler_pages"] > 0, "fragmented: the filler stays mapped", f)
    print("ok")


main()
