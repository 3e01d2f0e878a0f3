// The live queue: the original's rules over the state file (deps, retries,
// blocking). `run`'s loop is in run_loop.h, the control commands in control.h.
#pragma once

#include <cstdio>
#include <functional>
#include <string>
#include <vector>

#include "gpuq/control.h"
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

}  // namespace gpuq
