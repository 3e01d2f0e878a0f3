#!/usr/bin/env bash
# A stand-in for a real job: says where it runs, works a few seconds, leaves a marker.
set -euo pipefail
echo "$GPUQ_JOB_ID (attempt $GPUQ_ATTEMPT) on CUDA_VISIBLE_DEVICES='$CUDA_VISIBLE_DEVICES' TDPRM_GPU0=$TDPRM_GPU0"
sleep "${DEMO_SECONDS:-3}"
mkdir -p out
touch "out/$GPUQ_JOB_ID.READY"
echo "$GPUQ_JOB_ID finished"
