#!/usr/bin/env bash
# Sets up, builds (release) and runs mmlab's main job: the benchmark report.
set -euo pipefail
cd "$(dirname "$0")/.."
./scripts/setup.sh
cmake --preset release >/dev/null
cmake --build --preset release
exec ./build/release/mmlab bench "$@"
