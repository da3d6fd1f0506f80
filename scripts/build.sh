#!/usr/bin/env bash
# Configures (Release, Ninja, ccache) and builds into build/. CUDA is built when nvcc is found.
set -euo pipefail
cd "$(dirname "$0")/.."
build_dir=${AMPWB_BUILD_DIR:-build}
export CCACHE_BASEDIR=$PWD  # paths relative to the checkout: fresh clones elsewhere (CI) hit the same cache
cmake -S . -B "$build_dir" -G Ninja -DCMAKE_BUILD_TYPE=Release "$@" >/dev/null
cmake --build "$build_dir" -j "$(nproc)"
