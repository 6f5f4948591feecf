#!/usr/bin/env python3
"""Size limits of the tree (docs/ARCHITECTURE.md, "Checked claims"):

  - no source file under src/ or tools/ longer than --max-file lines;
  - no function under the --functions folders longer than --max-function
    lines (from the line of its opening brace to its closing one).

  structure.py [--root DIR] [--max-file 1000] [--functions tools]
               [--max-function 100] [--longest N]

Functions are found by reading braces, with strings, characters and
comments skipped: a brace opens a function body when the text before it
(since the last ';', '{' or '}') has a parameter list and is not a
control statement, a class, a namespace or an initializer. Lambdas count
as part of the function around them."""

import argparse
import os
import re
import sys

NOT_FUNCTIONS = re.compile(r"^\s*(?:namespace|class|struct|union|enum|extern\s+\"C\")\b"
                           r"|^\s*(?:if|for|while|switch|catch|do|else)\b|\bfor\s*\(|\bwhile\s*\(")


def code_of(text):
    """The text with comments, strings and characters blanked (newlines kept)."""
    out, i, n = [], 0, len(text)
    while i < n:
        c = text[i]
        if text.startswith("//", i):
            j = text.find("\n", i)
            j = n if j < 0 else j
            out.append(" " * (j - i))
            i = j
        elif text.startswith("/*", i):
            j = text.find("*/", i + 2)
            j = n if j < 0 else j + 2
            out.append(re.sub(r"[^\n]", " ", text[i:j]))
            i = j
        elif text.startswith('R"', i):
            m = re.match(r'R"([^(]*)\(', text[i:])
            end = text.find(")" + (m.group(1) if m else "") + '"', i)
            j = n if end < 0 else end + len(m.group(1) if m else "") + 2
            out.append(re.sub(r"[^\n]", " ", text[i:j]))
            i = j
        elif c in "\"'":
            j = i + 1
            while j < n and text[j] != c:
                j += 2 if text[j] == "\\" else 1
            out.append(c + re.sub(r"[^\n]", " ", text[i + 1:j]) + c)
            i = j + 1
        else:
            out.append(c)
            i += 1
    return "".join(out)


def is_function_head(head):
    head = head.strip()
    if "(" not in head or NOT_FUNCTIONS.search(head):
        return False
    depth, outside = 0, []
    for ch in head:
        depth += ch == "("
        depth -= ch == ")"
        if depth == 0:
            outside.append(ch)
    bare = "".join(outside)
    # An initializer ("x = {", "= [](...) {") or a call's braced argument is not a body.
    if re.search(r"(?<![=!<>])=(?!=)", bare) or bare.rstrip().endswith(","):
        return False
    return bool(re.search(r"\)\s*(?:const|noexcept|override|final|->\s*[\w:<>*& ]+|REQUIRES\(.*\)|\w+\(.*\)|\s)*$",
                          head)) or head.endswith(")")


def functions(path):
    """(name line, first line, last line, head) of each function body."""
    text = code_of(open(path, errors="replace").read())
    stack, out, head_start = [], [], 0
    line = 1
    for i, ch in enumerate(text):
        if ch == "\n":
            line += 1
        elif ch in ";":
            head_start = i + 1
        elif ch == "{":
            head = text[head_start:i]
            inside = any(kind == "fn" for kind, _, _ in stack)
            kind = "fn" if not inside and is_function_head(head) else "block"
            paren = head.find("(")
            name = head[head.rfind("\n", 0, paren) + 1:] if paren >= 0 else head
            stack.append((kind, line, " ".join(name.split())[:100]))
            head_start = i + 1
        elif ch == "}":
            if stack:
                kind, first, head = stack.pop()
                if kind == "fn":
                    out.append((first, line, head))
            head_start = i + 1
    return out


def sources(root, tops):
    for top in tops:
        for dirpath, _, names in os.walk(os.path.join(root, top)):
            for n in sorted(names):
                if n.endswith((".cpp", ".h")):
                    yield os.path.join(dirpath, n)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--root", default=os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    ap.add_argument("--max-file", type=int, default=1000)
    ap.add_argument("--functions", action="append", default=None, help="folders whose functions are measured (default tools)")
    ap.add_argument("--max-function", type=int, default=100)
    ap.add_argument("--longest", type=int, default=5, help="print the N longest functions")
    args = ap.parse_args()
    status = 0
    for path in sources(args.root, ["src", "tools"]):
        n = sum(1 for _ in open(path, errors="replace"))
        if n > args.max_file:
            print(f"error: {os.path.relpath(path, args.root)}: {n} lines (at most {args.max_file}: split it by concern)")
            status = 1
    found = []
    for path in sources(args.root, args.functions or ["tools"]):
        for first, last, head in functions(path):
            found.append((last - first + 1, os.path.relpath(path, args.root), first, head))
    found.sort(reverse=True)
    for length, rel, first, head in found:
        if length > args.max_function:
            print(f"error: {rel}:{first}: a function of {length} lines (at most {args.max_function}: cut it at its steps): {head}")
            status = 1
    print(f"the {args.longest} longest functions in {', '.join(args.functions or ['tools'])}:")
    for length, rel, first, head in found[:args.longest]:
        print(f"  {length:4d}  {rel}:{first}  {head}")
    return status


if __name__ == "__main__":
    sys.exit(main())
