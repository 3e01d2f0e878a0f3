#!/usr/bin/env bash
# gpuq's benchmarks, each printing its figures. Usage: bash bench/run.sh [quick|full] [simulate|nodes|status|run|limits|reload|top]
# (status also measures whole ticks of run on 10k- and 100k-job plans)
# (quick: skips 1M jobs and shortens the idle-CPU watch to 20 s; a section name runs only that part).
# Builds gpuq and the benchmarks into build/ first (-DGPUQ_BENCHMARKS=ON, the target
# gpuq_benchmarks); uses /usr/bin/time and a fake nvidia-smi.
# GPUQ_BIN and GPUQ_GEN name another build's gpuq and gen_plan (to measure a change before and after in one run).
set -euo pipefail
cd "$(dirname "$0")/.."
bash tools/deps.sh
cmake -S . -B build -DCMAKE_BUILD_TYPE=RelWithDebInfo -DGPUQ_BENCHMARKS=ON >/dev/null
cmake --build build -j"${JOBS:-2}" --target gpuq_benchmarks >/dev/null
quick=${1:-}; [[ $quick == full ]] && quick=
G=${GPUQ_BIN:-$PWD/build/gpuq} GEN=${GPUQ_GEN:-$PWD/build/gen_plan}
work=$(mktemp -d)
# Jobs of an interrupted run go on (a later run adopts them) and may still write to their logs.
trap 'for i in 1 2 3 4 5 6; do rm -rf "$work" 2>/dev/null && break; sleep 0.5; done' EXIT
printf '#!/bin/sh\nprintf "0, 0\\n1, 0\\n2, 0\\n3, 0\\n4, 0\\n5, 0\\n6, 0\\n7, 0\\n"\n' > "$work/nvidia-smi"
chmod +x "$work/nvidia-smi"
export GPUQ_NVIDIA_SMI=$work/nvidia-smi
# Each benchmark's run alone: a shared node directory would queue it behind another suite's runs.
export GPUQ_NODE_DIR=off

median() { sort -g | awk '{a[NR]=$1} END {print (NR%2 ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2)}'; }
pct() { sort -g | awk -v p="$1" '{a[NR]=$1} END {i=int(NR*p/100+0.999); if(i<1)i=1; print a[i]}'; }

section=${2:-all}
if [[ $section == all || $section == simulate ]]; then
echo "== simulate: wall time (median of 3) and peak memory"
sizes="1000 10000 100000 1000000"; [[ $quick ]] && sizes="1000 10000 100000"
for n in $sizes; do
  "$GEN" "$n" > "$work/p.json"
  for i in 1 2 3; do /usr/bin/time -f "%e %M" -o "$work/t" "$G" simulate --plan "$work/p.json" --all >/dev/null 2>&1; cat "$work/t"; done > "$work/times"
  printf '  %8d jobs: %6.2f s, %7.1f MB\n' "$n" "$(cut -d' ' -f1 "$work/times" | median)" \
    "$(cut -d' ' -f2 "$work/times" | median | awk '{print $1/1024}')"
done

fi
if [[ $section == all || $section == nodes ]]; then
echo "== simulate --nodes N (8 GPUs a node): wall time, median of 3, 100000 jobs"
# Its one reservation of GPU 7 made a Slurm reservation: --nodes refuses GPU ids, as run --slurm does.
"$GEN" 100000 | sed 's/"gpus": \[7\], "jobs"/"gpus": [7], "slurm_reservation": "evals", "jobs"/' > "$work/p.json"
for nodes in 1 8 64 512 4096; do
  for i in 1 2 3; do /usr/bin/time -f "%e %M" -o "$work/t" "$G" simulate --plan "$work/p.json" --all --nodes "$nodes" >/dev/null 2>&1; cat "$work/t"; done > "$work/times"
  printf '  %5d node(s): %6.2f s, %7.1f MB\n' "$nodes" "$(cut -d' ' -f1 "$work/times" | median)" \
    "$(cut -d' ' -f2 "$work/times" | median | awk '{print $1/1024}')"
