#!/usr/bin/env bash
# Screenshots of the desktop workbench for the README. Builds ampwb if needed, then, under Xvfb, drives the real
# window through its own controls (ampwb --screenshot-scenario all): a training on the built-in sample
# (Fashion-MNIST, ResNet-20, AMP FP16), then a precision sweep (FP32, AMP FP16, AMP BF16) and its comparison.
# Writes docs/screenshots/{training,compare,runs}.png at 1366×768, a laptop's screen (the window takes the screen, up
# to 1600×1000). Takes a few minutes on two cores.
#
#   scripts/screenshots.sh              # build/ as the build folder
#   BUILD_DIR=build-ui scripts/screenshots.sh
set -euo pipefail
cd "$(dirname "$0")/.."
build=${BUILD_DIR:-build}

if [ ! -d /usr/share/datasets/fashion-mnist ]; then
  echo "screenshots.sh: the built-in sample is missing: apt-get install dataset-fashion-mnist" >&2
  exit 1
fi
command -v xvfb-run > /dev/null || { echo "screenshots.sh: xvfb-run is missing: apt-get install xvfb xauth" >&2; exit 1; }

if [ ! -f "$build/build.ninja" ] && [ ! -f "$build/Makefile" ]; then
  cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release
fi
cmake --build "$build" --target ampwb

# A private home: the screenshots show a first launch, with a run store of their own.
scratch=$(mktemp -d)
trap 'rm -rf "$scratch"' EXIT
export XDG_CONFIG_HOME=$scratch/config XDG_DATA_HOME=$scratch/data XDG_RUNTIME_DIR=$scratch/runtime
export XDG_CACHE_HOME=${XDG_CACHE_HOME:-$scratch/cache}
mkdir -p -m 700 "$XDG_RUNTIME_DIR"
mkdir -p docs/screenshots

xvfb-run -a -s "-screen 0 1366x768x24" \
  "$build/app/ampwb" --db "$scratch/runs.sqlite" --screenshot-scenario all --screenshot-dir docs/screenshots
ls -l docs/screenshots
