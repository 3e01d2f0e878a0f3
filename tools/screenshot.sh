#!/usr/bin/env bash
# Renders the example plan's Gantt chart in headless Chromium, as README shows it:
# examples/plan-timeline.svg and examples/plan-timeline.png. Installs chromium if missing.
set -euo pipefail
cd "$(dirname "$0")/.."
command -v chromium >/dev/null || { sudo=""; [[ $(id -u) -ne 0 ]] && sudo=sudo; $sudo apt-get install -y -qq chromium; }
bash tools/build.sh
build/gpuq simulate --plan examples/plan.json --all --svg examples/plan-timeline.svg >/dev/null
height=$(grep -o 'height="[0-9]*"' examples/plan-timeline.svg | head -1 | tr -dc 0-9)
profile=$(mktemp -d); trap 'rm -rf "$profile"' EXIT
chromium --headless --no-sandbox --disable-gpu --disable-quic --no-first-run --disable-background-networking \
  --disable-component-update --disable-sync --user-data-dir="$profile" --hide-scrollbars \
  --window-size=1400,"$height" --screenshot="$PWD/examples/plan-timeline.png" "file://$PWD/examples/plan-timeline.svg"
