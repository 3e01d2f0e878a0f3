#!/usr/bin/env bash
# Installs what building and testing gpuq needs, where it is missing (Debian 12).
# ccache keeps every compilation (CMake compiles through it when it is installed).
# help2man makes the man page; dpkg-dev and file serve CPack's dependency search
# (dpkg-shlibdeps), lintian checks the package, man-db gives `man -w`; the completion
# tests drive real zsh and fish shells; faketime steps the wall clock under the fault tests (faults_test.cpp);
# strace records and eatmydata strips the fsyncs of the power-cut test's runs (tests/crash/power-cut).
set -euo pipefail
pkgs=(g++ cmake make ccache libcli11-dev nlohmann-json3-dev libsimdjson-dev libfmt-dev libncurses-dev libgtest-dev libgmock-dev libbenchmark-dev python3 time bc
      help2man gzip man-db dpkg-dev file lintian zsh fish slurm-wlm munge faketime strace eatmydata tmux)
missing=()
for p in "${pkgs[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
  echo "installing: ${missing[*]}"
  sudo=""
  if [[ $(id -u) -ne 0 ]]; then sudo="sudo"; fi
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq "${missing[@]}"
fi
