#!/usr/bin/env bash
# run --slurm on a one-node Slurm of its own (tests/slurm/start.sh): jobs submitted per second
# (100 ready jobs at once: first to last sbatch), and the latency from a dependency's end to its
# child's submission (a chain of 100 jobs: the job's last `date` to the child's sbatch call);
# medians over 100. Usage: bash bench/slurm.sh   (needs build/gpuq, slurm-wlm, munge; as root)
set -euo pipefail
cd "$(dirname "$0")/.."
repo=$PWD
G=${GPUQ_BIN:-$PWD/build/gpuq}
work=$(mktemp -d)
slurm=$work/slurm
trap 'bash "$repo/tests/slurm/stop.sh" "$slurm"; rm -rf "$work"' EXIT
GPUQ_SLURM_PORT=${GPUQ_SLURM_PORT:-16917} bash tests/slurm/start.sh "$slurm"
export SLURM_CONF=$slurm/slurm.conf
mkdir -p "$work/bin"
real=$(command -v sbatch)
printf '#!/bin/bash\nname=; prev=; for a in "$@"; do [ "$prev" = -J ] && name=$a; prev=$a; done\necho "$(date +%%s.%%N) $name" >> "%s/sbatch.calls"\nexec %s "$@"\n' "$work" "$real" > "$work/bin/sbatch"
chmod +x "$work/bin/sbatch"
median() { sort -g | awk '{a[NR]=$1} END {print (NR%2 ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2)}'; }

echo "== run --slurm: 100 ready jobs submitted"
mkdir -p "$work/wide" && cd "$work/wide"
printf 'true\n' > job.sh
python3 -c "import json; print(json.dumps({'jobs': [{'id': 'w%d' % i, 'script': 'job.sh', 'gpus': 0, 'est_hours': 0.01} for i in range(100)]}))" > plan.json
: > "$work/sbatch.calls"
PATH=$work/bin:$PATH "$G" run --plan plan.json --slurm > run.out
awk 'NR==1 {a=$1} {b=$1} END {printf "  %d sbatch calls in %.2f s: %.1f jobs submitted per second\n", NR, b-a, (NR-1)/(b-a)}' "$work/sbatch.calls"

echo "== run --slurm: a chain of 100 jobs, a dependency's end to its child's submission"
mkdir -p "$work/chain" && cd "$work/chain"
printf 'date +%%s.%%N > "ends/$GPUQ_JOB_ID"\n' > job.sh
mkdir -p ends
python3 -c "import json; print(json.dumps({'jobs': [dict({'id': 'c%d' % i, 'script': 'job.sh', 'gpus': 1, 'est_hours': 0.01}, **({'deps': ['c%d' % (i - 1)]} if i else {})) for i in range(101)]}))" > plan.json
: > "$work/sbatch.calls"
PATH=$work/bin:$PATH "$G" run --plan plan.json --slurm > run.out
for i in $(seq 1 100); do
  sub=$(awk -v n="gpuq-plan-c$i-1" '$2 == n {print $1}' "$work/sbatch.calls")
  echo "$sub - $(cat "ends/c$((i - 1))")" | bc -l
done | median | awk '{printf "  median %.0f ms over 100 (the parent job'"'"'s end to the child'"'"'s sbatch)\n", $1 * 1000}'
