// Stale done jobs (issue 25, point 2): a done job whose deps changed or grew, or ran again,
// after it ran. Adding a seed to a finished sweep runs the new points; the evaluation and the
// report that depend on the sweep stay done, but what they computed is out of date. gpuq never
// reruns a done job on its own: `status` says which are stale and why, `run`'s last line counts
// them, and `gpuq retry --stale` reruns them (and the done jobs downstream of them).
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "gpuq/core/plan.h"
#include "gpuq/core/state.h"

namespace gpuq {

/// The state field that records the job deps (`ID` and `after:ID`, sweeps expanded) an entry's
/// attempt was started with (gpuq's own: a list of ids; the original ignores it, and drops it
/// when it replaces an entry).
inline constexpr const char* kDepsRanField = "deps_ran";

/// The job deps of `j` as the plan has them now (`ID` and `after:ID`; `file:` deps are not jobs).
std::vector<std::string> job_deps_of(const Job& j);

/// The deps `s` ran with; nullopt when not recorded (the original's entries, an older gpuq's).
std::optional<std::vector<std::string>> deps_ran(const JobState& s);

/// Records on `s` the deps its attempt starts with.
void set_deps_ran(JobState& s, const std::vector<std::string>& ids);

/// Why a done job is stale; empty() when it is not (or is not done).
struct Staleness {
  std::vector<std::string> added;    ///< deps it has now and did not run with
  std::vector<std::string> removed;  ///< deps it ran with and no longer has
  std::vector<std::string> redoing;  ///< deps to run again (pending, held, blocked, running) since it ran
  std::vector<std::string> reran;    ///< deps whose run started after it started (they ran again since)
  bool empty() const { return added.empty() && removed.empty() && redoing.empty() && reran.empty(); }
};

/// The staleness of plan job `job` in `state`. A dep that counts under one heading is not
/// repeated under a later one (added, then removed, redoing, reran).
Staleness staleness_of(const Plan& plan, size_t job, const State& state);

/// "dep train_s3 added since it ran; dep prep ran again after it started", in that order.
std::string staleness_text(const Staleness& s);

/// The stale done jobs of the plan, in plan order.
std::vector<size_t> stale_jobs(const Plan& plan, const State& state);

/// What `retry --stale` reruns: the stale jobs and every done job that depends on one of them,
/// directly or through others (it would be stale once they rerun), in plan order.
std::vector<size_t> stale_reruns(const Plan& plan, const State& state);

}  // namespace gpuq
