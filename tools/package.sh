#!/usr/bin/env bash
# Builds the Debian package (build/gpuq_VERSION_ARCH.deb) with CPack, installs it with dpkg,
# checks what it installed (gpuq --version, man -w gpuq, the example plan simulated, the
# completion scripts in place) and runs lintian on it, failing on errors. .ci/run calls it
# after the test suite, so the build is incremental. Removes the package again unless it
# was installed before, or GPUQ_KEEP_INSTALLED=1.
set -euo pipefail
cd "$(dirname "$0")/.."
bash tools/deps.sh
sudo=""
if [[ $(id -u) -ne 0 ]]; then sudo="sudo"; fi
cmake -S . -B build -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
cmake --build build -j"${JOBS:-2}" --target gpuq gpuq_docs
rm -f build/gpuq_*.deb
(cd build && cpack -G DEB > cpack.log 2>&1) || { cat build/cpack.log; exit 1; }
deb=$(ls build/gpuq_*.deb)
echo "== built $deb"
dpkg-deb --info "$deb" | sed -n '/Package:/,$p'
dpkg-deb --contents "$deb" | awk '{print $6}'

was_installed=0
dpkg-query -W -f='${Status}' gpuq 2>/dev/null | grep -q "install ok installed" && was_installed=1
echo "== dpkg -i $deb"
if ! $sudo dpkg -i "$deb"; then
  $sudo env DEBIAN_FRONTEND=noninteractive apt-get -f install -y -qq
fi
cleanup() {
  if [[ $was_installed == 0 && ${GPUQ_KEEP_INSTALLED:-0} != 1 ]]; then
    $sudo dpkg --purge gpuq >/dev/null
    [[ ! -e /var/lib/gpuq ]] || { echo "dpkg --purge left /var/lib/gpuq behind" >&2; exit 1; }
  fi
}
trap cleanup EXIT

# The examples as the repository has them: nothing a run of them left (the README's first
# command runs the demo in examples/demo; an event log or run file shipped would be a stranger's
# history to whoever copies the example).
if git rev-parse --is-inside-work-tree >/dev/null 2>&1; then
  extra=$(comm -13 <(git ls-files examples | sort) <(cd /usr/share/doc/gpuq && find examples -type f | sort))
  [[ -z $extra ]] || { echo "the package ships files the repository's examples do not have:" >&2; echo "$extra" >&2; exit 1; }
fi

echo "== the installed gpuq"
/usr/bin/gpuq --version
man -w gpuq
/usr/bin/gpuq simulate --plan /usr/share/doc/gpuq/examples/plan.json
for f in /usr/share/bash-completion/completions/gpuq /usr/share/zsh/vendor-completions/_gpuq \
         /usr/share/fish/vendor_completions.d/gpuq.fish; do
  [[ -s $f ]] || { echo "missing: $f" >&2; exit 1; }
done
bash -c 'source /usr/share/bash-completion/completions/gpuq && complete -p gpuq'

# The node directory for a lab: group gpuq, /var/lib/gpuq sticky and group-writable, and a
# member of the group shares the node through it by default.
[[ $(stat -c '%a %U %G' /var/lib/gpuq) == "3775 root gpuq" ]] || { stat /var/lib/gpuq >&2; exit 1; }
getent group gpuq >/dev/null
/usr/bin/gpuq status --node | grep -q "^node directory /var/lib/gpuq:" || { /usr/bin/gpuq status --node >&2; exit 1; }

echo "== lintian $deb"
lintian --fail-on error "$deb"
echo "package ok: $deb"
