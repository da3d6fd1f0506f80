#!/usr/bin/env bash
# The whole test suite on a fresh machine: installs what is missing, builds, and runs every test through CTest once:
# the engine's under AddressSanitizer and UndefinedBehaviorSanitizer (scripts/sanitize.sh, which also runs the
# threaded ones under ThreadSanitizer), the fuzzers, then the full build with the desktop workbench and the tests the
# sanitizer build leaves to it (the GUI's, the CUDA ones, the exhaustive sweeps and the slow end-to-end runs, label
# `plain`, and those it skipped). Before that, the engine-only build as GPU machines build it (no Qt): the GPU bundle
# where nvcc is found.
# Tests run one at a time: each uses both cores through OpenMP.
set -euo pipefail
cd "$(dirname "$0")/.."
# Where the run's time goes (a clean machine spends most of it building): each stage's start, in minutes.
stage() { echo "== $1: starts at $((SECONDS / 60))m$((SECONDS % 60))s"; }
stage "installing what is missing"
scripts/install-deps.sh
export QT_QPA_PLATFORM=offscreen XDG_RUNTIME_DIR=${XDG_RUNTIME_DIR:-/tmp/ampwb-runtime-$UID}
mkdir -p "$XDG_RUNTIME_DIR" && chmod 700 "$XDG_RUNTIME_DIR"

if command -v nvcc >/dev/null || [ -x /usr/local/cuda/bin/nvcc ]; then
  stage "the GPU bundle: the engine-only build"
  # The GPU bundle must build, run here through its own loader, and stay under its size limit; and where no GPU
  # is, its verification must fail rather than pass by skipping (tests/gpu_required.h).
  bundle=$(mktemp -d)
  scripts/gpu-bundle.sh "$bundle/gpu-bundle" | tail -n 1
  AMPWB_GPU_REQUIRED=0 "$bundle/gpu-bundle/run" test_ops --gtest_brief=1 | tail -n 1
  if ! nvidia-smi -L >/dev/null 2>&1; then
    for check in "run test_cuda_ops --gtest_brief=1" "verify.sh all cuda_ops"; do
      if OUT=$bundle/logs bash -c "\"$bundle/gpu-bundle/\"$check" >"$bundle/check.log" 2>&1; then
        echo "the GPU bundle's $check passed without a GPU:" >&2 && cat "$bundle/check.log" >&2 && exit 1
      fi
      said=$(grep -m 1 -E '^(GPU required|verify.sh:)' "$bundle/check.log" || true)
      echo "without a GPU, the GPU bundle's $check fails: $said"
    done
  fi
  rm -rf "$bundle"
else
  stage "the engine-only build"
  AMPWB_BUILD_DIR=build-engine scripts/build.sh -DAMPWB_BUILD_GUI=OFF
fi

# Memory errors, undefined behaviour and races (scripts/sanitize.sh); the file readers fuzzed for a short budget
# (scripts/fuzz.sh runs them longer).
stage "sanitizers: the engine's tests"
scripts/sanitize.sh
stage "fuzzers"
scripts/fuzz.sh 10

stage "the full build with the desktop workbench, and the tests left to it"
scripts/build.sh
full_dir=${AMPWB_BUILD_DIR:-build}
if [ "${AMPWB_ALL_TESTS:-0}" = 1 ]; then
  ctest --test-dir "$full_dir" --output-on-failure --timeout 900
else
  # Every test the sanitizer build ran passed there; the rest run here: those it lacks (the GUI's, the CUDA ones),
  # those it leaves out (labels exhaustive and plain: see tests/CMakeLists.txt) and those it skipped (they measure
  # memory or time, which its instrumentation distorts). It runs each GoogleTest program as one test, whose report,
  # gtest-reports/<prefix><program>.xml, lists the cases it ran to the end.
  listed() { ctest --test-dir "$@" -N | sed -n 's/^ *Test *#\([0-9]*\): \([^ ]*\).*/\1 \2/p'; }
  ran_in_asan() {
    listed build-asan -LE 'exhaustive|plain' | cut -d ' ' -f 2
    for report in build-asan/gtest-reports/*.xml; do
      prefix=$(basename "$report" .xml) && prefix=${prefix%%test_*}
      # A case's CTest name as gtest_discover_tests writes it: Suite.Name, or Suite.Name<Type> for a typed test.
      case='.*<testcase name="\([^"]*\)"' passed='.* result="completed".* classname="'
      sed -n -e "s|$case type_param=\"\([^\"]*\)\"$passed\([^\"/]*\)/[0-9]*\".*|$prefix\3.\1<\2>|p;t" \
             -e "s|$case$passed\([^\"]*\)\".*|$prefix\2.\1|p" "$report"
    done
  }
  left=$(awk 'FILENAME == ARGV[1] { ran[$1] = 1; next } !($2 in ran) { printf "%s,", $1 }' \
    <(ran_in_asan) <(listed "$full_dir"))
  [ -n "$left" ] || { echo "the full build has no tests of its own: the GUI's tests are missing" >&2; exit 1; }
  ctest --test-dir "$full_dir" --output-on-failure --timeout 900 -I "0,0,0,${left%,}"
fi
stage "done"
