#!/usr/bin/env bash
# Snapshots of the code (issue 30), measured on a repository of FILES files and MB megabytes
# (default 10000 files, 1024 MB of random bytes, in 100 folders), committed, then 10 files
# edited and 5 untracked files added. Measures:
#   take      `gpuq add` of one job with "snapshot": "git" (one snapshot: git add -A on a copy of
#             the index, write-tree, commit-tree), and again with nothing changed (the same commit)
#   checkout  `gpuq run` of 1 job (`true`) from a snapshot, less the same run without snapshots
#   per job   `gpuq run` of 50 jobs from one snapshot, 49 of them after the first (deps): from the
#             first's end (its checkout made) to the last end, less the same without snapshots, over 49
#   next      the next snapshot (10 more files edited, `gpuq add`) while a job runs from the last
#             one's checkout: from the add to the new job's start, its checkout sharing the
#             unchanged files of the last (hard links), and the same made whole
# A first checkout writes every file: its time is the disk's, as a `cp -r` of the same files shows (on
# a VM whose disk is shared, both took from 3 to 30 s for 1 GB, from one minute to the next).
# Usage: bash bench/snapshot.sh [FILES] [MB]   (after a build: build/gpuq)
set -euo pipefail
cd "$(dirname "$0")/.."
FILES=${1:-10000}
MB=${2:-1024}
G=${GPUQ_BIN:-$PWD/build/gpuq}
[[ -x $G ]] || { echo "build gpuq first ($G)" >&2; exit 2; }
work=$(mktemp -d)
trap 'chmod -R u+w "$work" 2>/dev/null; rm -rf "$work"' EXIT
repo=$work/repo
mkdir -p "$repo"
now() { date +%s.%N; }
secs() { echo "$2 - $1" | bc; }
t0=$(now)
python3 - "$repo" "$FILES" "$MB" <<'PY'
import os, sys
repo, files, mb = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
size = mb * 1024 * 1024 // files
for k in range(files):
    d = f"{repo}/d{k % 100:02d}"
    os.makedirs(d, exist_ok=True)
    with open(f"{d}/f{k:05d}.bin", "wb") as f:
        f.write(os.urandom(size))
open(f"{repo}/train.py", "w").write("print('v1')\n")
PY
git -C "$repo" init -q
git -C "$repo" add -A
git -C "$repo" -c user.name=b -c user.email=b@b commit -qm bench
t1=$(now)
echo "repository: $FILES files, $(du -sm --exclude=.git "$repo" | cut -f1) MB, made and committed in $(secs "$t0" "$t1") s"
for k in $(seq 0 9); do head -c 1000 /dev/urandom >> "$repo/d0$k/f0000$k.bin"; done
for k in $(seq 1 5); do head -c 100000 /dev/urandom > "$repo/new$k.bin"; done
echo "print('v2')" > "$repo/train.py"

plan() {  # plan(NAME JOBS SNAPSHOT): a plan beside the repository, its jobs `true`
  local dir=$work/$1
  mkdir -p "$dir"
  python3 - "$dir/plan.json" "$2" "$3" <<'PY'
import json, sys
path, jobs, snap = sys.argv[1], int(sys.argv[2]), sys.argv[3]
json.dump({"workdir": "../repo", "settings": {"snapshot": snap, "gpus": "0"},
           "jobs": [dict({"id": f"j{k}", "script": "true.sh", "gpus": 0}, **({"deps": ["j0"]} if k else {}))
                    for k in range(jobs)]}, open(path, "w"))
PY
  echo "$dir/plan.json"
}
echo "true" > "$repo/true.sh"
git -C "$repo" add true.sh  # tracked (staged): the index changes once, before the measures
run_plan() {  # run_plan(PLAN): seconds of a `gpuq run` to its end
  local a b
  sync  # the last run's 1 GB checkout written out: each run starts with no writeback pending
  a=$(now)
  "$G" run --plan "$1" --gpu-probe none --max-retries 0 --poll 1 > "${1%.json}.out" 2>&1
  b=$(now)
  secs "$a" "$b"
}

