#!/usr/bin/env bash
# Sets up, builds (release) and runs mmlab's main job: the benchmark report.
set -euo pipefail
cd "$(dirname "$0")/.."
./scripts/setup.sh
cmake --preset release >/dev/null
# Only the tool the report runs: the unit tests are test.sh's.
cmake --build --preset release --target mmlab
exec ./build/release/mmlab bench "$@"
