#!/usr/bin/env bash
# The long power-cut run (issue 50; tests/crash/power-cut, whose header says what it does): every
# scenario (a: retries and dependents, b: a plan edit while running, c: a preemption, d: two users
# on one node directory) with 8 random crash states per crash point (thousands of states, each
# checked) and hundreds of distinct states restarted, then the two must-find modes (eatmydata,
# no-dir-fsync) on every scenario. ctest's crash.power_cut is the capped version of this. Needs root, strace, eatmydata.
# Usage: [SEED=50] [STATES=300] [PER_POINT=8] bash bench/power_cut.sh [GPUQ]   (GPUQ: build/gpuq)
# STATES caps the distinct states restarted per scenario (default 300, about a second each;
# 0: every distinct state, hours). Every state is checked for records lost without a restart.
set -euo pipefail
cd "$(dirname "$0")/.."
gpuq=${1:-$PWD/build/gpuq}
seed=${SEED:-50} states=${STATES:-300} per_point=${PER_POINT:-8}
test=tests/crash/power-cut
start=$SECONDS
log=$(mktemp)
trap 'rm -f "$log"' EXIT
rc=0
python3 "$test" "$gpuq" --seed "$seed" --scenario all --per-point "$per_point" --states "$states" | tee -a "$log" ||
  rc=$?
for mode in eatmydata no-dir-fsync; do
  # must find: exit 0 only when it found losses; a few restarts are enough to show what it finds
  python3 "$test" "$gpuq" --seed "$seed" --scenario all --mode "$mode" --per-point "$per_point" --states 20 |
    tee -a "$log" || rc=1
done
echo
echo "power-cut bench, seed $seed, $((SECONDS - start)) s:"
grep -E '^power-cut: scenario [a-d][: ]' "$log" | grep -E 'crash points, [0-9]+ states, [0-9]+ distinct, [0-9]+ restarted' ||
  true
awk '/crash points, [0-9]+ states, [0-9]+ distinct, [0-9]+ restarted/ {
       m = ($0 ~ /\(mode /) ? "must-find modes" : "normal"; seen[m] = 1
       for (i = 1; i < NF; i++) { if ($(i+1) == "crash") p[m] += $i; if ($(i+1) == "states,") s[m] += $i
                                  if ($(i+1) == "distinct,") d[m] += $i; if ($(i+1) == "restarted,") r[m] += $i
                                  if ($(i+1) == "violations") v[m] += $i } }
     END { for (m in seen) printf "total, %s: %d crash points, %d states, %d distinct, %d restarted, %d violations\n",
                                  m, p[m], s[m], d[m], r[m], v[m] }' "$log"
exit "$rc"
