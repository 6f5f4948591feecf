#!/usr/bin/env bash
# Sets up, builds and runs every test: the unit tests and the scenario
# replays (cow.c, gup_longterm.c, ...) in the g++ release build; the unit
# tests again with DEBUG_VM checks and the lock-order checker, built by
# clang with -Wthread-safety under ThreadSanitizer, and under
# AddressSanitizer + UBSan (with a fixed number of runs of each libFuzzer
# target, tests/fuzz/, and short stress runs under every CoW policy,
# ctest stress.cow_policies and stress.cow_policy_rfc_ends_sound). The debug preset (g++ -O0, DEBUG_VM) is for gdb: what its
# ctest runs, the two sanitizer runs run too. Ends with the time of each
# step, the name and last output lines of every failed test, and one line
# "N passed, N failed".
set -euo pipefail
cd "$(dirname "$0")/.."
timings=()
step() {  # step NAME COMMAND...: run it, remember how long it took
  local name=$1 t0=$SECONDS
  shift
  "$@"
  timings+=("$(printf '%-22s %5d s' "$name" $((SECONDS - t0)))")
}
step setup ./scripts/setup.sh
status=0
for preset in release clang-tsan asan; do
  cmake --preset "$preset" >/dev/null
  step "build $preset" cmake --build --preset "$preset"
done
export TSAN_OPTIONS="halt_on_error=1 second_deadlock_stack=1"
log=$(mktemp)
run_ctest() {
  rm -f "build/$1/Testing/Temporary/LastTestsFailed.log"
  ctest --preset "$1" 2>&1 | tee -a "$log" || status=1
}
for preset in release clang-tsan asan; do
  step "ctest $preset" run_ctest "$preset"
done
# The summary comes last, where a truncated CI log still shows it.
echo
echo "== time per step"
printf '%s\n' "${timings[@]}"
for preset in release clang-tsan asan; do
  failed_log=build/$preset/Testing/Temporary/LastTestsFailed.log
  [ -s "$failed_log" ] || continue
  echo "== failed in $preset:"
  while IFS=: read -r _ name; do
    echo "-- $name (last lines of its output)"
    ./scripts/test_output.py "build/$preset/Testing/Temporary/LastTest.log" "$name" | tail -n 15
  done < "$failed_log"
done
total=$(grep -Eo 'tests failed out of [0-9]+' "$log" | awk '{s += $NF} END {print s + 0}')
failed=$(grep -Eo '[0-9]+ tests failed out of' "$log" | awk '{s += $1} END {print s + 0}')
rm -f "$log"
[ "$failed" -eq 0 ] || status=1
echo "$((total - failed)) passed, $failed failed"
exit $status
