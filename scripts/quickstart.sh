#!/usr/bin/env bash
# From a fresh machine to a training run: installs what is missing, builds, and trains on the built-in sample
# dataset (Fashion-MNIST from Debian's dataset-fashion-mnist, read in place), recording the run in the run store.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh
scripts/build.sh
sample=$(build/app/ampwb dataset sample)
exec build/app/ampwb train --data "$sample" --max-train-images 2000 --depth 18 --epochs 2 --batch-size 64 \
  --lr 0.05 --name "quickstart sample" "$@"
