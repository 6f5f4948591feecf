#!/usr/bin/env python3
"""Every example test in a document must appear, line for line, in the
scenario file that ctest runs, so that the document shows only what runs.

usage: check_doc_examples.py DOC.md FILE.mms
An example is a fenced code block whose first line is `test NAME`.
"""
import re
import sys


def main():
    doc, mms = sys.argv[1], sys.argv[2]
    text = open(doc, encoding="utf-8").read()
    corpus = open(mms, encoding="utf-8").read()
    blocks = re.findall(r"^```\n(test [A-Za-z][A-Za-z0-9_-]*\n.*?)^```$", text, flags=re.M | re.S)
    if not blocks:
        print(f"{doc}: no example tests found")
        return 1
    bad = [b.splitlines()[0] for b in blocks if b not in corpus]
    for name in bad:
        print(f"{doc}: example '{name}' is not in {mms} as written")
    print(f"{len(blocks) - len(bad)} of {len(blocks)} examples found in {mms}")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
