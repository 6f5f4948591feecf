#!/usr/bin/env python3
"""Checks that dependencies point down the layer table (scripts/layers.txt).

Two kinds of up-pointing dependency are found:

  include  a file of layer A includes a header of a higher layer B;
  call     an object file of layer A references a function or object that
           only an object file of a higher layer B defines (needs --objects:
           the build directory, whose *.o files are read with nm).

Both are checked against an allow-list (scripts/layering-allow.txt) of the
violations that existed when the check was introduced. The check fails on
a violation that is not in the list and on a list entry that no longer
occurs, so the list can only shrink.

  layering.py                    check includes (and calls with --objects)
  layering.py --report           print every up-pointing dependency and the
                                 counts per layer pair, exit 0
"""

import argparse
import collections
import os
import re
import subprocess
import sys

INCLUDE_RE = re.compile(r'^\s*#\s*include\s+"([^"]+)"')


def read_layers(path):
    """Returns (ranks: layer -> rank, extra: path prefix -> layer)."""
    ranks, extra = {}, {}
    rank = -1
    with open(path) as f:
        for line in f:
            line = line.split("#", 1)[0].strip()
            if not line:
                continue
            # "= layer ...": the same rank as the line before.
            shared = line.startswith("=")
            words = line.lstrip("=").split()
            if not shared or rank < 0:
                rank += 1
            ranks[words[0]] = rank
            for p in words[1:]:
                extra[p] = words[0]
    return ranks, extra


def layer_of(rel, ranks, extra):
    """The layer a repository-relative path belongs to, or None (tests, bench)."""
    for prefix, layer in extra.items():
        if rel == prefix or (prefix.endswith("/") and rel.startswith(prefix)):
            return layer
    parts = rel.split("/")
    if parts[0] == "src" and len(parts) > 2 and parts[1] in ranks:
        return parts[1]
    return None


def source_files(root):
    for top in ("src", "include", "tools"):
        for dirpath, _, names in os.walk(os.path.join(root, top)):
            for n in sorted(names):
                if n.endswith((".h", ".cpp", ".h.in")):
                    yield os.path.relpath(os.path.join(dirpath, n), root)


def resolve(root, includer, target):
    """Repository-relative path of an #include "target" seen in includer."""
    here = os.path.dirname(includer)
    for cand in (os.path.join(here, target), os.path.join("src", target),
                 os.path.join("include", target), os.path.join("tools", "mmlab", target)):
        if os.path.exists(os.path.join(root, cand)):
            return os.path.normpath(cand)
    if target == "build_info.h":  # generated from src/base/build_info.h.in
        return "build_info.h"
    return None


def up_includes(root, ranks, extra):
    """Yields (file, line, header, from_layer, to_layer) for each up-include."""
    for rel in sorted(source_files(root)):
        src_layer = layer_of(rel, ranks, extra)
        if src_layer is None:
            continue
        with open(os.path.join(root, rel), errors="replace") as f:
            for lineno, line in enumerate(f, 1):
                m = INCLUDE_RE.match(line)
                if not m:
                    continue
                dst = resolve(root, rel, m.group(1))
                if dst is None:
                    continue  # a third-party header (fmt/, nlohmann/)
                dst_layer = layer_of(dst, ranks, extra)
                if dst_layer is None:
                    continue
                if ranks[dst_layer] > ranks[src_layer]:
                    yield rel, lineno, dst, src_layer, dst_layer


def object_layer(path, ranks, extra):
    """The layer of an object file, and its source, from the source path
    CMake mirrors under the target's directory."""
    parts = path.replace(os.sep, "/").split("/")
    for i, p in enumerate(parts[:-1]):
        if p in ("src", "tools"):
            src = "/".join(parts[i:])[:-2]
            layer = layer_of(src, ranks, extra)
            if layer is not None:
                return layer, src
    return None, None


def nm_symbols(obj):
    out = subprocess.run(["nm", "-C", obj], capture_output=True, text=True,
                         check=True).stdout
    defined, undefined = set(), set()
    for line in out.splitlines():
        fields = line.split(None, 2) if line[:1] != " " else [None] + line.split(None, 1)
        if len(fields) < 3:
            continue
        kind, name = fields[1], fields[2]
        if kind == "U":
            undefined.add(name)
        elif kind in "TDBR":  # strong definitions only: inline copies (W/V) are everywhere
            defined.add(name)
    return defined, undefined


