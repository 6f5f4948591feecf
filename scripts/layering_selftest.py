#!/usr/bin/env python3
"""Checks that scripts/layering.py sees what it must: on a scratch tree laid
out by the real scripts/layers.txt, an include from a lower tools/ room into
a higher one fails the check, naming both rooms, while includes down the
order and between rooms of one rank pass."""

import os
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))


def check(files):
    """(exit status, output) of layering.py over a scratch tree of `files`."""
    with tempfile.TemporaryDirectory() as root:
        for rel, text in files.items():
            path = os.path.join(root, rel)
            os.makedirs(os.path.dirname(path), exist_ok=True)
            with open(path, "w") as f:
                f.write(text)
        r = subprocess.run([sys.executable, os.path.join(HERE, "layering.py"), "--root", root,
                            "--layers", os.path.join(HERE, "layers.txt"), "--allow", os.devnull],
                           capture_output=True, text=True)
        return r.returncode, r.stdout + r.stderr


def main():
    rooms = {
        "tools/mmlab/report/table.h": "#pragma once\n",
        "tools/mmlab/cowbench/grid.h": '#include "report/table.h"\n#include "stress/ops.h"\n',
        "tools/mmlab/stress/ops.h": '#include "cowbench/grid.h"\n',
        "tools/mmlab/bench/suite.h": '#include "cowbench/grid.h"\n',
        "tools/mmlab/cli/main.cpp": '#include "bench/suite.h"\n#include "mmlab/system.h"\n',
        "include/mmlab/system.h": "#pragma once\n",
    }
    rc, out = check(rooms)
    if rc != 0:
        print(f"includes down the order and within a rank were refused:\n{out}")
        return 1
    up = dict(rooms)
    up["tools/mmlab/report/table.h"] = '#include "bench/suite.h"\n'
    rc, out = check(up)
    if rc == 0 or "tools/report includes tools/bench" not in out:
        print(f"an include from report/ up into bench/ was not refused (exit {rc}):\n{out}")
        return 1
    model = dict(rooms)
    model["src/mm/mmap.cpp"] = '#include "stress/ops.h"\n'
    rc, out = check(model)
    if rc == 0 or "mm includes tools/stress" not in out:
        print(f"an include from the model up into tools/ was not refused (exit {rc}):\n{out}")
        return 1
    print("layering.py refuses up-includes between tools/ rooms and from the model into tools/")
    return 0


if __name__ == "__main__":
    sys.exit(main())
