#!/usr/bin/env bash
# Packs what a lent GPU machine needs to verify the CUDA engine into one folder (default gpu-bundle/, under
# 60 MiB, ignored by git; docs/gpu.md says how to use it with the device tool):
#   payload.tar.xz  the engine-only build (no Qt, no image codecs): ampwb and the test programs, the shared libraries they use from
#                   this Debian machine (glibc and its loader included, so the GPU machine's own system libraries
#                   never mix in), and a cut of Fashion-MNIST (IDX) from Debian's dataset-fashion-mnist
#   env.sh          unpacks the payload once and finds cuDNN, cuBLASLt and the CUDA runtime in the GPU machine's
#                   PyTorch install (its nvidia-* wheels) or /usr/local/cuda, and the driver's libcuda
#   run             runs a bundled program: gpu-bundle/run test_cuda_ops --gtest_brief=1
#   verify.sh       the whole GPU check in one call, logs to $OUT (see docs/gpu.md)
# AMPWB_GPU_BASE=COMMIT packs that commit's ampwb beside this tree's, as ampwb-base, so that one device call can
# time the two alternating (verify.sh all baseab).
# The CUDA libraries themselves are not packed: the GPU machine has them, and cuBLASLt alone is 500 MiB (NCCL 210).
set -euo pipefail
cd "$(dirname "$0")/.."
out=${1:-gpu-bundle}
build=${AMPWB_GPU_BUILD_DIR:-build-gpu}
limit_mib=60
export CCACHE_BASEDIR=$PWD

command -v nvcc >/dev/null || [ -x /usr/local/cuda/bin/nvcc ] ||
  { echo "gpu-bundle: no nvcc here (/usr/local/cuda): the bundle needs a CUDA build" >&2; exit 1; }
scripts/install-deps.sh
# No GUI and no image codecs (OpenCV's imgcodecs alone pulls in ~140 libraries): the bundle trains on IDX data.
cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DAMPWB_BUILD_GUI=OFF -DAMPWB_IMAGE_CODECS=OFF \
  -DCMAKE_CUDA_ARCHITECTURES="80;90" >/dev/null
programs=(app/ampwb tests/test_cuda_ops tests/test_cuda_training tests/test_ops tests/test_optim)
# NCCL's one-GPU test and the graph API probe: a bundle verifies every CUDA path, so a build without NCCL or without
# cudnn-frontend (which scripts/install-deps.sh fetches) makes none. Read whole: grep -q would stop reading early,
# and ninja, killed by SIGPIPE, would fail the pipeline.
targets=$(cmake --build "$build" --target help)
grep -q '^test_cuda_nccl:' <<< "$targets" ||
  { echo "gpu-bundle: the build has no NCCL (NCCL in the CUDA installation): see its configure output" >&2; exit 1; }
grep -q '^ampwb_graph_api_probe:' <<< "$targets" ||
  { echo "gpu-bundle: the build has no cudnn-frontend (scripts/install-deps.sh could not fetch it)" >&2; exit 1; }
programs+=(tests/test_cuda_nccl bench/ampwb_graph_api_probe)
cmake --build "$build" -j "$(nproc)" --target "${programs[@]##*/}"
[ -x "$build/tests/test_cuda_ops" ] ||
  { echo "gpu-bundle: the build has no CUDA backend (cuDNN or cuBLASLt not found): see its configure output" >&2; exit 1; }

stage=$(mktemp -d)
trap 'rm -rf "$stage"' EXIT
mkdir -p "$stage/libexec" "$stage/lib" "$stage/data/fashion-mnist-cut"
for p in "${programs[@]}"; do strip -o "$stage/libexec/$(basename "$p")" "$build/$p"; done
binaries=("${programs[@]/#/$build/}")
if [ -n "${AMPWB_GPU_BASE:-}" ]; then
  base_tree=/tmp/ampwb-gpu-base  # a worktree of the base commit; its build folder stays for ccache's next time
  git worktree remove --force "$base_tree" 2>/dev/null || rm -rf "$base_tree"
  git worktree add --detach "$base_tree" "$AMPWB_GPU_BASE" >/dev/null
  CCACHE_BASEDIR=$base_tree cmake -S "$base_tree" -B "$base_tree-build" -G Ninja -DCMAKE_BUILD_TYPE=Release \
    -DAMPWB_BUILD_GUI=OFF -DAMPWB_IMAGE_CODECS=OFF -DCMAKE_CUDA_ARCHITECTURES="80;90" >/dev/null
  CCACHE_BASEDIR=$base_tree cmake --build "$base_tree-build" -j "$(nproc)" --target ampwb
  strip -o "$stage/libexec/ampwb-base" "$base_tree-build/app/ampwb"
  binaries+=("$base_tree-build/app/ampwb")
  git worktree remove --force "$base_tree"
  echo "gpu-bundle: ampwb-base is $(git rev-parse --short "$AMPWB_GPU_BASE")"
fi

# Every shared library the programs load, except the CUDA ones the GPU machine brings (and the kernel's vDSO).
for p in "${binaries[@]}"; do ldd "$p"; done | awk '$2 == "=>" && $3 ~ /^\// {print $3} $1 ~ /^\// {print $1}' |
  sort -u | grep -v -E '/lib(cuda|cudart|cudnn[^/]*|cublas|cublasLt|nvrtc|nvJitLink|nccl)\.so' >"$stage/libs.txt"
