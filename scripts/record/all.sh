#!/bin/sh
# Records the five workloads (root, tracefs, x86-64; each a minute or
# less), then for each: `mmlab replay --fidelity` and the policy table.
# OUT (default record-out) receives the traces, the logs and the tables.
set -u
here=$(dirname "$0")
MMLAB=${MMLAB:-build/release/mmlab}
OUT=${OUT:-record-out}
export MMLAB OUT
mkdir -p "$OUT"
for w in ${WORKLOADS:-redis postgres pool make sqlite}; do
  echo "== $w"
  if ! sh "$here/$w.sh"; then
    echo "$w: the recording failed" >&2
    continue
  fi
  "$MMLAB" replay --fidelity "$OUT/$w.mmtrace" | tee "$OUT/$w.fidelity.txt"
  "$MMLAB" replay --json "$OUT/$w.policy.json" "$OUT/$w.mmtrace" | tee "$OUT/$w.policy.txt"
done
