#!/usr/bin/env bash
# Installs what a fresh Debian 12 machine lacks to build, test and run AMP Workbench (Debian packages only).
# Already-installed packages are left alone; nothing is downloaded when everything is present.
set -euo pipefail

packages=(
  g++ cmake ninja-build ccache pkg-config python3
  qt6-base-dev qt6-charts-dev qt6-svg-dev libqt6opengl6-dev
  libopencv-core-dev libopencv-imgproc-dev libopencv-imgcodecs-dev
  libsqlite3-dev zlib1g-dev libdnnl-dev ocl-icd-opencl-dev libgtest-dev nlohmann-json3-dev libcli11-dev
  xvfb xauth libgl1-mesa-dev
  clang libclang-rt-14-dev
  chromium-headless-shell poppler-utils
  dataset-fashion-mnist
)

missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -eq 0 ]; then
  echo "install-deps: all ${#packages[@]} packages present"
  exit 0
fi

echo "install-deps: installing ${missing[*]}"
sudo=""
[ "$(id -u)" -eq 0 ] || sudo="sudo"
export DEBIAN_FRONTEND=noninteractive
$sudo apt-get update -qq
$sudo apt-get install -y -qq --no-install-recommends "${missing[@]}"
