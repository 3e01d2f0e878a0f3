#!/usr/bin/env bash
# Appends each gpuq event (its JSON line, from stdin) to a file, GPUQ_EVENTS_COPY or
# ./events-copy.jsonl. Use: gpuq run --plan plan.json --on-event examples/hooks/append.sh
set -euo pipefail
cat >> "${GPUQ_EVENTS_COPY:-events-copy.jsonl}"
