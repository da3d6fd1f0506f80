#!/usr/bin/env bash
# Fuzzes every reader of users' files (fuzz/: IDX, CIFAR-10, gzip, images, checkpoints, the store's run records)
# with libFuzzer, AddressSanitizer and UBSan, starting from the seed corpus in fuzz/corpus (which stays as it is).
# usage: scripts/fuzz.sh [SECONDS_PER_TARGET=30] [TARGET...]     CI runs a short budget; run it longer by hand.
# A crash stops the run with the input that caused it saved under build-fuzz/crashes/: make it a test.
set -euo pipefail
cd "$(dirname "$0")/.."
seconds=${1:-30}
shift || true
targets=("$@")
[ ${#targets[@]} -gt 0 ] || targets=(idx cifar gzip image checkpoint store_record)
export CCACHE_BASEDIR=$PWD
CC=clang CXX=clang++ cmake -S . -B build-fuzz -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DAMPWB_FUZZ=ON \
  -DAMPWB_ENABLE_CUDA=OFF -DAMPWB_BUILD_GUI=OFF -DAMPWB_BUILD_TESTS=OFF >/dev/null
# The build's output only when it fails (clang builds this; g++ the rest).
build_log=$(mktemp)
cmake --build build-fuzz -j "$(nproc)" --target $(printf 'fuzz_%s ' "${targets[@]}") >"$build_log" 2>&1 || {
  grep -E -A3 "error|FAILED" "$build_log" | head -n 60
  echo "fuzz: the fuzz targets do not build with clang" >&2
  exit 1
}
rm -f "$build_log"
mkdir -p build-fuzz/crashes
export ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1
for t in "${targets[@]}"; do
  work=$(mktemp -d)
  cp -r "fuzz/corpus/$t/." "$work/"
  out=$(build-fuzz/fuzz/fuzz_$t "$work" -max_total_time="$seconds" -max_len=65536 -timeout=10 -rss_limit_mb=2048 \
        -artifact_prefix=build-fuzz/crashes/"$t"- -print_final_stats=1 2>&1) || {
    echo "$out" | tail -n 40
    echo "fuzz: $t crashed; the input is in build-fuzz/crashes/" >&2
    exit 1
  }
  runs=$(echo "$out" | awk '/stat::number_of_executed_units/ {print $2}')
  echo "fuzz: $t: $runs inputs in ${seconds} s, corpus $(ls "$work" | wc -l) files, no crash"
  rm -rf "$work"
done
