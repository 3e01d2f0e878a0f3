#!/usr/bin/env bash
# Builds the fuzz targets with clang's libFuzzer and runs each for SECONDS (default 600).
# Seeds: the parity plans and state fixtures. Any crash is copied into
# tests/fuzz/regressions/KIND/, which the test suite replays.
set -euo pipefail
cd "$(dirname "$0")/.."
secs=${1:-600}
command -v clang++ >/dev/null || { sudo=""; [[ $(id -u) -ne 0 ]] && sudo=sudo; $sudo apt-get install -y -qq clang libclang-rt-dev; }
bash tools/deps.sh
cmake -S . -B build-fuzz -DCMAKE_CXX_COMPILER=clang++ -DGPUQ_FUZZ=ON -DBUILD_TESTING=OFF -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
cmake --build build-fuzz -j"${JOBS:-2}" --target plan_fuzz state_fuzz
rm -rf build-fuzz/crashes
mkdir -p build-fuzz/corpus/plan build-fuzz/corpus/state build-fuzz/crashes
i=0; for f in tests/parity/simulate*/*/plan.json examples/plan.json; do cp "$f" "build-fuzz/corpus/plan/seed$((i++)).json"; done
i=0; for f in tests/fixtures/*/*.state.json; do cp "$f" "build-fuzz/corpus/state/seed$((i++)).json"; done
status=0
for kind in plan state; do
  echo "== ${kind}_fuzz for ${secs}s"
  ./build-fuzz/tests/fuzz/${kind}_fuzz -max_total_time="$secs" -max_len=8192 -timeout=10 \
      -artifact_prefix=build-fuzz/crashes/${kind}- build-fuzz/corpus/$kind 2>&1 | tail -n 4 || status=1
  for c in build-fuzz/crashes/${kind}-*; do
    [[ -e "$c" ]] || continue
    cp "$c" "tests/fuzz/regressions/$kind/$(basename "$c")"
    echo "finding kept as tests/fuzz/regressions/$kind/$(basename "$c")"
    status=1
  done
done
exit $status
