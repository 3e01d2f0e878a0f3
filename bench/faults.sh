#!/usr/bin/env bash
# What the durable start record costs (issue 41): dispatch latency, a job's exit to the next's
# start, on a chain of 60 one-GPU jobs, for two builds side by side in one run, rounds interleaved
# (the machines are shared and noisy: medians and their ratio).
# Usage: bash bench/faults.sh BASE_GPUQ [NEW_GPUQ] [ROUNDS]   (NEW_GPUQ: build/gpuq)
set -euo pipefail
cd "$(dirname "$0")/.."
base=${1:?the gpuq to compare with (a build of the commit before)}
new=${2:-$PWD/build/gpuq} rounds=${3:-5}
work=$(mktemp -d -p "${BENCH_DIR:-$PWD/build}")
trap 'rm -rf "$work"' EXIT
printf '#!/bin/sh\nprintf "0, 0\\n1, 0\\n2, 0\\n3, 0\\n4, 0\\n5, 0\\n6, 0\\n7, 0\\n"\n' > "$work/nvidia-smi"
chmod +x "$work/nvidia-smi"
export GPUQ_NVIDIA_SMI=$work/nvidia-smi GPUQ_NVML_LIB=/nonexistent/libnvidia-ml.so.1
median() { sort -g | awk '{a[NR]=$1} END {print (NR%2 ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2)}'; }
n=60 d=$work/chain
mkdir -p "$d"
cat > "$d/job.sh" <<'J'
echo "$EPOCHREALTIME" > "t/$GPUQ_JOB_ID.start"
sleep 0.05
echo "$EPOCHREALTIME" > "t/$GPUQ_JOB_ID.end"
J
{ echo '['; for i in $(seq 0 $((n-1))); do
  sep=$([[ $i -lt $((n-1)) ]] && echo , || true)
  dep=$([[ $i -gt 0 ]] && echo "\"deps\": [\"j$((i-1))\"]," || true)
  echo "{\"id\": \"j$i\", \"script\": \"job.sh\", \"gpus\": 1, $dep \"est_hours\": 0.01}$sep"; done; echo ']'; } > "$d/plan.json"
chain() {  # gpuq binary; appends the hand-offs' latencies (ms) to $2
  rm -rf "$d/t" "$d/plan.state.json" "$d/plan.state.json.bak" "$d/plan.events.jsonl" "$d/logs"; mkdir -p "$d/t"
  (cd "$d" && "$1" run --plan plan.json --gpus 0 >/dev/null)
  for i in $(seq 1 $((n-1))); do
    echo "($(cat "$d/t/j$i.start") - $(cat "$d/t/j$((i-1)).end")) * 1000" | bc -l
  done >> "$2"
}
for r in $(seq 1 "$rounds"); do chain "$base" "$work/base"; chain "$new" "$work/new"; done
b=$(median < "$work/base") m=$(median < "$work/new")
printf 'dispatch latency, chain of %d jobs, %d rounds each, interleaved (folder on %s):\n' "$n" "$rounds" \
  "$(df -T "$d" | awk 'NR==2 {print $2}')"
printf '  base %s: median %.2f ms\n  new  %s: median %.2f ms\n  ratio new/base: %.3f\n' "$base" "$b" "$new" "$m" \
  "$(echo "$m / $b" | bc -l)"
