#!/usr/bin/env bash
# From a fresh machine to a training run: installs what is missing, builds, prepares the built-in sample dataset
# (Fashion-MNIST from the Debian package, written out as an image folder once) and trains on it.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh
scripts/build.sh
sample=${XDG_DATA_HOME:-$HOME/.local/share}/ampwb/samples/fashion-mnist
/usr/bin/python3 scripts/fashion_mnist_to_folder.py --out "$sample" --train-limit 2000 --test-limit 1000
exec build/app/ampwb train --data "$sample" --depth 18 --epochs 2 --batch-size 64 --lr 0.05 "$@"
