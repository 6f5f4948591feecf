#!/usr/bin/env python3
"""Checks --json's host_probes and --fake-probe: run as
check_host_probes_json.py MMLAB SCENARIO OUTDIR. The same test runs once as
the host is and once with zero_page forced missing; the forced run says
"forced" exactly where the host has the zero page, and never "available"."""
import json
import subprocess
import sys


def probes(mmlab, scenario, out, fake):
    cmd = [mmlab, "run", "--backend", "host", "--filter", "anon-read-maps-zero-page", "--json", out, scenario]
    if fake:
        cmd[2:2] = ["--fake-probe", "zero_page"]
    r = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    if r.returncode != 0:
        print(r.stdout)
        sys.exit(f"FAIL: {' '.join(cmd)} exited {r.returncode}")
    if "host backend unavailable" in r.stdout:
        print("host backend unavailable")
        sys.exit(0)
    return {x["name"]: x for x in json.load(open(out))["host_probes"]}


def main():
    mmlab, scenario, outdir = sys.argv[1:4]
    real = probes(mmlab, scenario, f"{outdir}/host-probes-real.json", False)
    forced = probes(mmlab, scenario, f"{outdir}/host-probes-forced.json", True)
    for p in (real, forced):
        if len(p) != 13:
            sys.exit(f"FAIL: expected 13 probes, found {sorted(p)}")
    if any(x["forced"] for x in real.values()):
        sys.exit(f"FAIL: a probe forced without --fake-probe: {real}")
    z, zr = forced["zero_page"], real["zero_page"]
    if z["available"] or z["forced"] != zr["available"]:
        sys.exit(f"FAIL: zero_page forced {z}, as the host is {zr}")
    for name, x in forced.items():
        if name != "zero_page" and (x["available"], x["forced"]) != (real[name]["available"], False):
            sys.exit(f"FAIL: {name} changed by forcing zero_page: {x} against {real[name]}")
    print(f"zero_page: host {'yes' if zr['available'] else 'no'}, forced run {'forced' if z['forced'] else 'as the host'}")


main()
