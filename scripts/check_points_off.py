#!/usr/bin/env python3
"""Compiles the files that depend on whether the build has schedule points
with MMLAB_SCHED_POINTS=0, syntax only, with the flags of BUILD_DIR's
compile_commands.json: the bench preset's configuration stays buildable
though no test job builds that preset (ctest build.sched_points_off).

Usage: check_points_off.py BUILD_DIR SOURCE_DIR
"""
import json
import shlex
import subprocess
import sys

# The sources that read sched::kPoints or explore::available(), and one
# model file whose points fold away.
FILES = [
    "src/sync/sched.cpp",
    "src/process/explore.cpp",
    "src/gup/gup.cpp",
    "src/scenario/model_run.cpp",
    "tools/mmlab/bench/bench.cpp",
    "tools/mmlab/cli/cmd_explore.cpp",
    "tools/mmlab/cli/cmd_stress.cpp",
]


def flags_of(commands, path):
    """The include and warning flags the build compiles `path` (or, for a
    file batched into a unity unit, a file of its folder) with."""
    folder = path.rsplit("/", 1)[0]
    for want in (path, folder + "/"):
        for e in commands:
            if want in e["file"]:
                args = shlex.split(e["command"])
                keep = []
                skip = False
                for a in args[1:]:
                    if skip:
                        skip = False
                        continue
                    if a in ("-o", "-c", "-include"):
                        skip = True
                        continue
                    if a == "-Winvalid-pch":
                        continue
                    keep.append(a)
                return args[0], keep
    return None, None


def main():
    if len(sys.argv) != 3:
        print(__doc__, file=sys.stderr)
        return 2
    build, src = sys.argv[1], sys.argv[2]
    with open(build + "/compile_commands.json") as f:
        commands = json.load(f)
    failed = 0
    for rel in FILES:
        cc, flags = flags_of(commands, rel)
        if cc is None:
            print(f"{rel}: not in {build}/compile_commands.json", file=sys.stderr)
            failed += 1
            continue
        cmd = [cc, *flags, "-DMMLAB_SCHED_POINTS=0", "-fsyntax-only", f"{src}/{rel}"]
        r = subprocess.run(cmd, capture_output=True, text=True)
        print(f"{rel}: {'ok' if r.returncode == 0 else 'FAILED'}")
        if r.returncode != 0:
            print(r.stderr[-4000:], file=sys.stderr)
            failed += 1
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
