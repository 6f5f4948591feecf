#!/usr/bin/env python3
"""Checks that cow-bench's plots stay readable with every column: runs
`mmlab cow-bench --quick --workload usemem` into a scratch folder, then
reads each gnuplot script it wrote. No chart has more than 6 series or
gives two series one colour; base (the first column) is in every chart;
every column is drawn somewhere; the PSS charts' y-axis starts at 0 and
their title says how many reads a line has. Last, the folder is moved
and one chart redrawn from its new place.

Usage: check_cow_bench_plots.py MMLAB SCRATCH_DIR"""
import os
import re
import shutil
import subprocess
import sys

MAX_SERIES = 6  # kMaxSeries, tools/mmlab/report/plot.h


def fail(msg):
    sys.exit(f"FAIL: {msg}")


def series_of(script):
    """The titles and colours of the script's data series (the error bars
    and published markers that share a series' data are not series)."""
    out = []
    for m in re.finditer(r"\$s(\d+) using 1:2(?::3:4)? with (?:boxes|yerrorlines)[^,]*? lc rgb '(#[0-9a-f]{6})' title '((?:[^']|'')*)'", script):
        out.append((m.group(3).replace("''", "'"), m.group(2)))
    return out


def main():
    mmlab, scratch = sys.argv[1], sys.argv[2]
    shutil.rmtree(scratch, ignore_errors=True)
    out = os.path.join(scratch, "a")
    run = subprocess.run([mmlab, "cow-bench", "--quick", "--workload", "usemem", "--out", out],
                         stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    if run.returncode != 0:
        fail(f"cow-bench exited {run.returncode}: {run.stdout[-2000:]}")
    scripts = sorted(f for f in os.listdir(out) if f.endswith(".gp"))
    if not scripts:
        fail(f"no plot scripts in {out}")
    drawn = {}
    for name in scripts:
        text = open(os.path.join(out, name)).read()
        series = series_of(text)
        if not series:
            fail(f"{name}: no series found")
        if len(series) > MAX_SERIES:
            fail(f"{name}: {len(series)} series, more than {MAX_SERIES}: {[t for t, _ in series]}")
        colours = [c for _, c in series]
        if len(set(colours)) != len(colours):
            fail(f"{name}: a colour repeats: {series}")
        if series[0][0] != "base":
            fail(f"{name}: the first series is {series[0][0]}, not base")
        plot = name.rsplit("-", 1)[0]  # cow-usemem-latency-sizes -> cow-usemem-latency
        drawn.setdefault(plot, set()).update(t for t, _ in series)
        if "-pss" in name:
            if not re.search(r"^set yrange \[0:", text, re.M):
                fail(f"{name}: the y-axis does not start at 0")
            if not re.search(r"\(\d+(-\d+)? reads a line\)", text):
                fail(f"{name}: the title does not say how many PSS reads a line has")
    # Every column that ran is in some chart of each plot.
    report = open(os.path.join(out, "report.md")).read()
    ran = set(re.findall(r"^\| ([a-z0-9K-]+) \| (?!not run)", report.split("### ")[0], re.M)) - {"column"}
    if len(ran) < 10:
        fail(f"only {len(ran)} columns found in the report: {sorted(ran)}")
    for plot, titles in drawn.items():
        if ran - titles:
            fail(f"{plot}: columns in no chart: {sorted(ran - titles)}")
    # The scripts name their PNG without a folder: a moved folder redraws in place.
    moved = os.path.join(scratch, "b")
    os.rename(out, moved)
    one = next(s for s in scripts if "-pss" in s)
    png = one[:-3] + ".png"
    os.remove(os.path.join(moved, png))
    subprocess.run(["gnuplot", one], cwd=moved, check=True)
    if os.path.getsize(os.path.join(moved, png)) == 0:
        fail(f"{png} not redrawn")
    print(f"cow-bench plots: {len(scripts)} charts of {len(drawn)} plots, at most {MAX_SERIES} series each, "
          f"no colour repeated, {len(ran)} columns drawn; {png} redrawn in place")


if __name__ == "__main__":
    main()
