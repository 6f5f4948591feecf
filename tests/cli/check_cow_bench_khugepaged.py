#!/usr/bin/env python3
"""Checks the khugepaged object cow-bench reports for base-khugepaged (run
with --column base,base-khugepaged --seeds 1): khugepaged ran beside the
writers on the virtual clock, and its figures agree with one another."""
import json
import sys

FIELDS = ("speedup", "cpu_ms", "busy_ms", "collapse_ms", "mmap_write_ms", "mmap_write_max_ms", "virtual_s",
          "wakes", "full_scans", "attempts", "collapses", "write_locked")
SCAN_SLEEP_S = 10.0  # scan_sleep_millisecs' default, in virtual seconds


def check(cond, what, data):
    if not cond:
        sys.exit(f"FAIL: {what}: {json.dumps(data, indent=1)[:2000]}")


def main():
    rep = json.load(open(sys.argv[1]))
    w, params = rep["workloads"], rep["params"]
    check(params["seeds"] == 1, "one seed (the per-seed figures are then the run's)", params)
    speedup = params["khugepaged_speedup"]
    check(speedup >= 1, "the speed-up is reported", params)
    md = open(sys.argv[2]).read() if len(sys.argv) > 2 else ""
    for name, cols in w.items():
        check("khugepaged" not in cols["base"], f"{name} base: no khugepaged", cols["base"])
        col = cols["base-khugepaged"]
        k = col.get("khugepaged")
        check(k is not None, f"{name}: base-khugepaged has a khugepaged object", col)
        for f in FIELDS:
            check(isinstance(k.get(f), (int, float)) and k[f] >= 0, f"{name}: khugepaged.{f} is a number >= 0", k)
        check(k["speedup"] == speedup, f"{name}: the column's speed-up is the run's", k)
        # The thread starts with the phase and its first wake is at once.
        check(k["wakes"] > 0, f"{name}: khugepaged woke beside the writers", k)
        check(k["busy_ms"] > 0 and k["cpu_ms"] > 0, f"{name}: its wakes took time", k)
        # The clock moves over every sleep between wakes at its full length,
        # and by each wake's wall time.
        check(k["virtual_s"] >= (k["wakes"] - 1) * SCAN_SLEEP_S + k["busy_ms"] / 1e3 * 0.999,
              f"{name}: the virtual clock holds the sleeps and the wakes", k)
        check(k["collapses"] <= k["attempts"] and k["write_locked"] <= k["attempts"],
              f"{name}: collapses and write-locked calls are attempts", k)
        check(k["collapses"] <= k["write_locked"], f"{name}: a collapse holds mmap_lock for write", k)
        check(k["mmap_write_max_ms"] <= k["mmap_write_ms"] <= k["collapse_ms"],
              f"{name}: the longest hold <= all holds <= the collapses' time", k)
        check((k["mmap_write_max_ms"] > 0) == (k["write_locked"] > 0),
              f"{name}: a write hold has a longest one", k)
        if k["write_locked"] == 1:
            check(k["mmap_write_max_ms"] == k["mmap_write_ms"], f"{name}: one hold is the longest", k)
        check(col["collapses"] == k["collapses"], f"{name}: every collapse in the column is khugepaged's", col)
        check(f"base-khugepaged: khugepaged beside the writers (sleeps sped up {speedup}x)" in md or not md,
              f"{name}: report.md says so", k)
        print(f"{name}: {k['wakes']} wakes, {k['collapses']} collapses, longest write hold "
              f"{k['mmap_write_max_ms']:.3f} ms")
    print("ok")


main()
