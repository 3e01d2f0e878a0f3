#!/usr/bin/env bash
# The README's second command: build gpuq and its tests and run every test (ctest prints the summary).
set -euo pipefail
cd "$(dirname "$0")/.."
bash tools/build.sh all
ctest --test-dir build --output-on-failure -j"${JOBS:-2}" --timeout 300
