#!/usr/bin/env bash
# Rewrites tests/golden/resnet20_trajectories.json: a tiny ResNet's loss trajectory in every CPU precision mode,
# which test_golden compares against (bit for bit where the CPU and oneDNN match the recording's). Run it only for a
# change that is meant to alter the curves, and say so in the commit; the file records the machine it was made on.
set -euo pipefail
cd "$(dirname "$0")/.."
build_dir=${AMPWB_BUILD_DIR:-build}
[ -f "$build_dir/build.ninja" ] || scripts/build.sh
cmake --build "$build_dir" --target golden_regenerate
OMP_NUM_THREADS=2 "$build_dir/tests/golden_regenerate" tests/golden/resnet20_trajectories.json
git --no-pager diff --stat -- tests/golden/ || true
