#!/usr/bin/env python3
"""A sweep through GNU parallel, merged, then the same jobs as shards and as
records on stdout: run as check_sweep.py MMLAB GRID OUTDIR. The grid has 20
jobs that succeed and one that fails; merge must merge the 20, name the
failed one with its command and exit 1, whichever way the jobs ran."""
import json
import shutil
import subprocess
import sys


def run(cmd, **kw):
    return subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, **kw)


def check_merge(mmlab, source, out, what):
    r = run([mmlab, "merge", source, "--out", out])
    print(r.stdout)
    if r.returncode != 1:
        sys.exit(f"FAIL ({what}): merge exited {r.returncode}, expected 1 for the failed job")
    if "merged 20 of 21 jobs" not in r.stdout:
        sys.exit(f"FAIL ({what}): not 20 of 21 jobs merged")
    want = "job 20 (size-mb=5) failed: exit 2: mmlab bench --quick --suite fault --size-mb 5"
    if want not in r.stdout:
        sys.exit(f"FAIL ({what}): the failed job is not named: expected '{want}'")
    merged = json.load(open(out))
    if len(merged) != 20 or any("fault" not in v for v in merged.values()):
        sys.exit(f"FAIL ({what}): expected 20 configurations each with the fault suite, got {sorted(merged)}")
    if "size-mb=12 repeats=5" not in merged:
        sys.exit(f"FAIL ({what}): the last product job is missing")
    return merged


def main():
    mmlab, grid, out = sys.argv[1:4]
    if shutil.which("parallel") is None:
        sys.exit("FAIL: GNU parallel is not installed (scripts/setup.sh installs it)")
    shutil.rmtree(out, ignore_errors=True)
    listing = run([mmlab, "sweep", grid, "--list", "--results", f"{out}/par"])
    if listing.returncode != 0 or len(listing.stdout.splitlines()) != 21:
        sys.exit(f"FAIL: --list printed {listing.stdout!r} (exit {listing.returncode})")
    par = run(["parallel", "-j2"], input=listing.stdout)
    if par.returncode != 1:  # parallel's exit status: how many jobs failed
        sys.exit(f"FAIL: parallel exited {par.returncode}, expected 1 failed job")
    a = check_merge(mmlab, f"{out}/par", f"{out}/par.json", "parallel")

    shards = [subprocess.Popen([mmlab, "sweep", grid, "--shard", s, "--results", f"{out}/shards"],
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL) for s in ("1/2", "2/2")]
    if [p.wait() for p in shards] != [1, 0]:  # job 20 is in shard 1 (20 mod 2 = 0)
        sys.exit("FAIL: shard 1/2 should fail (it has job 20) and 2/2 succeed")
    # The shards left no sweep.json: merge learns the job count from the records.
    check_merge(mmlab, f"{out}/shards", f"{out}/shards.json", "shards")

    # Without --results each job prints its record: what comes back from
    # the hosts of parallel's --sshloginfile with no shared folder.
    plain = run([mmlab, "sweep", grid, "--list"]).stdout
    with open(f"{out}/lines.jsonl", "w") as f:
        subprocess.run(["parallel", "-j2"], input=plain, stdout=f, stderr=subprocess.DEVNULL, text=True)
    b = check_merge(mmlab, f"{out}/lines.jsonl", f"{out}/lines.json", "stdout records")
    if sorted(a) != sorted(b):
        sys.exit("FAIL: the folder and the stdout records merged into different configurations")

    slurm = run([mmlab, "sweep", grid, "--slurm", "--results", f"{out}/slurm"])
    if "#SBATCH --array=0-20" not in slurm.stdout or "SLURM_ARRAY_TASK_ID" not in slurm.stdout:
        sys.exit(f"FAIL: the sbatch script: {slurm.stdout}")

    cmp = run([mmlab, "compare", f"par={out}/par.json", f"lines={out}/lines.json"])
    if cmp.returncode != 0 or "size-mb=4 repeats=2.fault" not in cmp.stdout:
        sys.exit(f"FAIL: compare of the merged reports: {cmp.stdout}")
    print("sweep: 21 jobs through parallel, shards and stdout records; 20 merged, job 20 named; compare reads the merge")


main()
