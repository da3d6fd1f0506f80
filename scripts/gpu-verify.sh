#!/usr/bin/env bash
# The GPU check, run on a lent GPU machine from the bundle that scripts/gpu-bundle.sh made (it is the bundle's
# verify.sh). One stage per device call, each well inside the 10-minute limit; logs go to $OUT (or ./gpu-logs).
#   verify.sh tests      every op of both backends against the float64 reference (test_ops), every CUDA test
#                        (behaviour, trainings, whole-step GPU vs CPU, NCCL on one GPU), PyTorch's GradScaler on CUDA against the
#                        committed trace, the placement tests, then the CUDA ones of test_ops and test_cuda_ops
#                        under compute-sanitizer
#   verify.sh train      ampwb train --device cuda in every mode on the bundled Fashion-MNIST cut
#   verify.sh bench [ARGS]  bench/cuda_compare.py (ARGS passed on, e.g. --configs 50:224:256 --modes amp-fp16):
#                        ResNet-50 and ResNet-18, 224 px batch 256, every mode, beside PyTorch eager and with CUDA
#                        graphs (channels_last, cudnn.benchmark, GradScaler), alternating: longer than one call
set -uo pipefail
bundle=$(cd "$(dirname "$0")" && pwd)
source "$bundle/env.sh"
logs=${OUT:-$PWD/gpu-logs}
packed=$logs/logs.tar.gz
# 'all' packs its logs into one file, from a folder of its own (emptied: a warm machine keeps the last call's)
[ "${1:-}" != all ] || { logs=/tmp/ampwb-verify-logs && rm -rf "$logs"; }
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
# A GPU is required (env.sh's default): without one every CUDA test would skip and every part "pass".
devices=$(run ampwb devices 2>&1)
if [ "$AMPWB_GPU_REQUIRED" = 1 ] && ! grep -q '^  cuda' <<< "$devices"; then
  echo "verify.sh: no GPU to verify on (AMPWB_GPU_REQUIRED=1); ampwb devices says:" >&2
  echo "$devices" >&2
  exit 1
fi
# sanitized TOOL API-ERRORS PROGRAM FILTER: a bundled test program under compute-sanitizer. API errors are reported
# (explicit: the calls the program and its libraries make) except in the tests that provoke them on purpose.
sanitized() { compute-sanitizer --tool "$1" --report-api-errors "$2" --error-exitcode 9 \
  "$AMPWB_GPU_HOME/lib/ld-linux-x86-64.so.2" --library-path "$AMPWB_GPU_LIBRARY_PATH" \
  "$AMPWB_GPU_HOME/libexec/$3" --gtest_brief=1 --gtest_filter="$4"; }
