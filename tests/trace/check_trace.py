#!/usr/bin/env python3
"""Checks a trace file mmlab wrote with --trace.

usage: check_trace.py json FILE [--only GLOB,...] [--dropped] [EVENT...]
       check_trace.py ftrace FILE [--only GLOB,...] [--dropped] [EVENT...]
json: valid Chrome/Perfetto JSON trace format; slices (B/E) nest on each
track, every one ends, and counters (C) and integer arguments are numbers.
ftrace: every event line in ftrace's text format.
Every EVENT named must occur at least once; with --only, every event's name
(a slice end's without its _end) matches one of the globs; with --dropped,
the trace says the ring dropped events (and holds fewer than were written).
"""
import fnmatch
import json
import re
import sys

# TASK-PID [CPU] FLAGS TIMESTAMP: EVENT: FIELDS, as /sys/kernel/tracing/trace prints it.
FTRACE_LINE = re.compile(r"^\s*(\S+)-(\d+)\s+\[(\d{3})\]\s+(\S{5})\s+(\d+\.\d{6}): ([a-z_][a-z0-9_]*): (.*)$")


def check_json(path):
    with open(path, encoding="utf-8") as f:
        doc = json.load(f)
    events = doc["traceEvents"]
    stacks = {}
    if not isinstance(events, list) or not events:
        raise ValueError("traceEvents is not a non-empty list")
    names = []
    last_ts = -1
    for i, e in enumerate(events):
        for key, kind in (("name", str), ("ph", str), ("ts", (int, float)), ("pid", int), ("tid", int)):
            if not isinstance(e.get(key), kind):
                raise ValueError(f"event {i}: {key} missing or not {kind}: {e}")
        if e["ph"] not in ("i", "I", "M", "X", "B", "E", "C"):
            raise ValueError(f"event {i}: unknown phase {e['ph']}")
        if e["ph"] == "M":
            continue
        if e["ts"] < last_ts:
            raise ValueError(f"event {i}: ts goes back ({e['ts']} < {last_ts})")
        last_ts = e["ts"]
        args = e.get("args", {})
        if not isinstance(args, dict):
            raise ValueError(f"event {i}: args is not an object")
        for k, v in args.items():
            if isinstance(v, str) and re.fullmatch(r"-?(0|[1-9][0-9]*)", v):
                raise ValueError(f"event {i}: integer argument {k} is a string: {e}")
        if e["ph"] == "C" and not all(isinstance(v, (int, float)) for v in args.values()):
            raise ValueError(f"event {i}: a counter's value is not a number: {e}")
        stack = stacks.setdefault((e["pid"], e["tid"]), [])
        if e["ph"] == "B":
            stack.append(e["name"])
        elif e["ph"] == "E":
            if not stack or stack[-1] != e["name"]:
                raise ValueError(f"event {i}: the end of {e['name']} closes {stack[-1] if stack else 'nothing'}")
            stack.pop()
        names.append(e["name"])
    open_slices = [n for st in stacks.values() for n in st]
    if open_slices:
        raise ValueError(f"slices never ended: {open_slices[:5]}")
    dropped = doc.get("otherData", {}).get("events_dropped", 0)
    return names, dropped


def check_ftrace(path):
    names = []
    last = -1.0
    dropped = 0
    with open(path, encoding="utf-8") as f:
        for n, line in enumerate(f, 1):
            m = re.match(r"# entries-in-buffer/entries-written: (\d+)/(\d+)", line)
            if m:
                dropped = int(m.group(2)) - int(m.group(1))
            if line.startswith("#"):
                continue
            m = FTRACE_LINE.match(line.rstrip("\n"))
            if not m:
                raise ValueError(f"line {n} is not TASK-PID [CPU] FLAGS TIMESTAMP: EVENT: FIELDS: {line!r}")
            ts = float(m.group(5))
            if ts < last:
                raise ValueError(f"line {n}: timestamp goes back")
            last = ts
            name = m.group(6)
            names.append(name[: -len("_end")] if name.endswith("_end") and m.group(7).startswith("begin=") else name)
    if not names:
        raise ValueError("no event lines")
    return names, dropped


def main():
    kind, path, rest = sys.argv[1], sys.argv[2], sys.argv[3:]
    only, want_dropped, want = None, False, []
    while rest:
        a = rest.pop(0)
        if a == "--only":
            only = rest.pop(0).split(",")
        elif a == "--dropped":
            want_dropped = True
        else:
            want.append(a)
    try:
        names, dropped = check_json(path) if kind == "json" else check_ftrace(path)
    except (ValueError, KeyError, json.JSONDecodeError) as e:
        print(f"{path}: {e}")
        return 1
    if only:
        stray = sorted({n for n in names if not any(fnmatch.fnmatchcase(n, g) for g in only)})
        if stray:
            print(f"{path}: events outside --only {','.join(only)}: {stray}")
            return 1
    if want_dropped and dropped <= 0:
        print(f"{path}: the trace says no event was dropped")
        return 1
    missing = [w for w in want if w not in names]
    if missing:
        print(f"{path}: no {', '.join(missing)} event (found {sorted(set(names))})")
        return 1
    print(f"{path}: {len(names)} events, {len(set(names))} kinds")
    return 0


if __name__ == "__main__":
    sys.exit(main())