done
fi
if [[ $section == all || $section == status ]]; then
echo "== status (the whole command: plan and state read), median of 7"
for n in 10000 100000; do
  "$GEN" "$n" 1 --state "$work/s.state.json" > "$work/s.json"
  "$G" status --plan "$work/s.json" >/dev/null  # the files in the page cache, as when typed again
  for i in 1 2 3 4 5 6 7; do  # wall time to the millisecond (time's %e has 10 ms steps), peak memory
    s=$(date +%s%N)
    /usr/bin/time -f "%M" -o "$work/t" "$G" status --plan "$work/s.json" >/dev/null
    echo "$(( ($(date +%s%N) - s) / 1000000 )) $(cat "$work/t")"
  done > "$work/times"
  printf '  status   %6d jobs: %4d ms (%d to %d), %6.1f MB\n' "$n" "$(cut -d' ' -f1 "$work/times" | median)" \
    "$(cut -d' ' -f1 "$work/times" | sort -n | head -1)" "$(cut -d' ' -f1 "$work/times" | sort -n | tail -1)" \
    "$(cut -d' ' -f2 "$work/times" | median | awk '{print $1/1024}')"
done
echo "   where status spends it at 100000 jobs (GPUQ_PHASES=1, median of 5, ms):"
for i in 1 2 3 4 5; do GPUQ_PHASES=1 "$G" status --plan "$work/s.json" 2>&1 >/dev/null | grep '^gpuq phase'; done |
  awk '{v=$(NF-1); k=$3; for (i=4; i<NF-1; i++) k=k" "$i; a[k]=a[k]" "v} END {for (k in a) print k":"a[k]}' |
  while IFS=: read -r k vals; do printf '     %-16s %7.1f\n' "$k" "$(tr ' ' '\n' <<<"$vals" | grep . | median)"; done
if [[ -x build/bench_core ]]; then
  echo "   in-process parts (Google Benchmark, median of 3):"
  build/bench_core --benchmark_filter='DecideTick|StatusRows|StateDecode|StateEncode|PlanParse|Outlook|LiveSimulate' \
    --benchmark_repetitions=3 --benchmark_report_aggregates_only=true 2>/dev/null | grep median | sed 's/^/  /'
fi

echo "== one tick of run, whole (state, refresh, probe, decisions, starts, save, watches), GPUQ_PHASES=1"
for n in 10000 100000; do
  d=$work/tick$n; mkdir -p "$d/jobs"
  "$GEN" "$n" 1 --state "$d/p.state.json" > "$d/p.json"
  sed -i 's/"status": "running"/"status": "pending"/' "$d/p.state.json"  # so that jobs are ready at once
  for s in prep train eval sweep report; do echo 'sleep 0.3' > "$d/jobs/$s.sh"; done
  (cd "$d" && GPUQ_PHASES=1 timeout 15 "$G" run --plan p.json >/dev/null 2>phases || true)
  # A tick is every phase from the state to the finished check; the wait before it is not.
  awk '/^gpuq phase tick:/ {v=$(NF-1); if ($4 == "wait") {if (t > 0) print t; t = 0} else t += v}' "$d/phases" > "$work/ticks"
  printf '  %6d jobs: %d ticks, median %.1f ms, 90th percentile %.1f ms\n' "$n" "$(wc -l < "$work/ticks")" \
    "$(median < "$work/ticks")" "$(pct 90 < "$work/ticks")"
  awk '/^gpuq phase tick:/ && $4 != "wait" {v=$(NF-1); k=$4; for (i=5; i<NF-1; i++) k=k" "$i; a[k]=a[k]" "v} END {for (k in a) print k":"a[k]}' "$d/phases" |
    while IFS=: read -r k vals; do printf '     %-16s median %6.1f ms\n' "$k" "$(tr ' ' '\n' <<<"$vals" | grep . | median)"; done
done

