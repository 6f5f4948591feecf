#!/usr/bin/env python3
"""docs/BENCH.md's list of suites (the text block under "## The suites")
against `mmlab bench --list`: the same lines, in the same order."""
import re
import subprocess
import sys


def main():
    mmlab, doc = sys.argv[1], sys.argv[2]
    text = open(doc).read()
    m = re.search(r"^## The suites\n.*?```text\n(.*?)```", text, re.S | re.M)
    if not m:
        print(f"{doc}: no '## The suites' section with a text block")
        return 1
    listed = subprocess.run([mmlab, "bench", "--list"], capture_output=True, text=True, check=True).stdout
    if m.group(1) != listed:
        print(f"{doc}'s suite list differs from `mmlab bench --list`:\n--- doc\n{m.group(1)}--- bench --list\n{listed}")
        return 1
    print(f"{len(listed.splitlines())} suites, as documented")
    return 0


if __name__ == "__main__":
    sys.exit(main())
