#!/usr/bin/env bash
# The tests under the sanitizers (CI runs this; docs/reliability.md says what each covers):
#   AddressSanitizer + UndefinedBehaviorSanitizer: the engine-only suite (no GUI; no CUDA), leaks included, but the
#   tests labelled exhaustive or plain (tests/CMakeLists.txt says why each is), which the full build runs;
#   ThreadSanitizer: the run store (its threads and processes) and the trainer (loader threads, stop, checkpoints,
#   the CLI's runs), with one OpenMP thread because libgomp is not instrumented (see cpu_backend.cpp).
set -euo pipefail
cd "$(dirname "$0")/.."
export CCACHE_BASEDIR=$PWD
common=(-DCMAKE_BUILD_TYPE=RelWithDebInfo -DAMPWB_ENABLE_CUDA=OFF -DAMPWB_BUILD_GUI=OFF)

AMPWB_BUILD_DIR=build-asan scripts/build.sh "${common[@]}" -DAMPWB_SANITIZE=address,undefined
# Each GoogleTest program runs as one test here, writing a report of its cases (tests/CMakeLists.txt):
# scripts/test.sh runs those it skipped in the full build, so reports of an earlier run must not stay.
rm -rf build-asan/gtest-reports
ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
  ctest --test-dir build-asan --output-on-failure --timeout 900 -LE 'exhaustive|plain'

cmake -S . -B build-tsan -G Ninja "${common[@]}" -DAMPWB_SANITIZE=thread >/dev/null
cmake --build build-tsan -j "$(nproc)" --target ampwb test_store test_training
export TSAN_OPTIONS="halt_on_error=1 suppressions=$PWD/tests/tsan.supp"
build-tsan/tests/test_store --gtest_brief=1
# The trainer's threads: loader threads, stop and resume, checkpoints, progress and event lines, the CLI's runs.
build-tsan/tests/test_training --gtest_brief=1 \
  --gtest_filter='Training.*:Checkpoints.*:Cli.Train*:EventLines.*:ValidationProgress.*:EpochTimes.*'
