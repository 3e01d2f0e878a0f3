// The watchdogs of running jobs. The hang watchdog: a job whose log has stopped growing and
// whose GPUs sit idle is probably hung (an NCCL deadlock, a loader stuck on a dead mount). The
// idle watch: a job whose GPUs all sit idle, or hold none of its processes, for idle_minutes
// holds GPUs it does not use (a loader stuck, a notebook left open, a parent waiting on a
// crashed child). Part of the rule book: `run` records what it sees in the job's entry
// (note_activity), and `run` and `status` judge it here (check_quiet, check_idle). Pure.
#pragma once

#include <map>
#include <optional>
#include <string>

#include "gpuq/core/gpu_use.h"
#include "gpuq/core/plan.h"
#include "gpuq/core/rules.h"
#include "gpuq/core/state.h"

namespace gpuq {

/// The value of the state's gpuq field "outcome" for a job the watchdog stopped (on_quiet "kill").
inline constexpr const char* kHungOutcome = "hung";
/// ... and for one the idle watch stopped (on_idle "kill").
inline constexpr const char* kIdleOutcome = "idle";

/// The job's quiet limit in minutes: its quiet_minutes, else --quiet-minutes when > 0, else none.
std::optional<double> quiet_minutes(const Job& job, const Policy& p);

/// What the watchdog says of a running job at `now`.
struct QuietCheck {
  bool watched = false;      ///< it has a quiet limit (and is running, with a start)
  bool hung = false;         ///< its log silent, and its GPUs idle where readings say, for the quiet limit
  double log_silent = 0;     ///< seconds since its log last grew (or since its start)
  bool gpus_known = false;   ///< `run` has utilization readings of all its GPUs
  double next_in = 1e300;    ///< seconds until it could be hung at the earliest (the tick's wake time)

  /// "log silent 42 min, GPUs idle", or "log silent 42 min (no GPU utilization reading: the log alone)".
  std::string detail() const;
  /// "hung? " and the detail, as `status` marks the job; "" when not hung.
  std::string text() const { return hung ? "hung? " + detail() : ""; }
};

/// Hung when, for the job's quiet limit, its log has not grown and, where `run`
/// has utilization readings of its GPUs, none of them was over kIdlePercent.
/// Without readings the log alone decides (text() says so).
QuietCheck check_quiet(const Job& job, const JobState& s, const Policy& p, double now);

/// What one GPU reading says of the GPUs' activity.
struct GpuActivity {
  std::map<int, int> util_pct;  ///< utilization per GPU, for those that gave one
  /// Each GPU's compute processes, where the probe lists them (NVML); none: not known.
  std::optional<std::map<int, std::vector<GpuProcess>>> processes;
  double idle_pct = 5;  ///< a GPU at or below this utilization is idle (the idle_util_percent setting)
};

/// The GPU activity of a reading, with the policy's idle_util_percent.
GpuActivity activity_of(const GpuReading& r, const Policy& p);

/// Records in a running entry what `run` sees at `now`: the size of the job's
/// log (nullopt: unknown) and what the reading says of its GPUs. The log's
/// growth sets log_grew (and forgets hung_noted: a job that talks again is said
/// again when it next goes quiet); a first look at a log that already has
/// something in it counts as growth. A utilization reading of all its GPUs sets
/// gpus_read; one of them over idle_pct sets gpus_busy. The idle watch's streaks:
/// idle_since from the first of an unbroken run of readings with all its GPUs
/// idle, unused_since from the first of an unbroken run of process lists with
/// none of its processes (pid, group or an ancestor its pid) on its GPUs; a busy
/// reading, or none, ends a streak.
void note_activity(JobState& s, std::optional<long long> log_bytes, const GpuActivity& a, double now);

/// The idle watch's limit of a job, in minutes: the idle_minutes setting, none where it
/// is 0 or the job says idle_ok.
std::optional<double> idle_minutes(const Job& job, const Policy& p);

/// What `run` does with an idle job: its own on_idle, else the on_idle setting's.
IdleAction idle_action(const Job& job, const Policy& p);

/// "warn", "requeue", "kill".
const char* idle_action_name(IdleAction a);

/// What the idle watch says of a running job at `now`.
struct IdleCheck {
  bool watched = false;    ///< it has an idle limit (and is running, with a start and GPUs)
  bool idle = false;       ///< a streak (idle_since or unused_since) has lasted the limit
  bool unused = false;     ///< the longer streak is its processes' absence, not the utilization
  double idle_for = 0;     ///< seconds of the longer streak, up to the last reading (gpus_read)
  std::vector<int> gpus;   ///< its GPUs
  double idle_pct = 5;     ///< the utilization at or below which a GPU is idle
  double next_in = 1e300;  ///< seconds until it could be idle at the earliest (the tick's wake time): only
                           ///< while a spell goes on (one begins at a tick's reading)

  /// "idle 42 min on GPUs [2, 3] (at or below 5% utilization)", or "no process of it on GPUs [2, 3] for 42 min".
  std::string detail() const;
  /// The detail where idle, else "".
  std::string text() const { return idle ? detail() : ""; }
};

/// Idle when, for the job's idle limit, every reading has shown all of its GPUs at or below
/// idle_util_percent, or every process list none of its processes on them. The time counts
/// to the last reading (gpus_read), not to `now`: a run that stopped looking claims nothing.
IdleCheck check_idle(const Job& job, const JobState& s, const Policy& p, double now);


}  // namespace gpuq
