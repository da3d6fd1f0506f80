#!/usr/bin/env bash
# From a fresh machine to the workbench: installs what is missing, builds, and opens the AMP Workbench window with
# the built-in sample dataset (Fashion-MNIST from Debian's dataset-fashion-mnist) preselected: click Train.
# Without a display (a server, ssh), it trains on the sample headless instead and records the run.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh
scripts/build.sh
if [ -n "${DISPLAY:-}${WAYLAND_DISPLAY:-}" ]; then
  exec build/app/ampwb "$@"
fi
echo "quickstart: no display found; training on the built-in sample headless (the GUI needs a desktop session)"
exec build/app/ampwb train --data "$(build/app/ampwb dataset sample)" --max-train-images 2000 --depth 18 \
  --epochs 2 --batch-size 64 --lr 0.05 "$@"
