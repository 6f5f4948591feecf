#!/usr/bin/env python3
"""The `tune` table of the language reference lists every key and value the
build has (`mmlab variants`), its default first.

usage: check_tune_table.py MMLAB DOC.md
"""
import re
import subprocess
import sys


def expand(v):
    m = re.match(r"^(\d+)\.\.(\d+)$", v)
    return [str(i) for i in range(int(m.group(1)), int(m.group(2)) + 1)] if m else [v]


def main():
    mmlab, doc = sys.argv[1], sys.argv[2]
    out = subprocess.run([mmlab, "variants"], check=True, capture_output=True, text=True).stdout
    keys, defaults = {}, {}
    key = None
    for line in out.splitlines():
        m = re.match(r"^(\S+): .*\(default (\S+)\)$", line)
        if m:
            key = m.group(1)
            keys[key], defaults[key] = [], m.group(2)
            continue
        m = re.match(r"^  (\S+)", line)
        if m and key:
            keys[key] += expand(m.group(1))
    rows = {}
    for line in open(doc, encoding="utf-8"):
        m = re.match(r"^\| `([a-z_]+\.[a-z_-]+)` \| (.*?) \|", line)  # keys may hold a hyphen (revert.*)
        if m:
            rows[m.group(1)] = m.group(2)
    bad = 0
    for k, vals in keys.items():
        if k not in rows:
            print(f"{doc}: the tune table has no row for {k}")
            bad += 1
            continue
        listed = re.findall(r"`([^`]+)`", rows[k])
        is_range = "..." in rows[k] and len(listed) == 2  # `0` ... `8`, in numeric order
        if is_range:
            listed = expand(f"{listed[0]}..{listed[1]}")
        if sorted(listed) != sorted(vals) or (not is_range and listed[0] != defaults[k]):
            print(f"{doc}: {k} lists {listed}, the build has {vals} (default {defaults[k]}, to be listed first)")
            bad += 1
    print(f"{len(keys) - bad} of {len(keys)} tune keys listed as the build has them")
    return 1 if bad or not keys else 0


if __name__ == "__main__":
    sys.exit(main())
