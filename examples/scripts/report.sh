#!/usr/bin/env bash
# Collect the evaluations into one table.
set -euo pipefail
python -m mylab.report --out "$HOME/reports/$(date +%F).md"
