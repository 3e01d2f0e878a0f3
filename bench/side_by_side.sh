#!/usr/bin/env bash
# Two builds side by side in one run, alternating so that the machine's noise falls on both:
# simulate and status on 100k jobs (median of 5, ms) and the dispatch of a 60-job chain (a job's
# end to the next start, median of 3 runs' medians). Usage: bash bench/side_by_side.sh OLD_GPUQ NEW_GPUQ GEN_PLAN
# [chain [ROUNDS]] (chain: the hand-off alone, over ROUNDS runs each, 3 unless given)
# (build an old commit with: git worktree add /tmp/old REV; cmake -S /tmp/old -B /tmp/old/build
# -DCMAKE_BUILD_TYPE=RelWithDebInfo -DGPUQ_BENCHMARKS=ON; cmake --build /tmp/old/build --target gpuq gen_plan).
set -euo pipefail
OLD=$1 NEW=$2 GEN=$3 ONLY=${4:-} ROUNDS=${5:-3}
w=$(mktemp -d); trap 'rm -rf "$w"' EXIT; cd "$w"
export GPUQ_NODE_DIR=off
printf '#!/bin/sh\nprintf "0, 0\\n1, 0\\n2, 0\\n3, 0\\n4, 0\\n5, 0\\n6, 0\\n7, 0\\n"\n' > smi; chmod +x smi; export GPUQ_NVIDIA_SMI=$w/smi
median() { sort -g | awk '{a[NR]=$1} END {print (NR%2 ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2)}'; }
if [[ $ONLY != chain ]]; then
"$GEN" 100000 > p.json
"$GEN" 100000 1 --state s.state.json > s.json
for b in old new; do : > sim.$b; : > st.$b; done
for i in 1 2 3 4 5; do
  for b in old new; do
    G=$([[ $b == old ]] && echo "$OLD" || echo "$NEW")
    s=$(date +%s%N); "$G" simulate --plan p.json --all >/dev/null; echo $(( ($(date +%s%N) - s) / 1000000 )) >> sim.$b
    s=$(date +%s%N); "$G" status --plan s.json >/dev/null; echo $(( ($(date +%s%N) - s) / 1000000 )) >> st.$b
  done
done
for b in old new; do echo "$b: simulate 100k $(median < sim.$b) ms, status 100k $(median < st.$b) ms"; done
fi
# dispatch of a 60-job chain (one GPU), job's end to next start, median over the hand-offs
mkdir -p c; cd c
cat > job.sh <<'J'
echo "$EPOCHREALTIME" > "t/$GPUQ_JOB_ID.start"
sleep 0.05
echo "$EPOCHREALTIME" > "t/$GPUQ_JOB_ID.end"
J
n=60
{ echo '['; for i in $(seq 0 $((n-1))); do sep=$([[ $i -lt $((n-1)) ]] && echo , || true); dep=$([[ $i -gt 0 ]] && echo "\"deps\": [\"j$((i-1))\"]," || true)
  echo "{\"id\": \"j$i\", \"script\": \"job.sh\", \"gpus\": 1, $dep \"est_hours\": 0.01}$sep"; done; echo ']'; } > plan.json
for round in $(seq "$ROUNDS"); do
  for b in old new; do
    G=$([[ $b == old ]] && echo "$OLD" || echo "$NEW")
    rm -rf t plan.state.json* plan.events.jsonl logs plan.run* plan.predictions*; mkdir -p t
    "$G" run --plan plan.json --gpus 0 >/dev/null
    for i in $(seq 1 $((n-1))); do echo "$(cat t/j$i.start) - $(cat t/j$((i-1)).end)" | bc -l; done | median >> ../chain.$b
  done
done
for b in old new; do echo "$b: 60-job chain hand-off, median of $ROUNDS runs' medians: $(median < ../chain.$b | awk '{printf "%.1f ms", $1*1000}')"; done
