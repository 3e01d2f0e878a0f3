#!/usr/bin/env bash
# The README's picture of `gpuq top`: a real session, made here. A plan like the README's
# (training arms, evaluations, a sweep) runs under `gpuq run` with bash jobs that report
# progress and a fake nvidia-smi (eight GPUs in use); `gpuq top` runs beside it in tmux
# (140x38); its screen is captured with its colors (capture-pane -e), turned into HTML, and
# rendered by headless Chromium into examples/top.png. Installs chromium and tmux if missing.
set -euo pipefail
cd "$(dirname "$0")/.."
for c in chromium tmux; do
  command -v $c >/dev/null || { sudo=""; [[ $(id -u) -ne 0 ]] && sudo=sudo; $sudo apt-get install -y -qq $c; }
done
bash tools/build.sh
G=$PWD/build/gpuq
work=$(mktemp -d)
sock=gpuq-shot-$$
runpid=
cleanup() {  # the run, top, and each job's process group (the state names them)
  tmux -L "$sock" kill-server 2>/dev/null || true
  [[ $runpid ]] && kill -9 "$runpid" 2>/dev/null
  python3 -c 'import json, sys; [print(e["pid"]) for e in json.load(open(sys.argv[1])).values() if e.get("pid")]' \
    "$work/plan.state.json" 2>/dev/null | while read -r pid; do kill -9 -- "-$pid" 2>/dev/null || true; done
  sleep 0.5
  rm -rf "$work"
}
trap cleanup EXIT
cat > "$work/job.sh" <<'EOF'
#!/bin/bash
# job.sh STEPS SECONDS [FROM]: a training of STEPS steps (resumed at step FROM), its progress in GPUQ_PROGRESS.
n=$1; d=$2
for i in $(seq "${3:-1}" "$n"); do echo "step $i/$n loss $(awk -v i="$i" 'BEGIN {printf "%.3f", 2.5 / (1 + i / 40)}')"; echo "$i/$n" > "$GPUQ_PROGRESS"; sleep "$d"; done
EOF
chmod +x "$work/job.sh"
printf '0, 5, 0\n1, 5, 0\n2, 5, 0\n3, 5, 0\n4, 5, 0\n5, 5, 0\n6, 5, 0\n7, 5, 0\n' > "$work/smi.txt"  # idle until the jobs start
printf '#!/bin/sh\ncat %s/smi.txt\n' "$work" > "$work/nvidia-smi"
chmod +x "$work/nvidia-smi"
cat > "$work/plan.json" <<'EOF'
{"jobs": [
 {"id": "train_arm_a", "script": "job.sh", "args": ["3000", "1", "1900"], "gpus": 2, "priority": 20, "est_hours": 1.2},
 {"id": "train_arm_b", "script": "job.sh", "args": ["3000", "1.3", "900"], "gpus": 2, "priority": 20, "est_hours": 1.5},
 {"id": "eval_arm_a", "script": "job.sh", "args": ["100", "1"], "gpus": 1, "priority": 5, "est_hours": 0.4, "deps": ["train_arm_a"]},
 {"id": "eval_arm_b", "script": "job.sh", "args": ["100", "1"], "gpus": 1, "priority": 5, "est_hours": 0.4, "deps": ["train_arm_b"]},
 {"id": "train_wide", "script": "job.sh", "args": ["100", "1"], "gpus": 4, "priority": 30, "est_hours": 2, "deps": ["sweep_lr_1e-4"]},
 {"id": "sweep_lr_1e-4", "script": "job.sh", "args": ["2000", "1", "1500"], "gpus": 1, "priority": 40, "est_hours": 0.6},
 {"id": "sweep_lr_3e-4", "script": "job.sh", "args": ["2000", "2"], "gpus": 1, "priority": 40, "est_hours": 0.9},
 {"id": "sweep_lr_1e-3", "script": "job.sh", "args": ["2000", "1", "600"], "gpus": 1, "priority": 40, "est_hours": 0.7},
 {"id": "sweep_lr_3e-3", "script": "job.sh", "args": ["2000", "1"], "gpus": 1, "priority": 40, "est_hours": 0.7},
 {"id": "report", "script": "job.sh", "args": ["10", "1"], "gpus": 0, "priority": 50, "est_hours": 0.1,
  "deps": ["after:eval_arm_a", "after:eval_arm_b", "after:train_wide"]}
]}
EOF
env=(GPUQ_NVIDIA_SMI="$work/nvidia-smi" GPUQ_NVML_LIB=/nonexistent GPUQ_NODE_DIR=off LANG=C.UTF-8 TZ=UTC)
(cd "$work" && exec env "${env[@]}" setsid "$G" run --plan plan.json --poll 2 >"$work/run.out" 2>&1) &
runpid=$!
sleep 4
# The jobs' GPUs in use, as a training's would be.
printf '0, 61440, 97\n1, 61440, 95\n2, 30720, 88\n3, 30720, 91\n4, 18432, 64\n5, 9216, 45\n6, 20480, 77\n7, 12288, 58\n' > "$work/smi.txt"
tmux -L "$sock" -f /dev/null new-session -d -x 140 -y 38 "cd $work && exec env ${env[*]} TERM=xterm-256color $G top --plan plan.json"
sleep 12
tmux -L "$sock" send-keys Down Down
sleep 1
tmux -L "$sock" capture-pane -p -e > "$work/screen.ansi"
python3 - "$work/screen.ansi" "$work/screen.html" <<'EOF'
# ANSI SGR (what capture-pane -e writes) to HTML spans, on a dark terminal's colors.
import html, re, sys
colors = {30: "#1e1e1e", 31: "#f44747", 32: "#6a9955", 33: "#d7ba7d", 34: "#569cd6", 35: "#c586c0", 36: "#4ec9b0", 37: "#d4d4d4"}
fg0, bg0 = "#d4d4d4", "#1e1e1e"
out, st = [], {"fg": None, "bold": False, "dim": False, "rev": False}
def span(text):
    if not text: return ""
    fg, bg = st["fg"] or fg0, bg0
    if st["rev"]: fg, bg = bg0, (st["fg"] or fg0)
    style = f"color:{fg};background:{bg};" + ("font-weight:bold;" if st["bold"] else "") + ("opacity:0.6;" if st["dim"] else "")
    return f'<span style="{style}">{html.escape(text)}</span>'
