#!/usr/bin/env bash
# Sets up, builds and runs every test: g++ debug build (DEBUG_VM checks) and
# clang with -Wthread-safety under ThreadSanitizer. Ends with ctest's summary.
set -euo pipefail
cd "$(dirname "$0")/.."
./scripts/setup.sh
status=0
for preset in debug clang-tsan; do
  cmake --preset "$preset" >/dev/null
  cmake --build --preset "$preset"
done
export TSAN_OPTIONS="halt_on_error=1 second_deadlock_stack=1"
ctest --preset clang-tsan || status=1
ctest --preset debug || status=1
exit $status