UNITY_INCLUDE_RE = re.compile(r'^#include "([^"]+)"', re.M)


def unity_sources(root, obj):
    """The repository-relative sources a unity batch's object was built from
    (CMake writes the batch, unity_N_cxx.cxx, beside its object)."""
    try:
        with open(obj[:-2]) as f:
            text = f.read()
    except OSError:
        return []
    root = os.path.realpath(root)
    out = []
    for path in UNITY_INCLUDE_RE.findall(text):
        path = os.path.realpath(path)
        if path.startswith(root + os.sep):
            out.append(os.path.relpath(path, root))
    return out


def layer_objects(root, objdir, ranks, extra):
    """(layer, source, object) for each object file of a layer's source; a
    unity batch's object once per source it holds, which must all belong
    to one layer."""
    objs = []
    for dirpath, _, names in os.walk(objdir):
        for n in names:
            obj = os.path.join(dirpath, n)
            if re.fullmatch(r"unity_\d+_cxx\.cxx\.o", n):
                srcs = unity_sources(root, obj)
                layers = {layer_of(s, ranks, extra) for s in srcs} - {None}
                if len(layers) > 1:
                    sys.exit(f"error: {obj}: a unity batch holds sources of several layers ({', '.join(sorted(layers))})")
                if layers:
                    layer = layers.pop()
                    objs += [(layer, s, obj) for s in srcs if layer_of(s, ranks, extra)]
            elif n.endswith(".cpp.o"):
                layer, src = object_layer(obj, ranks, extra)
                # Skip objects a build left behind for a source since moved.
                if layer is not None and os.path.exists(os.path.join(root, src)):
                    objs.append((layer, src, obj))
    return objs


def missing_objects(root, objs, ranks, extra):
    """The layer sources (src/, tools/) that no object file was built from: a
    check over a partial (or wrong) build directory must not pass."""
    built = {src for _, src, _ in objs}
    want = []
    for rel in source_files(root):
        if rel.endswith(".cpp") and layer_of(rel, ranks, extra) is not None and rel not in built:
            want.append(rel)
    return want


def up_calls(root, objdir, ranks, extra):
    """Yields (source, symbol, from_layer, to_layer) for each up-call."""
    objs = layer_objects(root, objdir, ranks, extra)
    definer = {}
    refs = []
    for layer, src, obj in sorted(objs):
        defined, undefined = nm_symbols(obj)
        for s in defined:
            definer.setdefault(s, layer)
        refs.append((layer, src, undefined))
    seen = set()
    for layer, src, undefined in refs:
        for s in sorted(undefined):
            to = definer.get(s)
            if to is not None and ranks[to] > ranks[layer] and (src, s) not in seen:
                seen.add((src, s))
                yield src, s, layer, to


def strip_comments(text):
    text = re.sub(r"/\*.*?\*/", " ", text, flags=re.S)
    return re.sub(r"//[^\n]*", " ", text)


def header_declarers(root, ranks, extra):
    """name -> lowest layer whose header declares a function or class of that name."""
    decl = {}
    for rel in source_files(root):
        layer = layer_of(rel, ranks, extra)
        if layer is None or not rel.endswith(".h"):
            continue
        with open(os.path.join(root, rel), errors="replace") as f:
            text = strip_comments(f.read())
        names = set(re.findall(r"[\w>&*]\s+[*&]*(\w+)\s*\(", text))
        names |= set(re.findall(r"\b(?:class|struct)\s+(\w+)\s*(?:final\s*)?[:{]", text))
        for n in names:
            if n not in decl or ranks[layer] < ranks[decl[n][0]]:
                decl[n] = (layer, rel)
    return decl


def up_declared(root, objdir, ranks, extra):
    """Yields (symbol, header, header_layer, defining_layer) for each function
    defined in a layer above the one whose header declares it."""
    decl = header_declarers(root, ranks, extra)
    out = set()
    for dirpath, _, names in os.walk(objdir):
        for n in names:
            if not n.endswith(".cpp.o"):
                continue
            layer, src = object_layer(os.path.join(dirpath, n), ranks, extra)
            if layer is None or not os.path.exists(os.path.join(root, src)):
                continue
            defined, _ = nm_symbols(os.path.join(dirpath, n))
            for s in defined:
                base = s.split("(", 1)[0]
                if not base.startswith("mmlab::") or "<" in base:
                    continue
                parts = base.split("::")[1:]
                # A member is declared where its class is; a free function by name.
                key = parts[0] if len(parts) > 1 else parts[-1]
                d = decl.get(key)
                if d and ranks[d[0]] < ranks[layer]:
                    out.add((base, d[1], d[0], layer))
    return sorted(out)


