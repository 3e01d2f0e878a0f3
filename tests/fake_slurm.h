// A fake Slurm for `run --slurm` without a Slurm: sbatch, squeue, scontrol, scancel and sacct
// as small bash scripts in a folder put first on PATH. They keep each job in
// DIR/slurm/jobs/ID/ (its sbatch arguments one a line in `args`, its name, `released`,
// `cancelled`), run a job's --wrap when `scontrol release` lets it go (as Slurm would, in
// its --chdir, with the environment sbatch had, its output appended to its -o log), and
// answer squeue from those files:
// held jobs PENDING (JobHeldUser), released ones RUNNING until their exit file appears,
// then COMPLETED (or what a job wrote in DIR/slurm/jobs/$SLURM_JOB_ID/final: OUT_OF_MEMORY, say).
// The test steers them with files in DIR/slurm/: `squeue.fail` (squeue
// prints it on stderr and exits 1), `squeue.garbage` (squeue prints it and exits 0).
// `queued_at_submit` gets a line per sbatch: how many of the plan's jobs were in the queue
// (not cancelled, no exit file yet) with the new one.
#pragma once

#include <fmt/format.h>

#include <filesystem>
#include <map>
#include <string>
#include <vector>

#include "test_util.h"

namespace gpuq::test {

class FakeSlurm {
 public:
  explicit FakeSlurm(const TempDir& d) : dir_(d.path() + "/slurm") {
    std::string f = "F='" + dir_ + "'\n";
    d.write("slurm/bin/sbatch", "#!/bin/bash\n" + f + R"sh(
id=$(( $(cat "$F/next_id" 2>/dev/null || echo 100) + 1 ))
echo "$id" > "$F/next_id"
j="$F/jobs/$id"
mkdir -p "$j"
printf '%s\n' "$@" > "$j/args"
export -p > "$j/env"  # sbatch's default, --export=ALL: the job gets sbatch's whole environment
while [ $# -gt 0 ]; do
  case "$1" in
    -J) echo "$2" > "$j/name"; shift ;;
    --chdir) echo "$2" > "$j/chdir"; shift ;;
    -o) echo "$2" > "$j/log"; shift ;;
    --wrap=*) printf '%s' "${1#--wrap=}" > "$j/wrap" ;;
  esac
  shift
done
# The wrap is "exec GPUQ __job SCRIPT EXITFILE - ARGS", shell-quoted: its 4th word is the exit file.
eval "set -- $(cat "$j/wrap" | sed 's/^exec //')"
echo "$4" > "$j/exitf"
n=0
for k in "$F"/jobs/*; do
  [ -e "$k/cancelled" ] || [ -e "$(cat "$k/exitf")" ] || n=$((n + 1))
done
echo "$n" >> "$F/queued_at_submit"
echo "$id"
)sh",
            0755);
    d.write("slurm/bin/squeue", "#!/bin/bash\n" + f + R"sh(
echo "$*" >> "$F/squeue.calls"
if [ -e "$F/squeue.fail" ]; then cat "$F/squeue.fail" >&2; exit 1; fi
if [ -e "$F/squeue.garbage" ]; then cat "$F/squeue.garbage"; exit 0; fi
sep=
printf '{"jobs": ['
for j in "$F"/jobs/*; do
  [ -d "$j" ] || continue
  if [ -e "$j/cancelled" ]; then st=CANCELLED r=None
  elif [ -e "$(cat "$j/exitf")" ]; then st=$(cat "$j/final" 2>/dev/null || echo COMPLETED) r=None
  elif [ -e "$j/released" ]; then st=RUNNING r=None
  else st=PENDING r=JobHeldUser
  fi
  printf '%s{"job_id": %s, "name": "%s", "job_state": "%s", "state_reason": "%s"}' "$sep" "${j##*/}" "$(cat "$j/name")" "$st" "$r"
  sep=,
done
printf ']}\n'
)sh",
            0755);
    d.write("slurm/bin/scontrol", "#!/bin/bash\n" + f + R"sh(
echo "$*" >> "$F/scontrol.calls"
[ "$1" = release ] || exit 0
IFS=, read -ra ids <<< "$2"
for id in "${ids[@]}"; do
  j="$F/jobs/$id"
  [ -d "$j" ] && [ ! -e "$j/released" ] || continue
  touch "$j/released"
  ( cd "$(cat "$j/chdir")" && source "$j/env" && export SLURM_JOB_ID="$id" && exec bash -c "$(cat "$j/wrap")" ) >> "$(cat "$j/log")" 2>&1 < /dev/null &
done
)sh",
            0755);
    d.write("slurm/bin/scancel", "#!/bin/bash\n" + f + R"sh(
echo "$*" >> "$F/scancel.calls"
for a in "$@"; do
  case "$a" in -*) continue ;; esac
  IFS=, read -ra ids <<< "$a"
  for id in "${ids[@]}"; do [ -d "$F/jobs/$id" ] && touch "$F/jobs/$id/cancelled"; done
done
exit 0
)sh",
            0755);
    d.write("slurm/bin/sacct", "#!/bin/bash\necho 'sacct: error: Slurm accounting storage is disabled' >&2\nexit 1\n",
            0755);
  }

  /// The environment that puts the fake first on PATH (for the built gpuq).
  std::map<std::string, std::string> env() const {
    const char* path = std::getenv("PATH");
    return {{"PATH", dir_ + "/bin:" + (path ? path : "/usr/bin:/bin")}};
  }
  /// Folder of the fake's files (squeue.fail, ...).
  const std::string& dir() const { return dir_; }
  /// Ids of the jobs sbatch took, in order of submission.
  std::vector<long long> jobs() const {
    std::vector<long long> out;
    std::error_code ec;
    for (std::filesystem::directory_iterator it(dir_ + "/jobs", ec), end; !ec && it != end; it.increment(ec))
      out.push_back(std::stoll(it->path().filename().string()));
    std::sort(out.begin(), out.end());
    return out;
  }
  /// The arguments sbatch got for job `id`.
  std::vector<std::string> args(long long id) const { return lines_of(fmt::format("{}/jobs/{}/args", dir_, id)); }

 private:
  std::string dir_;
};

}  // namespace gpuq::test
