// The live queue's records, over the ports: the original's refresh (running jobs
// that ended), the control commands, and the rows of `status`.
#pragma once

#if defined(GPUQ_CORE) || defined(GPUQ_VIEWS)
#error "a live header (the OS behind ports) in the core or the views: pass data in instead"
#endif

#include <string>
#include <utility>
#include <vector>

#include "gpuq/core/plan.h"
#include "gpuq/live/ports.h"
#include "gpuq/live/proc.h"
#include "gpuq/core/rules.h"
#include "gpuq/core/state.h"
#include "gpuq/live/store.h"

namespace gpuq {

/// A line of refresh: the job that ended and what to print for it.
struct Ended {
  std::string id;
  std::string line;  ///< "done ID", "failed ID (exit N)", ... (without the clock stamp)
};

/// The original's refresh over `state` at `now`: running jobs that ended
/// become done/failed (a vanished one failed with kLostExit; one whose launch was
/// cut short pending again, attempts kept). Signals nothing.
std::vector<Ended> refresh(Launcher& launcher, State& state, double now);

/// refresh() with the launcher of this machine (status, simulate --from-state, logs).
std::vector<Ended> refresh(const PlanPaths& paths, State& state, double now);

/// The result of a control command: lines to print and the exit status.
struct ControlResult {
  std::vector<std::string> lines;
  int status = 0;
};

/// `gpuq retry|kill|hold IDS` as the original plus fixes 4-6, in one
/// read-modify-write of the store under its lock. Unknown ids change nothing
/// (status 2, `plan_name` in the message); a refused id gives status 1. kill
/// sends SIGTERM to the job's group (when its pid is still the job's), marks it
/// failed with kKilledExit and records when, for run's --kill-grace.
/// `requeue` (gpuq's own) sends SIGTERM to a running job's group and marks the entry
/// "requeue" (and kill_sent, for run's SIGKILL after --kill-grace); it stays running
/// until the whole group is gone, then refresh makes it pending (attempts kept): no
/// `after:` dependent ever sees it finished.
/// With `events_log`, what changed is appended to that event log (journal.h) once the
/// state is written; a failed append is a line in the result (the next `run` logs it).
ControlResult control(const Plan& plan, const std::string& plan_name, Store& store, Launcher& launcher, Clock& clock,
                      const std::string& action, const std::vector<std::string>& ids,
                      const std::string& events_log = "");

/// The end of `gpuq requeue` once it has waited for the groups of `ids` (jobs it stopped):
/// each still being requeued whose group is gone becomes pending, under the lock (a `run`
/// may have done it already). The lines to print.
std::vector<std::string> finish_requeues(Store& store, Launcher& launcher, const std::vector<std::string>& ids);

/// A requeued job's fresh entry: pending, attempts kept.
JobState requeued(const JobState& s);

}  // namespace gpuq
