#!/usr/bin/env bash
# The whole test suite on a fresh machine: installs what is missing, builds, and runs every test through CTest.
# Tests run one at a time: each uses both cores through OpenMP, and two at once would fight over them.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh
scripts/build.sh
export QT_QPA_PLATFORM=offscreen XDG_RUNTIME_DIR=${XDG_RUNTIME_DIR:-/tmp/ampwb-runtime-$UID}
mkdir -p "$XDG_RUNTIME_DIR" && chmod 700 "$XDG_RUNTIME_DIR"
ctest --test-dir "${AMPWB_BUILD_DIR:-build}" --output-on-failure --timeout 900
