#!/usr/bin/env bash
# The whole test suite on a fresh machine: installs what is missing, builds, and runs every test through CTest:
# the engine-only build (no Qt, as GPU machines build it) and the GPU bundle (where nvcc is found), the sanitizer
# builds and the fuzzers, then the full build with the desktop workbench and the tests only it has. Tests run one at a
# time: each uses both cores through OpenMP.
set -euo pipefail
cd "$(dirname "$0")/.."
# Where the run's time goes (a clean machine spends most of it building): each stage's start, in minutes.
stage() { echo "== $1: starts at $((SECONDS / 60))m$((SECONDS % 60))s"; }
stage "installing what is missing"
scripts/install-deps.sh
export QT_QPA_PLATFORM=offscreen XDG_RUNTIME_DIR=${XDG_RUNTIME_DIR:-/tmp/ampwb-runtime-$UID}
mkdir -p "$XDG_RUNTIME_DIR" && chmod 700 "$XDG_RUNTIME_DIR"

stage "engine-only build and its tests"
AMPWB_BUILD_DIR=build-engine scripts/build.sh -DAMPWB_BUILD_GUI=OFF
ctest --test-dir build-engine --output-on-failure --timeout 900
if command -v nvcc >/dev/null || [ -x /usr/local/cuda/bin/nvcc ]; then
  stage "the GPU bundle"
  # The GPU bundle must build, run here through its own loader, and stay under its size limit.
  bundle=$(mktemp -d)
  scripts/gpu-bundle.sh "$bundle/gpu-bundle" | tail -n 1
  "$bundle/gpu-bundle/run" test_ops --gtest_brief=1 | tail -n 1
  rm -rf "$bundle"
fi

# Memory errors, undefined behaviour and races (scripts/sanitize.sh); the file readers fuzzed for a short budget
# (scripts/fuzz.sh runs them longer).
stage "sanitizers"
scripts/sanitize.sh
stage "fuzzers"
scripts/fuzz.sh 10

stage "the full build with the desktop workbench, and its own tests"
scripts/build.sh
# The engine and its tests compile the same in both builds and passed above; the full build adds the desktop
# workbench, so only the tests the engine-only build lacks run again (AMPWB_ALL_TESTS=1 runs every one).
full_dir=${AMPWB_BUILD_DIR:-build}
if [ "${AMPWB_ALL_TESTS:-0}" = 1 ]; then
  ctest --test-dir "$full_dir" --output-on-failure --timeout 900
else
  test_names() { ctest --test-dir "$1" -N | sed -n 's/^ *Test *#[0-9]*: \([^ ]*\).*/\1/p' | sort; }
  only_full=$(comm -13 <(test_names build-engine) <(test_names "$full_dir") | sed 's/[].*+?^$(){}|[]/\\&/g' |
    paste -sd '|')
  [ -n "$only_full" ] || { echo "the full build has no tests of its own: the GUI's tests are missing" >&2; exit 1; }
  ctest --test-dir "$full_dir" --output-on-failure --timeout 900 -R "^($only_full)( |\$)"
fi
stage "done"