def read_allow(path):
    allow = set()
    if path and os.path.exists(path):
        with open(path) as f:
            for line in f:
                line = line.split("#", 1)[0].strip()
                if line:
                    allow.add(line)
    return allow


def main():
    here = os.path.dirname(os.path.abspath(__file__))
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--root", default=os.path.dirname(here))
    ap.add_argument("--layers", default=os.path.join(here, "layers.txt"))
    ap.add_argument("--allow", default=os.path.join(here, "layering-allow.txt"))
    ap.add_argument("--objects", help="build directory whose *.o files to read for up-calls")
    ap.add_argument("--report", action="store_true")
    ap.add_argument("--prune", action="store_true",
                    help="remove the allow-list lines that no longer occur (needs --objects)")
    args = ap.parse_args()

    ranks, extra = read_layers(args.layers)
    incs = list(up_includes(args.root, ranks, extra))
    calls = []
    if args.objects:
        missing = missing_objects(args.root, layer_objects(args.root, args.objects, ranks, extra), ranks, extra)
        if missing:
            print(f"error: {args.objects}: no object file for {len(missing)} source(s), "
                  f"e.g. {', '.join(missing[:3])}: the up-call check needs a complete build")
            return 1
        calls = list(up_calls(args.root, args.objects, ranks, extra))

    found = {}
    for rel, lineno, dst, a, b in incs:
        found.setdefault(f"include {rel} -> {dst}", []).append(
            f"{rel}:{lineno}: {a} includes {b} header {dst}")
    for src, sym, a, b in calls:
        found.setdefault(f"call {src} -> {sym}", []).append(
            f"{src}: {a} calls {b}: {sym}")

    if args.report:
        pairs = collections.Counter((a, b) for _, _, _, a, b in incs)
        cpairs = collections.Counter((a, b) for _, _, a, b in calls)
        for msgs in found.values():
            for m in msgs:
                print(m)
        print(f"\nup-includes: {len(incs)}")
        for (a, b), n in sorted(pairs.items()):
            print(f"  {a} -> {b}: {n}")
        if args.objects:
            print(f"up-calls (object references): {len(calls)}")
            for (a, b), n in sorted(cpairs.items()):
                print(f"  {a} -> {b}: {n}")
            decls = up_declared(args.root, args.objects, ranks, extra)
            for sym, hdr, a, b in decls:
                print(f"  declared in {a} ({hdr}), defined in {b}: {sym}")
            dpairs = collections.Counter((a, b) for _, _, a, b in decls)
            print(f"declared below, defined above: {len(decls)}")
            for (a, b), n in sorted(dpairs.items()):
                print(f"  {a} -> {b}: {n}")
        return 0

    if args.prune:
        if not args.objects:
            ap.error("--prune needs --objects")
        with open(args.allow) as f:
            lines = f.readlines()
        with open(args.allow, "w") as f:
            for line in lines:
                key = line.split("#", 1)[0].strip()
                if not key or key in found:
                    f.write(line)
        return 0

    allow = read_allow(args.allow)
    status = 0
    for key, msgs in sorted(found.items()):
        if key not in allow:
            for m in msgs:
                print(f"error: {m} (dependencies point down scripts/layers.txt)")
            status = 1
    for key in sorted(allow):
        kind = key.split(" ", 1)[0]
        if key not in found and (kind == "include" or args.objects):
            print(f"error: {args.allow}: '{key}' no longer occurs: remove the line")
            status = 1
    n_inc = sum(1 for k in found if k.startswith("include "))
    n_call = sum(1 for k in found if k.startswith("call "))
    print(f"layering: {n_inc} up-includes, {n_call} up-calls "
          f"({'checked' if args.objects else 'not checked'}), all in the allow-list"
          if status == 0 else "layering: FAILED")
    return status


if __name__ == "__main__":
    sys.exit(main())