fi
if [[ $section == all || $section == probe ]]; then
echo "== the GPU probe: one reading, NVML against nvidia-smi (build/bench_probe)"
echo "   (NVML: the tests' fake libnvidia-ml.so.1 over 8 GPUs; nvidia-smi: a fake script, and one that"
echo "    sleeps 0.3 s as a real one takes 0.1-0.6 s; on a real node give the real library and command)"
lib=${GPUQ_NVML_LIB:-$PWD/build/fake_nvml/libnvidia-ml.so.1}
{ echo '{"devices": ['; for i in 0 1 2 3 4 5 6 7; do
  echo "{\"bus_id\": \"00000000:$((16 + i)):00.0\", \"used_mib\": 300, \"util\": 0, \"processes\": [{\"pid\": $$, \"used_mib\": 100}]}$([[ $i -lt 7 ]] && echo ,)"
done; echo ']}'; } > "$work/nvml.json"
printf '#!/bin/sh\nsleep 0.3\nprintf "0, 0\\n1, 0\\n2, 0\\n3, 0\\n4, 0\\n5, 0\\n6, 0\\n7, 0\\n"\n' > "$work/slow-smi"
chmod +x "$work/slow-smi"
GPUQ_FAKE_NVML=$work/nvml.json build/bench_probe "$lib" "$work/nvidia-smi" 30
GPUQ_FAKE_NVML=$work/nvml.json build/bench_probe "$lib" "$work/slow-smi" 10 | grep -v NVML
fi
if [[ $section == all || $section == run ]]; then
echo "== dispatch latency: a job's exit to the next job's start, at the default --poll 20"
echo "   (from the last line of one job's script to the first line of the next's: bash's \$EPOCHREALTIME, no fork)"
d=$work/chain; mkdir -p "$d/t"
cat > "$d/job.sh" <<'J'
echo "$EPOCHREALTIME" > "t/$GPUQ_JOB_ID.start"
sleep 0.05
echo "$EPOCHREALTIME" > "t/$GPUQ_JOB_ID.end"
J
n=80
{ echo '['; for i in $(seq 0 $((n-1))); do
  sep=$([[ $i -lt $((n-1)) ]] && echo , || true)
  dep=$([[ $i -gt 0 ]] && echo "\"deps\": [\"j$((i-1))\"]," || true)
  echo "{\"id\": \"j$i\", \"script\": \"job.sh\", \"gpus\": 1, $dep \"est_hours\": 0.01}$sep"; done; echo ']'; } > "$d/plan.json"
chain() {  # extra flags of run; prints the median and 99th percentile
  rm -rf "$d/t" "$d/plan.state.json" "$d/plan.events.jsonl" "$d/logs"; mkdir -p "$d/t"
  (cd "$d" && "$G" run --plan plan.json --gpus 0 "$@" >/dev/null)
  for i in $(seq 1 $((n-1))); do
    echo "$(cat "$d/t/j$i.start") - $(cat "$d/t/j$((i-1)).end")" | bc -l
  done > "$work/lat"
  printf 'median %.1f ms, 99th percentile %.1f ms (%d hand-offs)' \
    "$(median < "$work/lat" | awk '{print $1*1000}')" "$(pct 99 < "$work/lat" | awk '{print $1*1000}')" $((n-1))
}
echo "  $(chain)"
if "$G" run --help | grep -q -- --gpu-probe; then
  printf '#!/bin/sh\nsleep 0.3\nprintf "0, 0\\n"\n' > "$work/slow-smi"; chmod +x "$work/slow-smi"
  echo "  with an nvidia-smi that takes 0.3 s (read in the background): $(GPUQ_NVIDIA_SMI=$work/slow-smi chain --gpu-probe nvidia-smi)"
fi
if "$G" run --help | grep -q -- --on-event; then
  echo "  with --on-event 'sleep 5' (a hook that takes 5 s, for every event): $(chain --on-event 'sleep 5' --hook-timeout 6)"
fi

# The jobs a benchmark's run left running (it was killed): their process groups, by the pids its
# state records, and nothing else: a pattern (pkill -f) would end other users' processes too.
end_jobs_of() {
  for p in $(grep -o '"pid": [0-9]*' "$1/plan.state.json" 2>/dev/null | grep -o '[0-9]*'); do kill -9 -"$p" 2>/dev/null || true; done
}

echo "== overhead of a run: 400 jobs of 0.2 s on 8 GPUs (ideal makespan 10 s)"
d=$work/many; mkdir -p "$d"; echo 'sleep 0.2' > "$d/job.sh"
{ echo '['; for i in $(seq 0 399); do echo "{\"id\": \"j$i\", \"script\": \"job.sh\", \"gpus\": 1, \"est_hours\": 0.01}$([[ $i -lt 399 ]] && echo ,)"; done; echo ']'; } > "$d/plan.json"
start=$(date +%s.%N); (cd "$d" && "$G" run --plan plan.json >/dev/null); end=$(date +%s.%N)
echo "$end - $start" | bc -l | awk '{printf "  wall %.2f s, %.1f%% over ideal\n", $1, ($1/10-1)*100}'

