#!/usr/bin/env bash
# What reading jobs' progress costs `run` (issue 29): dispatch latency and idle CPU with 8 jobs
# printing a tqdm bar 10 times a second, for two builds measured in one interleaved run.
# Usage: bash bench/progress.sh [NEW_GPUQ [OLD_GPUQ [ROUNDS [WATCH_S]]]]
#   (defaults: build/gpuq, /work/main/build/gpuq, 3 rounds, 20 s of idle watch per round and build)
set -euo pipefail
cd "$(dirname "$0")/.."
NEW=$(realpath "${1:-build/gpuq}") OLD=$(realpath "${2:-/work/main/build/gpuq}")
rounds=${3:-3} watch=${4:-20}
work=$(mktemp -d)
trap 'touch "$work"/*/stop 2>/dev/null || true; sleep 0.3; rm -rf "$work"' EXIT
printf '#!/bin/sh\nprintf "0, 0\\n1, 0\\n2, 0\\n3, 0\\n4, 0\\n5, 0\\n6, 0\\n7, 0\\n"\n' > "$work/nvidia-smi"
chmod +x "$work/nvidia-smi"
export GPUQ_NVIDIA_SMI=$work/nvidia-smi
median() { sort -g | awk '{a[NR]=$1} END {print (NR%2 ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2)}'; }
pct() { sort -g | awk -v p="$1" '{a[NR]=$1} END {i=int(NR*p/100+0.999); if(i<1)i=1; print a[i]}'; }

# A tqdm-like bar on stderr, 10 updates a second, until ./stop appears.
bar='i=0; while [ ! -e stop ]; do printf "\rtrain: %3d%%|#####     | %d/100000 [00:01<00:09, 10.0it/s]" $((i/1000)) $i >&2; i=$((i+1)); sleep 0.1; done'

# Dispatch: a chain of n jobs on GPU 0 (each prints a bar for 0.05 s), while 7 jobs print bars
# on GPUs 1-7; the last of the chain stops them. Latency: one job's last line to the next's first.
n=40
chain_plan() {
  local d=$1; mkdir -p "$d/t"
  cat > "$d/job.sh" <<'J'
echo "$EPOCHREALTIME" > "t/$GPUQ_JOB_ID.start"
printf '\r 1/2 [00:00]' >&2; sleep 0.05; printf '\r 2/2 [00:00]\n' >&2
echo "$EPOCHREALTIME" > "t/$GPUQ_JOB_ID.end"
[ "$GPUQ_JOB_ID" = "j39" ] && touch stop
true
J
  echo "$bar" > "$d/bar.sh"
  { echo '['; for i in $(seq 0 6); do echo "{\"id\": \"bar$i\", \"script\": \"bar.sh\", \"gpus\": 1, \"est_hours\": 0.01},"; done
    for i in $(seq 0 $((n-1))); do
      sep=$([[ $i -lt $((n-1)) ]] && echo , || true)
      dep=$([[ $i -gt 0 ]] && echo "\"deps\": [\"j$((i-1))\"]," || true)
      echo "{\"id\": \"j$i\", \"script\": \"job.sh\", \"gpus\": 1, \"priority\": 90, $dep \"est_hours\": 0.01}$sep"; done
    echo ']'; } > "$d/plan.json"
}
chain() {  # gpuq binary; appends the hand-offs' latencies (ms) to $work/lat.<tag>
  local G=$1 tag=$2 d=$work/chain-$2
  rm -rf "$d"; chain_plan "$d"
  (cd "$d" && "$G" run --plan plan.json --gpus 0-7 >/dev/null)
  for i in $(seq 1 $((n-1))); do
    echo "($(cat "$d/t/j$i.start") - $(cat "$d/t/j$((i-1)).end")) * 1000" | bc -l
  done >> "$work/lat.$tag"
}

# Idle: 8 jobs print bars; run's CPU (utime + stime, clock ticks) over `watch` seconds.
idle() {  # gpuq binary, tag; appends the percent of one core to $work/cpu.<tag>
  local G=$1 tag=$2 d=$work/idle-$2
  rm -rf "$d"; mkdir -p "$d"; echo "$bar" > "$d/bar.sh"
  { echo '['; for i in $(seq 0 7); do echo "{\"id\": \"bar$i\", \"script\": \"bar.sh\", \"gpus\": 1}$([[ $i -lt 7 ]] && echo ,)"; done; echo ']'; } > "$d/plan.json"
  (cd "$d" && exec "$G" run --plan plan.json --gpus 0-7 >/dev/null) & local pid=$!
  sleep 2
  local a b; a=$(awk '{print $14 + $15}' "/proc/$pid/stat"); sleep "$watch"; b=$(awk '{print $14 + $15}' "/proc/$pid/stat")
  echo "$a $b $(getconf CLK_TCK) $watch" | awk '{printf "%.4f\n", ($2-$1)/$3/$4*100}' >> "$work/cpu.$tag"
  touch "$d/stop"; wait "$pid" 2>/dev/null || true
}

for r in $(seq 1 "$rounds"); do
  for b in old new; do  # interleaved: old, new, old, new, ...
    G=$OLD; [[ $b == new ]] && G=$NEW
    chain "$G" "$b"
    idle "$G" "$b"
  done
done
echo "gpuq run with 8 jobs printing a tqdm bar 10 times a second ($rounds interleaved rounds)"
for b in old new; do
  G=$OLD; [[ $b == new ]] && G=$NEW
  printf '  %-3s %s\n' "$b" "$G"
  printf '      dispatch latency: median %.1f ms, 99th percentile %.1f ms (%d hand-offs)\n' \
    "$(median < "$work/lat.$b")" "$(pct 99 < "$work/lat.$b")" "$(wc -l < "$work/lat.$b")"
  printf '      idle CPU: median %.3f%% of one core (rounds: %s)\n' "$(median < "$work/cpu.$b")" "$(tr '\n' ' ' < "$work/cpu.$b")"
done
