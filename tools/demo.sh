#!/usr/bin/env bash
# The README's first command: build gpuq and run its main job on the examples.
set -euo pipefail
cd "$(dirname "$0")/.."
bash tools/build.sh
echo "== gpuq simulate --plan examples/plan.json"
build/gpuq simulate --plan examples/plan.json
