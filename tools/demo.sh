#!/usr/bin/env bash
# The README's first command: build gpuq, predict the example plan's timeline,
# then run the demo queue (real bash jobs that sleep a few seconds) to the end.
set -euo pipefail
cd "$(dirname "$0")/.."
bash tools/build.sh
echo "== gpuq simulate --plan examples/plan.json"
build/gpuq simulate --plan examples/plan.json
echo
echo "== gpuq run --plan plan.json   (in examples/demo, from a fresh state)"
cd examples/demo
rm -rf logs out plan.state.json plan.state.json.bak plan.lock plan.run.lock plan.run.json plan.run.plan.json \
  plan.events.jsonl plan.events.jsonl.* plan.predictions.jsonl plan.hooks.json plan.snapshots
../../build/gpuq run --plan plan.json
echo
echo "== gpuq status --plan plan.json --all"
../../build/gpuq status --plan plan.json --all
