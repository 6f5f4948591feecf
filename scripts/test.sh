#!/usr/bin/env bash
# Sets up, builds and runs every test: the unit tests in a g++ debug build
# (DEBUG_VM checks, lock-order checker) and with clang -Wthread-safety under
# ThreadSanitizer; the scenario replays (cow.c, gup_longterm.c, ...) in the
# release build. Ends with ctest's summary.
set -euo pipefail
cd "$(dirname "$0")/.."
./scripts/setup.sh
status=0
for preset in release debug clang-tsan; do
  cmake --preset "$preset" >/dev/null
  cmake --build --preset "$preset"
done
export TSAN_OPTIONS="halt_on_error=1 second_deadlock_stack=1"
ctest --preset release || status=1
ctest --preset clang-tsan || status=1
ctest --preset debug || status=1
exit $status
