#!/usr/bin/env python3
"""The claims docs/ARCHITECTURE.md makes about the code that no other ctest
checks, each checked here against the tree (ctest `architecture`). A claim
that fails is either a change to undo or a sentence of the doc to correct;
the doc's section "Checked claims" names this script for each of them."""

import os
import re
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def files(*tops, suffixes=(".cpp", ".h")):
    for top in tops:
        for folder, dirs, names in os.walk(os.path.join(ROOT, top)):
            dirs.sort()
            for n in sorted(names):
                if n.endswith(suffixes):
                    yield os.path.relpath(os.path.join(folder, n), ROOT)


def text(rel):
    with open(os.path.join(ROOT, rel), errors="replace") as f:
        return f.read()


def grep(pattern, *tops):
    """{file: [line numbers]} of the lines matching pattern."""
    out = {}
    for rel in files(*tops):
        for i, line in enumerate(text(rel).splitlines(), 1):
            if re.search(pattern, line):
                out.setdefault(rel, []).append(i)
    return out


def hook_tables_installed_once():
    """The Kernel's operation tables (gup_hooks, khugepaged_hooks) are set in
    one place, when the System is made."""
    where = grep(r"\b(gup_hooks|khugepaged_hooks)\s*=[^=]", "src", "tools", "include")
    where.pop("src/mm/kernel.h", None)  # the members' declarations
    if set(where) != {"src/process/system.cpp"}:
        return f"set in {sorted(where)}, expected src/process/system.cpp alone"
    return None


def std_locks_only_where_listed():
    """std::mutex and std::condition_variable only in the primitives' insides,
    the lock-order checker, the scheduler's registry of frame stores (a
    Mutex there would be a schedule point inside the scheduler), the scenario
    runner's work queue, the System's process list (a public header) and
    khugepaged's thread waits."""
    allowed = {"src/sync/mutex.h", "src/sync/rwsem.h", "src/sync/rwsem.cpp", "src/sync/lockdep.cpp", "src/sync/sched.cpp",
               "src/scenario/parallel.cpp", "include/mmlab/system.h", "src/process/system.cpp",
               "src/khugepaged/khugepaged.h"}
    where = set(grep(r"std::(mutex|condition_variable|lock_guard|unique_lock)\b", "src", "include"))
    extra = sorted(where - allowed)
    return f"std:: locks in {extra}: use the model's Mutex, or list the file and say why" if extra else None


def analysis_opt_outs_say_why():
    """Every NO_THREAD_SAFETY_ANALYSIS in src/ has a comment within the six
    lines before it saying why the lock state is data."""
    missing = []
    for rel, lines in grep(r"NO_THREAD_SAFETY_ANALYSIS", "src").items():
        src = text(rel).splitlines()
        for n in lines:
            if "#define" in src[n - 1]:
                continue
            if not any("//" in src[k] for k in range(max(0, n - 7), n)):
                missing.append(f"{rel}:{n}")
    return f"no comment before {missing}" if missing else None


def facade_defined_in_process():
    """Every System:: and Process:: method is defined in src/process/."""
    where = grep(r"^[\w:<>,*& ]*\b(System|Process)::~?\w+\(", "src", "tools")
    outside = sorted(r for r in where if not r.startswith("src/process/"))
    return f"facade methods defined in {outside}" if outside else None


def no_catch_all_internal_header():
    """No catch-all internal.h: shared helpers live in <file>_internal.h or
    the header named after the kernel file."""
    bad = [r for r in files("src", "tools") if os.path.basename(r) == "internal.h"]
    return f"{bad}" if bad else None


def tools_consume_the_public_api():
    """tools/ includes the model only through include/mmlab/ (never src/)."""
    bad = []
    for rel, lines in grep(r'#include "(sync|base|trace|stats|phys|pgtable|tlb|mm|fault|gup|khugepaged|check|process|host|scenario|cost)/',
                           "tools").items():
        bad += [f"{rel}:{n}" for n in lines]
    return f"includes of src/ headers at {bad}" if bad else None


def one_library_per_tree():
    """The build makes mmlab_core, mmlab_host, mmlab_scenario, mmlab_cost and
    mmlab_tools, and no target lists a source file that another target builds."""
    cm = text("CMakeLists.txt")
    libs = re.findall(r"add_library\((\w+)", cm)
    if libs != ["mmlab_core", "mmlab_host", "mmlab_scenario", "mmlab_cost", "mmlab_tools"]:
        return f"libraries {libs}"
    listed = re.findall(r"add_executable\(\w+[^)]*?\$\{CMAKE_SOURCE_DIR\}/((?:src|tools)/[\w/]+\.cpp)", cm)
    return f"an executable compiles library sources: {listed}" if listed else None


CLAIMS = [hook_tables_installed_once, std_locks_only_where_listed, analysis_opt_outs_say_why,
          facade_defined_in_process, no_catch_all_internal_header, tools_consume_the_public_api,
          one_library_per_tree]


def main():
    status = 0
    for claim in CLAIMS:
        err = claim()
        first = claim.__doc__.strip().splitlines()[0]
        print(f"{'FAIL' if err else 'ok  '} {claim.__name__}: {first}" + (f"\n     {err}" if err else ""))
        status |= bool(err)
    return status


if __name__ == "__main__":
    sys.exit(main())