watch=60; [[ $quick ]] && watch=20
echo "== CPU used by run while its 8 jobs sleep (${watch} s)"
d=$work/idle; mkdir -p "$d"; echo "sleep $((watch + 10))" > "$d/job.sh"
{ echo '['; for i in $(seq 0 7); do echo "{\"id\": \"j$i\", \"script\": \"job.sh\", \"gpus\": 1}$([[ $i -lt 7 ]] && echo ,)"; done; echo ']'; } > "$d/plan.json"
(cd "$d" && exec "$G" run --plan plan.json >/dev/null) & pid=$!
sleep 2
ticks() { awk '{print $14 + $15}' "/proc/$pid/stat"; }
a=$(ticks); sleep "$watch"; b=$(ticks)
hz=$(getconf CLK_TCK)
echo "$a $b $hz $watch" | awk '{printf "  %d clock ticks in %d s: %.3f%% of one core\n", $2-$1, $4, ($2-$1)/$3/$4*100}'
kill "$pid"; wait "$pid" 2>/dev/null || true
end_jobs_of "$d"
fi
if [[ $section == all || $section == reload ]]; then
echo "== reload on edit: the plan's rename to the start of a newly added ready job, at the default --poll 20"
echo "   (50 edits, each a temporary file renamed over the plan; the job's first line takes bash's \$EPOCHREALTIME)"
d=$work/reload; mkdir -p "$d/t"
echo 'echo "$EPOCHREALTIME" > "t/$GPUQ_JOB_ID.start"' > "$d/job.sh"
echo 'sleep 600' > "$d/hold.sh"
plan_with() {  # the plan with jobs e1..eN (0 GPUs, ready at once) after a job that keeps run going
  { echo '[{"id": "hold", "script": "hold.sh", "gpus": 1}'
    for i in $(seq 1 "$1"); do echo ",{\"id\": \"e$i\", \"script\": \"job.sh\", \"gpus\": 0}"; done
    echo ']'; } > "$d/.plan.tmp"
}
plan_with 0; mv "$d/.plan.tmp" "$d/plan.json"
(cd "$d" && exec "$G" run --plan plan.json >/dev/null) & pid=$!
until [[ -s $d/plan.state.json ]] && grep -q running "$d/plan.state.json"; do sleep 0.05; done
for i in $(seq 1 50); do
  plan_with "$i"
  t0=$EPOCHREALTIME; mv "$d/.plan.tmp" "$d/plan.json"
  until [[ -s $d/t/e$i.start ]]; do sleep 0.001; done
  echo "$(cat "$d/t/e$i.start") - $t0" | bc -l
  sleep 0.3  # past the settle re-check, so that each edit is measured alone
done > "$work/rl"
printf '  median %.1f ms, 90th percentile %.1f ms, max %.1f ms (50 edits)\n' "$(median < "$work/rl" | awk '{print $1*1000}')" \
  "$(pct 90 < "$work/rl" | awk '{print $1*1000}')" "$(sort -g "$work/rl" | tail -1 | awk '{print $1*1000}')"
kill "$pid"; wait "$pid" 2>/dev/null || true
end_jobs_of "$d"
if [[ -x build/bench_core ]]; then
  echo "   a reload of a 10,000-job plan in-process (read, parse and check, diff; Google Benchmark, median of 5):"
  build/bench_core --benchmark_filter='Reload' --benchmark_repetitions=5 --benchmark_report_aggregates_only=true 2>/dev/null |
    grep median | sed 's/^/  /'
