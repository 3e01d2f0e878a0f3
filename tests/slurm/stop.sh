#!/usr/bin/env bash
# Stops the Slurm that start.sh DIR started, by its pid files, and waits for it to go.
dir=${1:?usage: stop.sh DIR}
for f in "$dir/slurmd.pid" "$dir/slurmctld.pid" "$dir/munge/munged.pid"; do
  [ -s "$f" ] || continue
  pid=$(cat "$f")
  kill "$pid" 2>/dev/null || continue
  for i in $(seq 1 100); do kill -0 "$pid" 2>/dev/null || break; sleep 0.05; done
  kill -9 "$pid" 2>/dev/null || true
done
exit 0
