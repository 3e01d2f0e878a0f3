#!/usr/bin/env bash
# Installs what is missing, then builds into build/ what it is asked for: gpuq alone
# (build/gpuq) by default, or the targets named (tools/test.sh: all).
set -euo pipefail
cd "$(dirname "$0")/.."
bash tools/deps.sh
cmake -S . -B build -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
cmake --build build -j"${JOBS:-2}" --target "${@:-gpuq}"