sync
a=$(now); mkdir "$work/copy"; cp -r "$repo"/d* "$work/copy/"; sync; b=$(now)
copy=$(secs "$a" "$b")
rm -rf "$work/copy"
p=$(plan add 1 git)
a=$(now); "$G" add --plan "$p" --id new --gpus 0 -- true.sh > /dev/null; b=$(now)
take=$(secs "$a" "$b")
a=$(now); "$G" add --plan "$p" --id new2 --gpus 0 -- true.sh > /dev/null; b=$(now)
again=$(secs "$a" "$b")
same=$(python3 -c "import json,sys; s=json.load(open(sys.argv[1])); print('same commit' if s['new']['snapshot']==s['new2']['snapshot'] else 'another commit')" "${p%.json}.state.json")
one=$(run_plan "$(plan one-git 1 git)")
one_off=$(run_plan "$(plan one-off 1 off)")
many=$(run_plan "$(plan many-git 50 git)")
many_off=$(run_plan "$(plan many-off 50 off)")
after_first() {  # after_first(DIR): seconds from the end of j0 (the checkout made) to the last end
  python3 - "$1/plan.events.jsonl" <<'PY'
import json, sys
ends = {e["id"]: e["t"] for e in map(json.loads, open(sys.argv[1])) if e["event"] == "end"}
print(f"{max(ends.values()) - ends['j0']:.3f}")
PY
}
rest=$(after_first "$work/many-git")
rest_off=$(after_first "$work/many-off")
grep -h "snapshot" "$work/many-git/plan.out" | sed 's/^/  run: /'
checkout=$(echo "$one - $one_off" | bc)
per_job=$(echo "scale=4; ($rest - $rest_off) / 49" | bc)
# The next snapshot while the run still holds the last one's checkout (a job runs from it): `gpuq
# add` after 10 more files edited; the time from the add to the new job's end (it runs `true`
# once its checkout is made), with the checkout shared (hard links) or, where the running job
# has no snapshot, whole.
next_start() {  # next_start(NAME SNAPSHOT-OF-THE-RUNNING-JOB): seconds from the add to j1's end
  local dir=$work/$1
  mkdir -p "$dir"
  python3 - "$dir/plan.json" "$2" <<'PY'
import json, sys
json.dump({"workdir": "../repo", "settings": {"snapshot": "git", "gpus": "0"},
           "jobs": [{"id": "j0", "script": "gate.sh", "gpus": 0, "snapshot": sys.argv[2]}]}, open(sys.argv[1], "w"))
PY
  rm -f "$work/go"
  "$G" run --plan "$dir/plan.json" --gpu-probe none --max-retries 0 --poll 1 > "$dir/plan.out" 2>&1 &
  local pid=$!
  until grep -q '"event": *"start"' "$dir/plan.events.jsonl" 2>/dev/null; do sleep 0.1; done
  for k in $(seq 0 9); do head -c 1000 /dev/urandom >> "$repo/d1$k/f0001$k.bin"; done
  sync
  local a
  a=$(now)
  "$G" add --plan "$dir/plan.json" --id j1 --gpus 0 -- true.sh > /dev/null
  until grep '"j1"' "$dir/plan.events.jsonl" | grep -q '"event": *"end"'; do sleep 0.05; done
  touch "$work/go"
  wait "$pid" || true
  python3 - "$dir/plan.events.jsonl" "$a" <<'PY'
import json, sys
ends = {e["id"]: e["t"] for e in map(json.loads, open(sys.argv[1])) if e["event"] == "end"}
print(f"{ends['j1'] - float(sys.argv[2]):.3f}")
PY
}
echo "while [ ! -e \"$work/go\" ]; do sleep 0.1; done" > "$repo/gate.sh"
git -C "$repo" add gate.sh
next_shared=$(next_start next-shared git)
next_whole=$(next_start next-whole off)
printf 'cp -r of the files, and sync (reference) %.2f s\n' "$copy"
printf 'take (gpuq add)                 %8.2f s\n' "$take"
printf 'take again, nothing changed     %8.2f s (%s)\n' "$again" "$same"
printf 'run 1 job:  snapshot / off      %8.2f / %.2f s -> take + checkout %.2f s\n' "$one" "$one_off" "$checkout"
printf 'run 50 jobs: snapshot / off     %8.2f / %.2f s\n' "$many" "$many_off"
printf '49 jobs after the first: snapshot / off %.2f / %.2f s (their launch to the last end)\n' "$rest" "$rest_off"
printf 'each job beyond the first       %8.4f s\n' "$per_job"
printf 'next snapshot, from add to its job'"'"'s end: checkout shared / whole %.2f / %.2f s\n' "$next_shared" "$next_whole"