provoked='CudaDevice.DescriptionMemoryAccountingAndOutOfMemory:CudaCheck.*'  # a 1 PiB allocation, failing calls
# test_ops' CUDA cases with cuDNN's heuristics (timing every algorithm would outlast the call) and without the
# 8000-step trace replay; test_cuda_ops with the timed search, whose workspace the first execution reuses, but not
# the default policy's NVRTC builds (CudaGraphApi.TheFasterApiRunsEachPass).
ops_sanitized='*cuda*:Cuda*:-*DeviceLossScale*'
cuda_ops_sanitized="*cuda*:Cuda*:-CudaGraphApi.TheFasterApiRunsEachPass:$provoked"
# racecheck and synccheck look at shared memory and barriers: the engine's own kernels, not cuDNN's convolutions.
own_kernels='*cuda*:-*cuda_conv2d*:*DeviceLossScale*'
case $stage in
  tests)
    # test_ops replays PyTorch's GradScaler trace from the checkout beside the bundle
    export AMPWB_GRADSCALER_TRACE="$(dirname "$bundle")/tests/golden/gradscaler_trace.json"
    step ops run test_ops --gtest_brief=1  # every op of the CPU and CUDA backends against the float64 reference
    step cuda_ops run test_cuda_ops --gtest_brief=1
    step cuda_training run test_cuda_training --gtest_brief=1
    step nccl run test_cuda_nccl --gtest_brief=1
    # (the profile test that runs the ampwb binary is left out: the bundle's programs run through its own loader)
    # PyTorch's GradScaler on this machine's GPU and CPU against the committed trace the loss scaler's tests replay
    step gradscaler_trace python3 "$(dirname "$bundle")/scripts/gradscaler_trace.py" --devices cuda cpu \
      --out "$logs/gradscaler_trace.json" --against "$(dirname "$bundle")/tests/golden/gradscaler_trace.json"
    step placement run test_optim --gtest_brief=1 --gtest_filter=-ProfiledBackend.AmpwbBenchProfilePrintsEveryClassPerStep
    # under memcheck (see sanitized above)
    AMPWB_CUDNN_BENCHMARK=0 step sanitizer-test_ops sanitized memcheck explicit test_ops "$ops_sanitized"
    step sanitizer-test_cuda_ops sanitized memcheck explicit test_cuda_ops "$cuda_ops_sanitized"
    step sanitizer-provoked sanitized memcheck no test_cuda_ops "$provoked" ;;
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
  all)
    # Everything above in one call, most important first, inside a budget of AMPWB_VERIFY_SECONDS (default 480):
    # a lease may be 15 minutes in all, so each part gets its own timeout, a part that no longer fits is skipped
    # and named, and the logs are packed into $OUT/logs.tar.gz after every part (the device tool brings back few
    # files, and a killed call still brings back what was packed). Parts may be named: verify.sh all ops train.
    budget=${AMPWB_VERIFY_SECONDS:-480}; deadline=$((SECONDS + budget))
    export AMPWB_GRADSCALER_TRACE="$(dirname "$bundle")/tests/golden/gradscaler_trace.json"
    checkout=$(dirname "$bundle")
    mkdir -p "$bundle/bin" && printf '#!/bin/sh\nexec "%s/run" ampwb "$@"\n' "$bundle" >"$bundle/bin/ampwb"
    chmod +x "$bundle/bin/ampwb"
    # The checks of correctness leave out the convolution engines NVRTC compiles (seconds each, for each of test_ops'
    # hundreds of shapes: longer than a part's timeout); CudaGraphApi.TheFasterApiRunsEachPass runs them on its own
    # policy, and the comparisons with PyTorch take the default policy, compiled engines included.
    export AMPWB_CUDNN_RUNTIME_COMPILED=${AMPWB_CUDNN_RUNTIME_COMPILED:-0}
    compare() { AMPWB_CUDNN_RUNTIME_COMPILED=1 python3 "$checkout/bench/cuda_compare.py" --ampwb "$bundle/bin/ampwb" \
      --rounds 1 --steps 15 --warmup 6 --timeout 100 --markdown "$@"; }
    timed() {  # timed NAME SECONDS COMMAND...: step under a timeout that also ends before the deadline
      local name=$1 want=$2; shift 2
      local left=$((deadline - SECONDS - 5))
      if [ $left -lt 20 ]; then echo "== $name: skipped, ${left}s left of the budget"; return; fi
      [ "$want" -lt $left ] || want=$left
      step "$name" timeout -k 5 "$want" bash -c '"$@"' "$name" "$@"  # bash: the commands may be functions
      tar -C "$logs" -czf "$packed.tmp" . && mv "$packed.tmp" "$packed"
    }
    export -f run compare sanitized
    export bundle checkout
    parts=("$@")  # the suite, then speed
    [ ${#parts[@]} -gt 0 ] || parts=(cuda_ops ops cuda_training nccl train gradscaler sanitizer racecheck synccheck
      bench50 bench18 hostsync)
    for part in "${parts[@]}"; do
      case $part in
        cuda_ops) timed cuda_ops 120 run test_cuda_ops --gtest_brief=1 ;;  # NVRTC builds of CudaGraphApi.* included
        ops) timed ops 120 run test_ops --gtest_brief=1 --gtest_filter='*cuda*:*Cuda*' ;;
        cuda_training) timed cuda_training 150 run test_cuda_training --gtest_brief=1 ;;
        nccl)  # NCCL's communicator, one rank on one GPU: its warnings printed, its bootstrap on the loopback
          NCCL_DEBUG=WARN NCCL_SOCKET_IFNAME=lo timed nccl 90 run test_cuda_nccl ;;
        placement) timed placement 120 run test_optim --gtest_brief=1 \
          --gtest_filter=-ProfiledBackend.AmpwbBenchProfilePrintsEveryClassPerStep ;;
        train)
          for mode in fp32 tf32 amp-fp16 amp-bf16 fp16-o2; do
            timed "train-$mode" 45 run ampwb train --device cuda --data "$AMPWB_DATA" --depth 20 --epochs 2 \
              --batch-size 128 --precision "$mode" --db "$logs/runs.sqlite" --name "gpu $mode"
          done
          timed runs 10 run ampwb runs --db "$logs/runs.sqlite" ;;
        bench50)  # strict fp32 last: the slowest, and where a regression would cost the most time
          timed bench50-fp16-bf16 200 compare --configs 50:224:256 --modes amp-fp16 amp-bf16 --pytorch-graphs off
          timed bench50-tf32-o2-fp32 200 compare --configs 50:224:256 --modes tf32 fp16-o2 fp32 --pytorch-graphs off ;;
        bench18) timed bench18 240 compare --configs 18:224:256 --modes amp-fp16 amp-bf16 tf32 fp32 \
                   --pytorch-graphs off ;;
        fp8)  # amp-fp8 on FP8 tensor cores: its op and whole-step tests, a training, then ResNet-50 against amp-bf16
          timed fp8-ops 90 run test_cuda_ops --gtest_brief=1 --gtest_filter='CudaFp8*'
          timed fp8-step 90 run test_cuda_training --gtest_brief=1 --gtest_filter='*amp_fp8*'
          timed train-amp-fp8 60 run ampwb train --device cuda --data "$AMPWB_DATA" --depth 20 --epochs 2 \
            --batch-size 128 --precision amp-fp8 --db "$logs/runs.sqlite" --name "gpu amp-fp8"
          for round in 1 2 3; do
            for mode in amp-bf16 amp-fp8; do  # amp-fp8's warm-up times each pass on FP8 and widened
              AMPWB_CUDNN_PLANS=1 timed "fp8ab-r50-$mode-$round" "$([ $mode = amp-fp8 ] && echo 80 || echo 45)" \
                run ampwb bench --device cuda --depth 50 --image-size 224 --batch-size 256 --precision "$mode" \
                --steps 15 --warmup 6 --json
            done
          done
          # Where an amp-fp8 step's time goes, by op class (each pass's FP8 or widened way is in the plans above)
          timed fp8-profile-r50 60 run ampwb bench --device cuda --depth 50 --image-size 224 --batch-size 256 \
            --precision amp-fp8 --steps 6 --warmup 4 --profile
          # The scale-inverses in a pass of their own after each convolution, against in its epilogue (above)
          AMPWB_CUDA_FP8_FUSED_SCALES=0 AMPWB_CUDNN_PLANS=1 timed fp8ab-r50-amp-fp8-unfused 60 run ampwb bench \
            --device cuda --depth 50 --image-size 224 --batch-size 256 --precision amp-fp8 --steps 15 --warmup 6 \
            --json ;;
        graphsall)  # every mode of both models beside PyTorch with captured steps (amp-fp16 ResNet-50 last)
          timed graphs18-all 200 compare --configs 18:224:256 --modes fp32 tf32 amp-fp16 amp-bf16 fp16-o2 \
            --pytorch-graphs on --ampwb-args="--cuda-graphs on"
          timed graphs50-rest 200 compare --configs 50:224:256 --modes fp32 tf32 amp-bf16 amp-fp16 \
            --pytorch-graphs on --ampwb-args="--cuda-graphs on" ;;
        gradscaler) timed gradscaler_trace 60 python3 "$checkout/scripts/gradscaler_trace.py" --devices cuda cpu \
          --out "$logs/gradscaler_trace.json" --against "$checkout/tests/golden/gradscaler_trace.json" ;;
        sanitizer)
          AMPWB_CUDNN_BENCHMARK=0 timed sanitizer-test_ops 200 sanitized memcheck explicit test_ops "$ops_sanitized"
          timed sanitizer-test_cuda_ops 120 sanitized memcheck explicit test_cuda_ops "$cuda_ops_sanitized"
          timed sanitizer-provoked 60 sanitized memcheck no test_cuda_ops "$provoked" ;;
        racecheck) timed racecheck-test_ops 150 sanitized racecheck no test_ops "$own_kernels" ;;
        synccheck) timed synccheck-test_ops 150 sanitized synccheck no test_ops "$own_kernels" ;;
        bench50fp16) timed bench50-fp16 120 compare --configs 50:224:256 --modes amp-fp16 ;;
        workspace)  # cuDNN's algorithms with a 4 GiB workspace limit instead of 256 MiB
          AMPWB_CUDNN_WORKSPACE_MIB=4096 timed workspace-4096 60 run ampwb bench --device cuda --depth 50 \
            --image-size 224 --batch-size 256 --precision amp-fp16 --steps 15 --warmup 6 --json ;;
        fp32algos)  # strict FP32: GEMM-based algorithms only against any FMA one (FFT, Winograd: the default)
          for exact in 1 0; do
            AMPWB_CUDNN_PLANS=1 AMPWB_CUDNN_EXACT_FP32=$exact timed "fp32-exact$exact" 60 run ampwb bench \
              --device cuda --depth 18 --image-size 224 --batch-size 256 --precision fp32 --steps 4 --warmup 2 --json
          done ;;
        fp32nchw)  # strict FP32 convolutions in NCHW (AMPWB_CUDA_FP32_NCHW=1): the op tests, then ResNet-18's step
          AMPWB_CUDA_FP32_NCHW=1 timed ops-fp32-nchw 60 run test_ops --gtest_brief=1 --gtest_filter='*cuda_conv2d_fp32*'
          for nchw in 0 1; do
            AMPWB_CUDA_FP32_NCHW=$nchw timed "fp32-nchw$nchw" 60 run ampwb bench --device cuda --depth 18 \
              --image-size 224 --batch-size 256 --precision fp32 --steps 4 --warmup 2 --json
          done ;;
        graphapi)  # convolutions on cuDNN's graph API alone (AMPWB_CUDNN_GRAPH_API=1, cudnn-frontend): its tests
          # against the legacy API, then the convolution op tests through it
          timed graphapi-test 60 run test_cuda_ops --gtest_brief=1 --gtest_filter='CudaGraphApi*'
          AMPWB_CUDNN_GRAPH_API=1 timed graphapi-ops 90 run test_ops --gtest_brief=1 --gtest_filter='*cuda_conv*' ;;
        graphapiab)  # the legacy API alone against the default (the faster API per shape, whose runs print their
          # plans), alternating: ResNet-18 amp-fp16, ResNet-50 amp-fp16, ResNet-18 fp32
          for run_of in 18:amp-fp16:15 50:amp-fp16:15 18:fp32:4; do
            IFS=: read -r depth mode steps <<<"$run_of"
            for api in 0 auto 0-2 auto-2; do
              AMPWB_CUDNN_GRAPH_API=${api%-2} AMPWB_CUDNN_PLANS=$([ "${api%-2}" = auto ] && echo 1 || echo 0) \
                timed "graphapi-r$depth-$mode-$api" 90 \
                run ampwb bench --device cuda --depth "$depth" --image-size 224 --batch-size 256 --precision "$mode" \
                --steps "$steps" --warmup 4 --json
            done
          done ;;
        probe)  # which convolution + batch-norm statistics fusions cuDNN's graph API offers here, and their speed
          timed graphapi-probe 150 run ampwb_graph_api_probe ;;
        sanitizer_training) AMPWB_CUDNN_BENCHMARK=0 timed sanitizer-test_cuda_training 240 sanitized memcheck \
          explicit test_cuda_training '*' ;;
        profile50) timed profile50-amp-fp16 60 run ampwb bench --device cuda --depth 50 --image-size 224 \
          --batch-size 256 --precision amp-fp16 --steps 6 --warmup 4 --profile ;;
        profile18) timed profile18-amp-fp16 60 run ampwb bench --device cuda --depth 18 --image-size 224 \
          --batch-size 256 --precision amp-fp16 --steps 6 --warmup 4 --profile ;;
        profiles)  # the profile table: amp-bf16 and fp32 beside profile50's amp-fp16
          for mode in amp-bf16 fp32; do
            timed "profile50-$mode" 90 run ampwb bench --device cuda --depth 50 --image-size 224 --batch-size 256 \
              --precision "$mode" --steps 6 --warmup 4 --profile
          done ;;
        graphs)  # captured steps (--cuda-graphs on): the CUDA test, then ResNet-50 and ResNet-18 beside PyTorch
          timed graphs-test 90 run test_cuda_training --gtest_brief=1 --gtest_filter='CudaCapturedSteps*'
          timed graphs50 150 compare --configs 50:224:256 --modes amp-fp16 amp-bf16 --pytorch-graphs on \
            --ampwb-args="--cuda-graphs on"
          timed graphs18 150 compare --configs 18:224:256 --modes amp-fp16 amp-bf16 --pytorch-graphs on \
            --ampwb-args="--cuda-graphs on" ;;
        graphsab)  # ours with and without graphs, alternating, ResNet-18 amp-fp16 (where launches weigh most)
          for g in off on off-2 on-2; do
            timed "graphs-${g}" 45 run ampwb bench --device cuda --depth 18 --image-size 224 --batch-size 256 \
              --precision amp-fp16 --steps 20 --warmup 6 --cuda-graphs "${g%-2}" --json
          done ;;
        endsab)  # residual block ends fused (batch norm + add + ReLU, and the gradients' sum with the ReLU's mask)
          # or run as separate ops (AMPWB_CUDA_FUSED_ENDS=0), alternating, ResNet-50 amp-fp16
          for f in 0 1 0-2 1-2; do
            AMPWB_CUDA_FUSED_ENDS=${f%-2} timed "fused-ends${f}" 60 run ampwb bench --device cuda --depth 50 \
              --image-size 224 --batch-size 256 --precision amp-fp16 --steps 15 --warmup 6 --json
          done ;;
        ptprofile)  # where PyTorch's step goes, by kernel class, beside profile50 (bench/pytorch_cuda_profile.py)
          for run_of in 50:amp-fp16 50:amp-bf16 18:amp-fp16; do
            timed "ptprofile-r${run_of%%:*}-${run_of#*:}" 60 python3 "$checkout/bench/pytorch_cuda_profile.py" \
              --depth "${run_of%%:*}" --precision "${run_of#*:}"
          done ;;
        baseab)  # this build against the bundle's ampwb-base (gpu-bundle.sh with AMPWB_GPU_BASE), alternating
          if [ ! -e "$AMPWB_GPU_HOME/libexec/ampwb-base" ]; then
            echo "== baseab: the bundle has no ampwb-base (AMPWB_GPU_BASE=COMMIT scripts/gpu-bundle.sh)"; status=1
            continue
          fi
          for depth in 50 18; do
            for round in 1 2; do
              for program in ampwb-base ampwb; do
                timed "baseab-r$depth-$program-$round" 60 run "$program" bench --device cuda --depth "$depth" \
                  --image-size 224 --batch-size 256 --precision amp-fp16 --steps 15 --warmup 6 --json
              done
            done
          done ;;
        hostsync)
          for s in every-step deferred every-step-2 deferred-2; do
            timed "hostsync-$s" 60 run ampwb bench --device cuda --depth 50 --image-size 224 --batch-size 256 \
              --precision amp-fp16 --steps 15 --warmup 6 --host-sync "${s%-2}" --json
          done ;;
        fig-18-* | fig-50-*)  # issue 63's figures: one model in one mode, 224 px batch 256, 3 alternating rounds,
          # ours beside PyTorch eager and graphed. A part starts only where its estimated time is left, so that no
          # call ends inside one; the rounds it did finish stay in its log.
          IFS=- read -r _ depth mode <<<"$part"
          need=180
          [ "$depth" = 18 ] || need=240
          [ "$depth" = 18 ] || [ "$mode" != fp32 -a "$mode" != tf32 ] || need=360
          if [ $((deadline - SECONDS - 5)) -lt $need ]; then echo "== $part: skipped, needs ${need}s of the budget"
          else timed "$part" $((need * 5 / 4)) compare --configs "$depth:224:256" --modes "$mode" --rounds 3 \
            --pytorch-graphs both; fi ;;
        *) echo "verify.sh all: unknown part $part" >&2; status=1 ;;
      esac
    done
    echo "== all: $((SECONDS)) s of $budget" ;;
  *) echo "usage: verify.sh tests|train|bench|all [PARTS...]" >&2; exit 2 ;;
esac
exit $status
