#!/usr/bin/env bash
# Sets up, builds (the bench preset: release without the race explorer's
# schedule points) and runs mmlab's main job: the benchmark report.
set -euo pipefail
cd "$(dirname "$0")/.."
./scripts/setup.sh
cmake --preset bench >/dev/null
# Only the tool the report runs: the unit tests are test.sh's.
cmake --build --preset bench --target mmlab
exec ./build/bench/mmlab bench "$@"