fi
fi
if [[ $section == all || $section == limits ]]; then
echo "== time limits: from a job's deadline (the state's start + its limit) to its SIGTERM, at the default --poll 20"
echo "   (50 jobs at once, limits 2-5.5 s; the job's TERM trap takes bash's \$EPOCHREALTIME)"
d=$work/limits; mkdir -p "$d/t"
cat > "$d/job.sh" <<'J'
trap 'echo "$EPOCHREALTIME" > "t/$GPUQ_JOB_ID.term"; exit 0' TERM
sleep 1000 & wait $!
J
{ echo '['; for i in $(seq 0 49); do
  limit=$(awk -v i="$i" 'BEGIN {printf "%.9f", (2 + i * 0.07) / 3600}')
  echo "{\"id\": \"j$i\", \"script\": \"job.sh\", \"gpus\": 0, \"time_limit_hours\": $limit}$([[ $i -lt 49 ]] && echo ,)"
done; echo ']'; } > "$d/plan.json"
# Every job is stopped at its limit: run ends with exit 3 (a job failed), which is what is measured.
rc=0; (cd "$d" && "$G" run --plan plan.json --gpus 0 >/dev/null) || rc=$?
[[ $rc == 3 ]] || { echo "run exited $rc; 3 was due (every job over its limit)" >&2; exit 1; }
python3 - "$d" > "$work/lim" <<'P'
import json, sys
d = sys.argv[1]
plan = {j["id"]: j for j in json.load(open(f"{d}/plan.json"))}
state = json.load(open(f"{d}/plan.state.json"))
for i, s in state.items():
    term = float(open(f"{d}/t/{i}.term").read())
    print(term - (s["start"] + plan[i]["time_limit_hours"] * 3600))
P
printf '  median %.1f ms, 99th percentile %.1f ms, worst %.1f ms (%d jobs)\n' \
  "$(median < "$work/lim" | awk '{print $1*1000}')" "$(pct 99 < "$work/lim" | awk '{print $1*1000}')" \
  "$(sort -g "$work/lim" | tail -1 | awk '{print $1*1000}')" "$(wc -l < "$work/lim")"
fi
if [[ $section == all || $section == top ]]; then
echo "== top: a refresh of a 10000-job plan in a terminal (tmux, 200x50), and an idle view's CPU"
# A refresh is what top does when the state changes: the look (plan, state, GPUs), the
# prediction, the screen, the draw (GPUQ_PHASES into a file: top owns the terminal's stderr),
# from its "start" (the wait before it is not counted).
# The state is touched 11 times, 1.5 s apart (top refreshes at most once a second).
"$GEN" 10000 1 --state "$work/t.state.json" > "$work/t.json"
sock=gpuq-bench-$$
tmux -L "$sock" -f /dev/null new-session -d -x 200 -y 50 \
  "exec env GPUQ_PHASES=$work/top.phases LANG=C.UTF-8 $G top --plan $work/t.json"
sleep 3
for i in $(seq 11); do touch "$work/t.state.json"; sleep 1.5; done
awk '/phase start/ {t=0; on=1; next} on {t+=$(NF-1)} /phase draw/ && on {print t; on=0}' "$work/top.phases" | tail -n +2 > "$work/refresh"
printf '  refresh, 10000 jobs: median %.1f ms (%s to %s, %d refreshes after the first)\n' "$(median < "$work/refresh")" \
  "$(sort -g "$work/refresh" | head -1)" "$(sort -g "$work/refresh" | tail -1)" "$(wc -l < "$work/refresh")"
echo "   where a refresh spends it (median, ms):"
awk '/phase start/ {n++; next} n>1 {v=$(NF-1); k=$3; for (i=4; i<NF-1; i++) k=k" "$i; a[k]=a[k]" "v} END {for (k in a) print k":"a[k]}' \
  "$work/top.phases" | while IFS=: read -r k vals; do printf '     %-16s %7.1f\n' "$k" "$(tr ' ' '\n' <<<"$vals" | grep . | median)"; done
# Idle: nothing changes for a while; top's CPU time over it, from /proc (utime + stime).
pid=$(tmux -L "$sock" list-panes -F '#{pane_pid}')
idle=60; [[ $quick ]] && idle=20
cpu() { awk '{print $14 + $15}' "/proc/$pid/stat"; }
a=$(cpu); sleep "$idle"; b=$(cpu)
printf '  idle view, 10000 jobs, %d s: %.2f%% of a core (%d clock ticks of %d)\n' "$idle" \
  "$(echo "($b - $a) * 100 / ($idle * $(getconf CLK_TCK))" | bc -l)" "$((b - a))" "$((idle * $(getconf CLK_TCK)))"
tmux -L "$sock" kill-server
fi
