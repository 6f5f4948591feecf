#!/usr/bin/env python3
"""Checks a trace file mmlab wrote with --trace.

usage: check_trace.py json FILE [EVENT...]   valid Chrome/Perfetto JSON trace format
       check_trace.py ftrace FILE [EVENT...] every event line in ftrace's text format
Every EVENT named must occur at least once.
"""
import json
import re
import sys

# TASK-PID [CPU] FLAGS TIMESTAMP: EVENT: FIELDS, as /sys/kernel/tracing/trace prints it.
FTRACE_LINE = re.compile(r"^\s*(\S+)-(\d+)\s+\[(\d{3})\]\s+(\S{5})\s+(\d+\.\d{6}): ([a-z_][a-z0-9_]*): (.*)$")


def check_json(path):
    with open(path, encoding="utf-8") as f:
        doc = json.load(f)
    events = doc["traceEvents"]
    if not isinstance(events, list) or not events:
        raise ValueError("traceEvents is not a non-empty list")
    names = []
    last_ts = -1
    for i, e in enumerate(events):
        for key, kind in (("name", str), ("ph", str), ("ts", (int, float)), ("pid", int), ("tid", int)):
            if not isinstance(e.get(key), kind):
                raise ValueError(f"event {i}: {key} missing or not {kind}: {e}")
        if e["ph"] not in ("i", "I", "M", "X", "B", "E"):
            raise ValueError(f"event {i}: unknown phase {e['ph']}")
        if e["ph"] == "M":
            continue
        if e["ts"] < last_ts:
            raise ValueError(f"event {i}: ts goes back ({e['ts']} < {last_ts})")
        last_ts = e["ts"]
        if not isinstance(e.get("args", {}), dict):
            raise ValueError(f"event {i}: args is not an object")
        names.append(e["name"])
    return names


def check_ftrace(path):
    names = []
    last = -1.0
    with open(path, encoding="utf-8") as f:
        for n, line in enumerate(f, 1):
            if line.startswith("#"):
                continue
            m = FTRACE_LINE.match(line.rstrip("\n"))
            if not m:
                raise ValueError(f"line {n} is not TASK-PID [CPU] FLAGS TIMESTAMP: EVENT: FIELDS: {line!r}")
            ts = float(m.group(5))
            if ts < last:
                raise ValueError(f"line {n}: timestamp goes back")
            last = ts
            names.append(m.group(6))
    if not names:
        raise ValueError("no event lines")
    return names


def main():
    kind, path, want = sys.argv[1], sys.argv[2], sys.argv[3:]
    try:
        names = check_json(path) if kind == "json" else check_ftrace(path)
    except (ValueError, KeyError, json.JSONDecodeError) as e:
        print(f"{path}: {e}")
        return 1
    missing = [w for w in want if w not in names]
    if missing:
        print(f"{path}: no {', '.join(missing)} event (found {sorted(set(names))})")
        return 1
    print(f"{path}: {len(names)} events, {len(set(names))} kinds")
    return 0


if __name__ == "__main__":
    sys.exit(main())
