#!/usr/bin/env bash
# Installs what a fresh Debian 12 machine lacks to build, test and run AMP Workbench: Debian packages, and for CUDA
# builds cudnn-frontend's headers (pinned, below). What is present is left alone; nothing is downloaded then.
set -euo pipefail

packages=(
  g++ cmake ninja-build ccache pkg-config python3
  qt6-base-dev qt6-charts-dev qt6-svg-dev libqt6opengl6-dev
  libopencv-core-dev libopencv-imgproc-dev libopencv-imgcodecs-dev libjpeg-dev
  libsqlite3-dev zlib1g-dev libdnnl-dev ocl-icd-opencl-dev libgtest-dev nlohmann-json3-dev libcli11-dev
  openmpi-bin libopenmpi-dev
  slurm-wlm munge
  postgresql-15 libpq-dev
  xvfb xauth libgl1-mesa-dev
  clang libclang-rt-14-dev
  chromium-headless-shell poppler-utils fonts-wqy-microhei
  dataset-fashion-mnist
  libonnx-dev libprotobuf-dev protobuf-compiler
  python3-venv python3-torch python3-torchvision python3-onnx
)

# cudnn-frontend (NVIDIA's header-only C++ API to cuDNN's graph API), for CUDA builds only: one pinned wheel from the
# Python package registry, checked against its hash, its include/ unpacked into .cache/ (CMake finds it there). A
# CUDA build without it still builds, on cuDNN's legacy API alone.
fetch_cudnn_frontend() {
  local version=1.32.0 dest=.cache/cudnn-frontend/1.32.0
  [ -f "$dest/include/cudnn_frontend.h" ] && return 0
  command -v nvcc >/dev/null || [ -x /usr/local/cuda/bin/nvcc ] || return 0
  echo "install-deps: fetching cudnn-frontend $version's headers"
  python3 - "$dest" <<'PY' || echo "install-deps: cudnn-frontend not fetched; CUDA builds use cuDNN's legacy API only"
import hashlib, io, sys, urllib.request, zipfile
url = ("https://files.pythonhosted.org/packages/11/02/660e2dd9f9d9f940e1641443771730612c3aadaafbc5ef7a93cc313d519d/"
       "nvidia_cudnn_frontend-1.32.0-cp311-cp311-manylinux_2_27_x86_64.manylinux_2_28_x86_64.whl")
sha256 = "c6006556017a4d1c914c52a556c71b1267f2d6a0500f742e7b4edef539878df0"
data = urllib.request.urlopen(url, timeout=120).read()
got = hashlib.sha256(data).hexdigest()
if got != sha256:
    sys.exit(f"cudnn-frontend wheel: sha256 {got}, expected {sha256}")
with zipfile.ZipFile(io.BytesIO(data)) as wheel:
    headers = [n for n in wheel.namelist() if n.startswith("include/") and not n.endswith("/")]
    for name in headers:
        wheel.extract(name, sys.argv[1])
print(f"install-deps: {len(headers)} cudnn-frontend headers in {sys.argv[1]}/include")
PY
}

# The export tests' Python (tests/export_check.py): Debian's python3 with its torch, torchvision and onnx visible,
# plus onnxruntime and safetensors (not packaged in Debian 12) from the Python package registry, pinned, in
# .cache/export-venv (CTest runs the checker with its python).
make_export_venv() {
  local venv=.cache/export-venv
  [ -x "$venv/bin/python" ] && "$venv/bin/python" -c "import onnxruntime, safetensors" 2>/dev/null && return 0
  echo "install-deps: making $venv (onnxruntime, safetensors)"
  /usr/bin/python3 -m venv --system-site-packages "$venv"
  "$venv/bin/pip" install -q onnxruntime==1.32.0 safetensors==0.8.0 ||
    echo "install-deps: onnxruntime/safetensors not installed; the test export.onnxruntime_and_pytorch_load fails"
}

install_packages() {
  local missing=()
  for p in "${packages[@]}"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
  done
  if [ ${#missing[@]} -eq 0 ]; then
    echo "install-deps: all ${#packages[@]} packages present"
    return 0
  fi
  echo "install-deps: installing ${missing[*]}"
  local sudo=""
  [ "$(id -u)" -eq 0 ] || sudo="sudo"
  export DEBIAN_FRONTEND=noninteractive
  $sudo apt-get update -qq
  $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}"
}

install_packages
cd "$(dirname "$0")/.."
fetch_cudnn_frontend
make_export_venv