for line in open(sys.argv[1], encoding="utf-8").read().split("\n"):
    parts = re.split(r"(\x1b\[[0-9;]*m)", line)
    row = ""
    for p in parts:
        m = re.fullmatch(r"\x1b\[([0-9;]*)m", p)
        if not m:
            row += span(p); continue
        codes = [int(c) if c else 0 for c in m.group(1).split(";")] or [0]
        for c in codes:
            if c == 0: st.update(fg=None, bold=False, dim=False, rev=False)
            elif c == 1: st["bold"] = True
            elif c == 2: st["dim"] = True
            elif c == 7: st["rev"] = True
            elif c == 22: st.update(bold=False, dim=False)
            elif c == 27: st["rev"] = False
            elif c == 39: st["fg"] = None
            elif c in colors: st["fg"] = colors[c]
    out.append(row)
    st.update(fg=None, bold=False, dim=False, rev=False)
body = "\n".join(out)
open(sys.argv[2], "w").write(f"""<!doctype html><meta charset="utf-8"><body style="margin:0;background:{bg0}">
<pre style="margin:0;padding:12px;font:15px/1.25 'DejaVu Sans Mono',monospace;color:{fg0};background:{bg0}">{body}</pre>""")
EOF
profile=$(mktemp -d)
chromium --headless --no-sandbox --disable-gpu --disable-quic --no-first-run --disable-background-networking \
  --disable-component-update --disable-sync --user-data-dir="$profile" --hide-scrollbars \
  --window-size=1300,740 --screenshot="$PWD/examples/top.png" "file://$work/screen.html" 2>/dev/null
rm -rf "$profile"
echo "examples/top.png"
