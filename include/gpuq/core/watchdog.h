// The hang watchdog: a running job whose log has stopped growing and whose GPUs
// sit idle is probably hung (an NCCL deadlock, a loader stuck on a dead mount).
// Part of the rule book: `run` records what it sees in the job's entry
// (note_activity), and `run` and `status` judge it here (check_quiet). Pure.
#pragma once

#include <map>
#include <optional>
#include <string>

#include "gpuq/core/plan.h"
#include "gpuq/core/rules.h"
#include "gpuq/core/state.h"

namespace gpuq {

/// A GPU at or under this utilization (percent) is idle.
inline constexpr int kIdlePercent = 5;
/// The value of the state's gpuq field "outcome" for a job the watchdog stopped (on_quiet "kill").
inline constexpr const char* kHungOutcome = "hung";

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

/// Records in a running entry what `run` sees at `now`: the size of the job's
/// log (nullopt: unknown) and the utilization of the GPUs that gave one. The
/// log's growth sets log_grew (and forgets hung_noted: a job that talks again
/// is said again when it next goes quiet); a first look at a log that already
/// has something in it counts as growth. A reading of all its GPUs sets
/// gpus_read, and one of them over kIdlePercent gpus_busy.
void note_activity(JobState& s, std::optional<long long> log_bytes, const std::map<int, int>& util_pct, double now);


}  // namespace gpuq
