#!/usr/bin/env bash
# Tokenize the raw corpus once, on CPU.
set -euo pipefail
python -m mylab.data.prepare --in "$HOME/data/raw" --out "$HOME/data/train.jsonl"
