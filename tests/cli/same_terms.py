#!/usr/bin/env python3
"""same_terms.py A B: the cost profiles A and B have the same terms (ns, lo,
hi, how) and per-case fit, to 1e-9 relative (the fit is deterministic; the
tolerance covers another compiler's rounding). Prints the first difference."""
import json
import sys


def close(x, y):
    return abs(x - y) <= 1e-9 * max(abs(x), abs(y), 1e-12)


def main():
    a, b = (json.load(open(f)) for f in sys.argv[1:3])
    ta = {t["id"]: t for t in a["terms"]}
    tb = {t["id"]: t for t in b["terms"]}
    if ta.keys() != tb.keys():
        print(f"terms differ: {sorted(ta.keys() ^ tb.keys())}")
        return 1
    for k, t in ta.items():
        u = tb[k]
        if t["how"] != u["how"] or not all(close(t[f], u[f]) for f in ("ns", "lo", "hi")):
            print(f"term {k}: {t} in {sys.argv[1]}, {u} refitted (refit the profile and commit it)")
            return 1
    ca = {c["name"]: c["fitted_ns"] for c in a["fit"]["per_case"]}
    cb = {c["name"]: c["fitted_ns"] for c in b["fit"]["per_case"]}
    if ca.keys() != cb.keys() or not all(close(ca[k], cb[k]) for k in ca):
        print("the per-case fit differs (refit the profile and commit it)")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
