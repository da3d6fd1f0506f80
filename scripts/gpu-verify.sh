#!/usr/bin/env bash
# The GPU check, run on a lent GPU machine from the bundle that scripts/gpu-bundle.sh made (it is the bundle's
# verify.sh). One stage per device call, each well inside the 10-minute limit; logs go to $OUT (or ./gpu-logs).
#   verify.sh tests      every op of both backends against the float64 reference (test_ops), every CUDA test
#                        (behaviour, trainings, whole-step GPU vs CPU), PyTorch's GradScaler on CUDA against the
#                        committed trace, the placement tests, then the CUDA ones of test_ops and test_cuda_ops
#                        under compute-sanitizer
#   verify.sh train      ampwb train --device cuda in every mode on the bundled Fashion-MNIST cut
#   verify.sh bench [ARGS]  bench/cuda_compare.py (ARGS passed on, e.g. --configs 50:224:256): ResNet-50 and
#                        ResNet-18, 224 px batch 256, four modes, beside PyTorch AMP (channels_last,
#                        cudnn.benchmark, GradScaler), alternating
set -uo pipefail
bundle=$(cd "$(dirname "$0")" && pwd)
source "$bundle/env.sh"
logs=${OUT:-$PWD/gpu-logs}
mkdir -p "$logs"
run() { "$bundle/run" "$@"; }
stage=${1:-tests}
shift || true
status=0
step() {  # step NAME COMMAND...: runs, logs to $logs/NAME.log, remembers a failure
  local name=$1; shift
  echo "== $name: $*"
  "$@" >"$logs/$name.log" 2>&1; local rc=$?
  tail -n 15 "$logs/$name.log"
  echo "== $name: exit $rc"
  [ $rc -eq 0 ] || status=1
}
{ nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv; uname -a;
  echo "library path: $AMPWB_GPU_LIBRARY_PATH"; } | tee "$logs/machine.txt"
case $stage in
  tests)
    # test_ops replays PyTorch's GradScaler trace from the checkout beside the bundle
    export AMPWB_GRADSCALER_TRACE="$(dirname "$bundle")/tests/golden/gradscaler_trace.json"
    step ops run test_ops --gtest_brief=1  # every op of the CPU and CUDA backends against the float64 reference
    step cuda_ops run test_cuda_ops --gtest_brief=1
    step cuda_training run test_cuda_training --gtest_brief=1
    # (the profile test that runs the ampwb binary is left out: the bundle's programs run through its own loader)
    # PyTorch's GradScaler on this machine's GPU and CPU against the committed trace the loss scaler's tests replay
    step gradscaler_trace python3 "$(dirname "$bundle")/scripts/gradscaler_trace.py" --devices cuda cpu \
      --out "$logs/gradscaler_trace.json" --against "$(dirname "$bundle")/tests/golden/gradscaler_trace.json"
    step placement run test_optim --gtest_brief=1 --gtest_filter=-ProfiledBackend.AmpwbBenchProfilePrintsEveryClassPerStep
    # Under memcheck: test_ops' many shapes with cuDNN's heuristics (timing every algorithm would outlast the call)
    # and without the 8000-step trace replay; test_cuda_ops' few with the timed search, whose workspace the first
    # execution reuses.
    sanitized() { compute-sanitizer --tool memcheck --error-exitcode 9 "$AMPWB_GPU_HOME/lib/ld-linux-x86-64.so.2" \
      --library-path "$AMPWB_GPU_LIBRARY_PATH" "$AMPWB_GPU_HOME/libexec/$1" --gtest_brief=1 --gtest_filter="$2"; }
    AMPWB_CUDNN_BENCHMARK=0 step sanitizer-test_ops sanitized test_ops '*cuda*:Cuda*:-*DeviceLossScale*'
    step sanitizer-test_cuda_ops sanitized test_cuda_ops '*cuda*:Cuda*' ;;
  train)
    for mode in fp32 tf32 amp-fp16 amp-bf16 fp16-o2; do
      step "train-$mode" run ampwb train --device cuda --data "$AMPWB_DATA" --depth 20 --epochs 3 --batch-size 128 \
        --precision "$mode" --db "$logs/runs.sqlite" --name "gpu $mode $(date -u +%Y%m%dT%H%M%S)"
    done
    step runs run ampwb runs --db "$logs/runs.sqlite" ;;
  bench)
    mkdir -p "$bundle/bin" && printf '#!/bin/sh\nexec "%s/run" ampwb "$@"\n' "$bundle" >"$bundle/bin/ampwb"
    chmod +x "$bundle/bin/ampwb"
    step cuda_compare python3 "$(dirname "$bundle")/bench/cuda_compare.py" --ampwb "$bundle/bin/ampwb" \
      --rounds 2 --steps 20 --warmup 8 --timeout 240 --markdown "$@" ;;
  *) echo "usage: verify.sh tests|train|bench" >&2; exit 2 ;;
esac
exit $status
