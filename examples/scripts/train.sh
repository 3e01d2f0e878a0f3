#!/usr/bin/env bash
# One training arm on the GPUs gpuq gives it (CUDA_VISIBLE_DEVICES); writes READY markers.
set -euo pipefail
arm=${GPUQ_JOB_ID#train_}
torchrun --nproc_per_node "$(tr ',' '\n' <<<"$CUDA_VISIBLE_DEVICES" | wc -l)" -m mylab.train \
  --config "configs/$arm.yaml" --ckpt-dir "$HOME/ckpt/$arm"
