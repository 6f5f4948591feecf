#!/usr/bin/env python3
"""Prints what one test printed, read from ctest's LastTest.log.

usage: test_output.py LastTest.log TEST_NAME
"""
import sys


def test_output(log_path, name):
    state = "seek"  # seek -> header (found the test) -> output
    out = []
    for line in open(log_path, errors="replace").read().splitlines():
        if state == "seek" and line.endswith(f"Testing: {name}"):
            state = "header"
        elif state == "header" and line == "Output:":
            state = "output"
        elif state == "output":
            if line.startswith("<end of output>"):
                break
            out.append(line)
    return out[1:] if out and out[0].startswith("-----") else out


if __name__ == "__main__":
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    print("\n".join(test_output(sys.argv[1], sys.argv[2])))
