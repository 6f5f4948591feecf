#!/usr/bin/env python3
"""No two source files share a base name unless docs/ARCHITECTURE.md says why.

The list is the doc's section "Files that share a name": each item names the
files of one group in backquotes, then the reason. A base name that occurs
twice or more under src/, tools/, tests/ and include/ must occur in exactly
the files of one item; an item whose files no longer exist, or no longer
share a name, fails too, so that the list cannot outlive what it explains.
The ctest `basenames` runs this.
"""
import argparse
import os
import re
import sys
from collections import defaultdict

ROOTS = ("src", "tools", "tests", "include")
SUFFIXES = (".cpp", ".cc", ".c", ".h", ".hpp")
SECTION = "## Files that share a name"


def source_files(root):
    for top in ROOTS:
        for folder, dirs, files in os.walk(os.path.join(root, top)):
            dirs.sort()
            for name in sorted(files):
                if name.endswith(SUFFIXES):
                    yield os.path.relpath(os.path.join(folder, name), root)


def listed_groups(doc_path):
    """The groups of the doc's section, each a frozenset of paths."""
    with open(doc_path, encoding="utf-8") as f:
        text = f.read()
    start = text.find("\n" + SECTION + "\n")
    if start < 0:
        raise SystemExit(f"{doc_path}: no section '{SECTION}'")
    body = text[start + len(SECTION) + 2:]
    end = re.search(r"^#{1,2} ", body, re.M)
    if end:
        body = body[:end.start()]
    groups = []
    for line in body.splitlines():
        if not line.startswith("- "):
            continue
        paths = [p for p in re.findall(r"`([^`]+)`", line.split(":")[0]) if "/" in p]
        if len(paths) < 2:
            raise SystemExit(f"{doc_path}: '{line[:60]}...' names fewer than two files before its colon")
        groups.append(frozenset(paths))
    return groups


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--root", default=os.path.join(os.path.dirname(__file__), ".."))
    args = ap.parse_args()
    root = os.path.abspath(args.root)

    by_name = defaultdict(list)
    for path in source_files(root):
        by_name[os.path.basename(path)].append(path)
    shared = {name: frozenset(paths) for name, paths in by_name.items() if len(paths) > 1}

    groups = listed_groups(os.path.join(root, "docs", "ARCHITECTURE.md"))
    errors = []
    for name, paths in sorted(shared.items()):
        if paths not in groups:
            errors.append(f"{name}: {', '.join(sorted(paths))} share a base name; rename one, or list them "
                          f"with the reason in docs/ARCHITECTURE.md, \"{SECTION[3:]}\"")
    for group in groups:
        names = {os.path.basename(p) for p in group}
        missing = sorted(p for p in group if not os.path.isfile(os.path.join(root, p)))
        if missing:
            errors.append(f"docs/ARCHITECTURE.md lists {', '.join(missing)}, which does not exist")
        elif len(names) != 1:
            errors.append(f"docs/ARCHITECTURE.md lists {', '.join(sorted(group))} together, which do not share a name")
        elif shared.get(next(iter(names))) != group:
            errors.append(f"docs/ARCHITECTURE.md lists {', '.join(sorted(group))}, but the files named "
                          f"{next(iter(names))} are {', '.join(sorted(by_name[next(iter(names))]))}")
    for e in errors:
        print(e, file=sys.stderr)
    print(f"{len(shared)} base names shared, {len(groups)} listed, {len(errors)} problems")
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main())
