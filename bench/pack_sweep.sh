#!/usr/bin/env bash
# Several jobs on one GPU, measured: 64 jobs that each need 20 GiB and sleep S seconds (default 5),
# on 8 GPUs of 80 GiB (the fake NVML library of the tests, headroom 0), run once packed
# (gpu_mem_gib) and once on whole GPUs (the same plan without it). Prints each run's wall time and
# their ratio. Usage: bash bench/pack_sweep.sh [S]   (after a build: build/gpuq, build/fake_nvml)
set -euo pipefail
cd "$(dirname "$0")/.."
S=${1:-5}
G=${GPUQ_BIN:-$PWD/build/gpuq}
LIB=$PWD/build/fake_nvml/libnvidia-ml.so.1
[[ -x $G && -f $LIB ]] || { echo "build gpuq and its tests first (build/gpuq, $LIB)" >&2; exit 2; }
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
python3 - "$work" "$S" <<'PY'
import json, sys
work, s = sys.argv[1], sys.argv[2]
devs = [{"bus_id": f"00000000:{0x18 + 0x10 * k:02X}:00.0", "name": "NVIDIA H100 80GB HBM3",
         "total_mib": 80 * 1024, "used_mib": 0, "util": 0} for k in range(8)]
json.dump({"devices": devs}, open(f"{work}/nvml.json", "w"))
for name, gib in (("packed", {"gpu_mem_gib": 20}), ("whole", {})):
    import os
    os.makedirs(f"{work}/{name}")
    open(f"{work}/{name}/job.sh", "w").write(f"sleep {s}\n")
    json.dump([dict({"id": f"s{k}", "script": "job.sh", "est_hours": float(s) / 3600}, **gib) for k in range(64)],
              open(f"{work}/{name}/plan.json", "w"))
PY
export GPUQ_NVML_LIB=$LIB GPUQ_FAKE_NVML=$work/nvml.json
declare -A took
for name in packed whole; do
  start=$(date +%s.%N)
  (cd "$work/$name" && "$G" run --plan plan.json --poll 1 --gpu-mem-headroom 0 >/dev/null 2>&1)
  took[$name]=$(echo "$(date +%s.%N) - $start" | bc)
  printf '%-7s 64 jobs of %ss: %.1f s\n' "$name" "$S" "${took[$name]}"
done
printf 'packed / whole: %.2f\n' "$(echo "${took[packed]} / ${took[whole]}" | bc -l)"