while read -r lib; do cp -L "$lib" "$stage/lib/"; done <"$stage/libs.txt"
cp -L /lib64/ld-linux-x86-64.so.2 "$stage/lib/"

# A real dataset small enough to train on in seconds: the first 4096 training and 1024 test images.
/usr/bin/python3 - /usr/share/datasets/fashion-mnist "$stage/data/fashion-mnist-cut" <<'PY'
import gzip, struct, sys
src, dst = sys.argv[1], sys.argv[2]
for split, count in (("train", 4096), ("t10k", 1024)):
    for kind, item in (("images-idx3-ubyte", 28 * 28), ("labels-idx1-ubyte", 1)):
        with gzip.open(f"{src}/{split}-{kind}.gz") as f:
            data = f.read()
        dims = 3 if kind.startswith("images") else 1
        header = bytearray(data[:4 + 4 * dims])
        struct.pack_into(">I", header, 4, count)
        body = data[4 + 4 * dims:4 + 4 * dims + count * item]
        with gzip.open(f"{dst}/{split}-{kind}.gz", "wb") as f:
            f.write(bytes(header) + body)
PY

rm -rf "$out"
mkdir -p "$out"
tar -C "$stage" -cf - libexec lib data | xz -T0 -6 >"$out/payload.tar.xz"

cat >"$out/env.sh" <<'ENV'
# Sourced by run and verify.sh: unpacks the payload (once) and sets AMPWB_GPU_LIBRARY_PATH.
bundle=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
export AMPWB_GPU_HOME=${AMPWB_GPU_HOME:-/tmp/ampwb-gpu}
if [ ! -e "$AMPWB_GPU_HOME/.unpacked" ] || [ "$bundle/payload.tar.xz" -nt "$AMPWB_GPU_HOME/.unpacked" ]; then
  rm -rf "$AMPWB_GPU_HOME" && mkdir -p "$AMPWB_GPU_HOME"
  tar -C "$AMPWB_GPU_HOME" -xJf "$bundle/payload.tar.xz" && touch "$AMPWB_GPU_HOME/.unpacked"
fi
# The CUDA libraries: the folders holding cuDNN 9, cuBLASLt 13, the CUDA 13 runtime and NCCL 2, from PyTorch's nvidia-*
# wheels first, then the toolkit; the driver's libcuda last (after ours, so none of its neighbours replace ours).
cuda_dirs=()
python=$(command -v python3 || true)
roots=(/usr/local/cuda/lib64 /usr/local/cuda/lib)
[ -n "$python" ] && roots=($("$python" -c 'import site; print(" ".join(site.getsitepackages()))' 2>/dev/null) "${roots[@]}")
for want in 'libcudnn.so.9' 'libcublasLt.so.13' 'libcudart.so.13' 'libnvrtc.so.13' 'libnccl.so.2'; do
  hit=$(find "${roots[@]}" -name "$want*" \( -type f -o -type l \) 2>/dev/null | head -n 1 || true)
  if [ -n "$hit" ]; then cuda_dirs+=("$(dirname "$hit")"); else echo "env.sh: $want not found in ${roots[*]}" >&2; fi
done  # NVRTC: only for cuDNN's runtime-compiled engines (the graph API probe); NCCL: the programs built with it
driver=$(ldconfig -p 2>/dev/null | awk '/libcuda\.so\.1 /{print $NF; exit}' || true)
if [ -z "$driver" ]; then
  driver=$(find /usr/lib64 /usr/lib/x86_64-linux-gnu /usr/local/nvidia -name 'libcuda.so.1' 2>/dev/null | head -n 1 || true)
fi
path="$AMPWB_GPU_HOME/lib"
for d in "${cuda_dirs[@]}"; do case ":$path:" in *":$d:"*) ;; *) path="$path:$d" ;; esac; done
if [ -n "$driver" ]; then path="$path:$(dirname "$driver")"; else echo "env.sh: no libcuda.so.1 (no GPU driver)" >&2; fi
export AMPWB_GPU_LIBRARY_PATH=$path
export AMPWB_DATA=$AMPWB_GPU_HOME/data/fashion-mnist-cut
# A verification cannot pass by skipping: a CUDA test that skips fails its program (tests/gpu_required.h).
export AMPWB_GPU_REQUIRED=${AMPWB_GPU_REQUIRED:-1}
ENV

cat >"$out/run" <<'RUN'
#!/usr/bin/env bash
# run PROGRAM [ARGS...]: a bundled program (ampwb, test_cuda_ops, ...) under the bundle's own loader and glibc.
set -euo pipefail
source "$(dirname "$0")/env.sh"
program=$1; shift
exec "$AMPWB_GPU_HOME/lib/ld-linux-x86-64.so.2" --library-path "$AMPWB_GPU_LIBRARY_PATH" \
  "$AMPWB_GPU_HOME/libexec/$program" "$@"
RUN
cp scripts/gpu-verify.sh "$out/verify.sh"
chmod +x "$out/run" "$out/verify.sh"

size_kib=$(du -sk "$out" | cut -f1)
echo "gpu-bundle: $out is $((size_kib / 1024)) MiB ($(wc -l <"$stage/libs.txt") libraries, ${#programs[@]} programs)"
[ "$size_kib" -lt $((limit_mib * 1024)) ] || { echo "gpu-bundle: over $limit_mib MiB" >&2; exit 1; }
