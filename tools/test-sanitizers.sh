#!/usr/bin/env bash
# The tests of gpuq's compiled code again, built with AddressSanitizer and
# UndefinedBehaviorSanitizer into build-asan/: gpuq, its libraries and the test binaries, and
# only those (GPUQ_SANITIZE leaves out the benchmarks, the man page and the completion
# scripts, and the checks of those, which the plain suite runs). GPUQ_SLURM=0 leaves out
# the Slurm group as well. The tests labelled `timing` (a real run's timing graded against its
# prediction) are left to the plain build: a sanitized process starts a tenth of a second late.
# Not part of CI (.ci/run): it doubled CI's time. Run it before a change to the compiled code
# lands.
# At -O1 (the tests' own code at -O0, tests/CMakeLists.txt), which runs faster than -O0,
# with line tables only (-g1), enough for a report to name files and lines.
set -euo pipefail
cd "$(dirname "$0")/.."
bash tools/deps.sh
slurm=ON; [[ ${GPUQ_SLURM:-1} == 0 ]] && slurm=OFF
cmake -S . -B build-asan -DGPUQ_SANITIZE=ON -DGPUQ_TEST_SLURM=$slurm -DCMAKE_BUILD_TYPE=Debug \
  "-DCMAKE_CXX_FLAGS_DEBUG=-O1 -g1" >/dev/null
cmake --build build-asan -j"${JOBS:-2}"
export ASAN_OPTIONS=${ASAN_OPTIONS:-abort_on_error=1:detect_leaks=1}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}
export LSAN_OPTIONS=${LSAN_OPTIONS:-suppressions=$PWD/tools/lsan.supp:print_suppressions=0}
ctest --test-dir build-asan --output-on-failure -j"${JOBS:-2}" --timeout 600 -LE timing
