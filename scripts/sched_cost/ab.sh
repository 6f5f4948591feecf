#!/bin/sh
# Usage: scripts/sched_cost/ab.sh BUILD_A BUILD_B [PAIRS]
# BUILD_*: release build directories (cmake --preset release; the target
# mmlab_core built). Builds probe.cpp against each one's libmmlab_core.a
# and runs scripts/sched_cost/ab.py over them (B/A ratios).
set -e
here=$(cd "$(dirname "$0")" && pwd)
src=$(cd "$here/../.." && pwd)
out=${TMPDIR:-/tmp}/sched_cost.$$
mkdir -p "$out"
for side in A B; do
  if [ $side = A ]; then dir=$1; else dir=$2; fi
  # The probe sees the headers as its library was built: with or without
  # schedule points (the bench preset's MMLAB_SCHED_POINTS=OFF).
  points=1
  grep -q '^MMLAB_SCHED_POINTS:BOOL=OFF' "$dir/CMakeCache.txt" && points=0
  g++ -O2 -std=c++20 -DMMLAB_SCHED_POINTS=$points -I"$src/include" -I"$dir/generated" "$here/probe.cpp" "$dir/libmmlab_core.a" \
    -lfmt -lpthread -o "$out/probe_$side"
done
python3 "$here/ab.py" "${3:-101}" "$out/probe_A" "$out/probe_B" 15
rm -rf "$out"
