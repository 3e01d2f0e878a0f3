// The live queue: the original's rules over the state file (deps, retries,
// blocking), `run`'s loop, and the control commands.
#pragma once

#include <cstdio>
#include <functional>
#include <string>
#include <vector>

#include "gpuq/plan.h"
#include "gpuq/schedule.h"
#include "gpuq/state.h"
#include "gpuq/store.h"

namespace gpuq {

/// `run`'s flags, with the original's defaults.
struct RunOptions {
  std::vector<int> node_gpus{0, 1, 2, 3, 4, 5, 6, 7};
  double poll = 20;
  double backfill_max_hours = 0.5;
  long long max_retries = 2;
  double retry_after = 300;
  long long max_used_mib = 1024;
  double kill_grace = 30;
  std::string nvidia_smi = "nvidia-smi";
  double nvidia_smi_timeout = 30;
};

/// No further attempt will be made: done, blocked, killed (exit -15), or
/// failed with the automatic retries used up. A missing entry is not finished.
bool finished(const JobState* s, long long max_retries);

/// The job's deps are met: plain ids done, after: ids finished, file: paths
/// present (`file_exists` gets the expanded path).
bool deps_met(const Plan& plan, const Job& job, const State& state, long long max_retries,
              const std::function<bool(const std::string&)>& file_exists);

/// Some plain-id dep of the job failed or is blocked.
bool deps_failed(const Plan& plan, const Job& job, const State& state);

/// A failed job due for an automatic retry at `now`.
bool retryable(const JobState* s, const RunOptions& opt, double now);

/// The decisions of one tick of `run` that need no process or clock.
struct TickDecision {
  std::vector<std::pair<std::string, long long>> retried;  ///< automatic retries: id, retry number
  PassResult pass;                                         ///< the jobs to start now, and why others wait
  double next_retry_in = 1e300;                            ///< seconds until the next retry falls due
};

/// One tick over the state at `now`, as the original: failed jobs due for a
/// retry become pending (and blocked jobs with them), pending jobs whose plain
/// dep failed become blocked, and the pass runs over the ready jobs with
/// `free` GPUs. Changes `state` accordingly (not the jobs it starts).
TickDecision decide_tick(const Plan& plan, State& state, const RunOptions& opt, double now, GpuMask free,
                         bool any_running, const std::function<bool(const std::string&)>& file_exists,
                         bool explain = false);

/// The same decisions, explained, over a state it leaves as it is (`status` shows
/// what the next tick would do).
TickDecision preview_tick(const Plan& plan, const State& state, const RunOptions& opt, double now, GpuMask free,
                          bool any_running, const std::function<bool(const std::string&)>& file_exists);

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
