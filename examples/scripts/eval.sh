#!/usr/bin/env bash
# Evaluate a checkpoint on one GPU.
set -euo pipefail
python -m mylab.eval --job "$GPUQ_JOB_ID" --device "cuda:0"
