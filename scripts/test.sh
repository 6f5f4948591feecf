#!/usr/bin/env bash
# Sets up, builds and runs every test: the unit tests in a g++ debug build
# (DEBUG_VM checks, lock-order checker), with clang -Wthread-safety under
# ThreadSanitizer, and under AddressSanitizer + UBSan (with a bounded run of
# each libFuzzer target, tests/fuzz/); the scenario replays (cow.c,
# gup_longterm.c, ...) in the release build. Ends with ctest's summary.
set -euo pipefail
cd "$(dirname "$0")/.."
./scripts/setup.sh
status=0
for preset in release debug clang-tsan asan; do
  cmake --preset "$preset" >/dev/null
  cmake --build --preset "$preset"
done
export TSAN_OPTIONS="halt_on_error=1 second_deadlock_stack=1"
log=$(mktemp)
for preset in release clang-tsan debug asan; do
  ctest --preset "$preset" 2>&1 | tee -a "$log" || status=1
done
# One closing line for all four runs: "N passed, N failed".
total=$(grep -Eo 'tests failed out of [0-9]+' "$log" | awk '{s += $NF} END {print s + 0}')
failed=$(grep -Eo '[0-9]+ tests failed out of' "$log" | awk '{s += $1} END {print s + 0}')
rm -f "$log"
[ "$failed" -eq 0 ] || status=1
echo "$((total - failed)) passed, $failed failed"
exit $status
