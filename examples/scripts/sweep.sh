#!/usr/bin/env bash
# A short one-GPU sweep point.
set -euo pipefail
python -m mylab.sweep --name "$GPUQ_JOB_ID"
