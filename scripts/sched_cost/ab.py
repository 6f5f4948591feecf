#!/usr/bin/env python3
"""Interleaved A/B of two probe binaries (probe.cpp): PAIRS runs of each,
alternating which goes first; per case the median of the paired ratios
B/A with a 95% bootstrap interval (2,000 resamples, fixed seed)."""
import random
import statistics
import subprocess
import sys

pairs = int(sys.argv[1])
a, b = sys.argv[2], sys.argv[3]
reps = sys.argv[4] if len(sys.argv) > 4 else "15"


def run(x):
    out = subprocess.run([x, reps], capture_output=True, text=True, check=True).stdout
    return {line.split()[0]: float(line.split()[1]) for line in out.splitlines()}


ratios = {}
for i in range(pairs):
    order = [a, b] if i % 2 == 0 else [b, a]
    r = {x: run(x) for x in order}
    for k in r[a]:
        ratios.setdefault(k, []).append(r[b][k] / r[a][k])
random.seed(1)
for k, v in ratios.items():
    med = statistics.median(v)
    boots = sorted(statistics.median(random.choices(v, k=len(v))) for _ in range(2000))
    print(f"{k:18s} B/A median {med:.3f} [{boots[50]:.3f}, {boots[1949]:.3f}] n={len(v)}")
