#!/bin/sh
# A Python multiprocessing Pool (fork) over a large dict (pool.py).
# Writes $OUT/pool.mmtrace.
set -eu
. "$(dirname "$0")/common.sh"
py=$(command -v python3)
"$MMLAB" record --out "$OUT/pool.mmtrace" -- "$py" "$(dirname "$0")/pool.py"
