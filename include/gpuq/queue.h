// The live queue: the original's rules over the state file (deps, retries,
// blocking), `run`'s loop, and the control commands.
#pragma once

#include <cstdio>
#include <functional>
#include <string>
#include <vector>

#include "gpuq/plan.h"
#include "gpuq/rules.h"
#include "gpuq/schedule.h"
#include "gpuq/state.h"
#include "gpuq/store.h"

namespace gpuq {

/// `run`'s flags, with the original's defaults (the rules' among them).
struct RunOptions : Policy {
  double poll = 20;
  long long max_used_mib = 1024;
  double kill_grace = 30;
  std::string nvidia_smi = "nvidia-smi";
  double nvidia_smi_timeout = 30;
};

/// How a running job's process looks from outside.
struct Observed {
  enum class Kind { Running, Exited, Vanished, Aborted } kind = Kind::Running;
  long long exit = 0;         ///< Exited: the code in logs/ID.exit
  std::string note;           ///< a problem with the exit file, for the log
};

/// Reads logs/ID.exit and the process: an exit file gives its code (garbage
/// counts as failure, with a note); a dead process without one vanished,
/// unless it left logs/ID.aborted (it never started: gpuq died first).
Observed observe(const PlanPaths& paths, const std::string& id, const JobState& s);

/// The original's refresh over `state` at `now`: running jobs that ended
/// become done/failed. Returns the ids that ended, with a line to print for
/// each. Does not signal anything.
std::vector<std::pair<std::string, std::string>> refresh(const PlanPaths& paths, State& state, double now);

/// `gpuq run`: the loop, until every job is finished or a stop signal. Prints
/// the original's lines to `out`. Returns the exit status.
int run_queue(const Plan& plan, const PlanPaths& paths, const RunOptions& opt, std::FILE* out);

/// `gpuq status`: the original's rows and counts, read-only.
std::string format_status(const Plan& plan, const State& state, double now, bool all);

/// The result of a control command: lines to print and the exit status.
struct ControlResult {
  std::vector<std::string> lines;
  int status = 0;
};

/// `gpuq retry|kill|hold IDS`: under the lock, as the original plus fixes 4-6.
ControlResult control(const Plan& plan, const PlanPaths& paths, const std::string& action,
                      const std::vector<std::string>& ids);

/// Local wall clock as [HH:MM:SS].
std::string clock_stamp(double unix_time);

/// Seconds since the epoch, as a float.
double unix_now();

}  // namespace gpuq
