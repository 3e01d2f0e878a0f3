// The est_hours simulator: the scheduling pass run over a predicted world.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "gpuq/core/plan.h"
#include "gpuq/core/rules.h"
#include "gpuq/core/schedule.h"

namespace gpuq {

/// Settings of a simulation: the rules' (the simulator reads the node's GPUs and the backfill limit).
using SimOptions = Policy;

/// The first instant after now: when a prediction from a live state lets happen
/// what the next tick cannot (an overdue job ends, a late file appears).
inline constexpr double kSoon = 1e-6;  // hours

/// The most nodes a simulation takes (SimOptions::nodes): it keeps a row of GPU end times per
/// node and looks over every node at each event.
inline constexpr int kMaxNodes = 4096;

/// Where a simulation starts from when it predicts a live queue (`status`,
/// `simulate --from-state`): per job, where the rule book says it stands now
/// (live_start in outlook.h makes it from the next tick's plan). Times in the
/// result are then hours from now. At time 0 the prediction starts exactly the
/// jobs the next tick of `run` starts; whatever is not ready now becomes ready
/// no earlier than kSoon.
struct SimStart {
  enum class Kind {
    Pending,   ///< not started, may start once its deps are met
    Running,   ///< started `elapsed` hours ago on `gpus`; ends at est_hours, or at kSoon if past it
    Done,      ///< satisfies plain and after: deps
    Finished,  ///< failed for good, killed or blocked: satisfies after: deps only
    Held,      ///< satisfies nothing until released
    Retry,     ///< failed, retried automatically in `retry_in` hours (infinity: never); until
               ///< then it leaves its reservations, as `run` counts it
    Blocked,   ///< blocked, and pending again at the first automatic retry (`run` then unblocks
               ///< every blocked job), its deps still able to be done; until then it leaves its
               ///< reservations and counts as finished for after: deps, as `run` counts it
  };
  std::vector<Kind> kind;
  std::vector<double> elapsed;
  std::vector<std::vector<int>> gpus;
  std::vector<double> retry_in;
  std::vector<char> files_present;  ///< per job: every file: dep exists now
  GpuMask busy = 0;                 ///< GPUs busy now but not by a running job of the plan (another
                                    ///< user's memory, a kill in its grace time): free from busy_hours
  double busy_hours = kSoon;  ///< when `busy` are free: `run`'s next look (--poll), no sooner
  bool any_running = false;         ///< some entry of the state is running (the stall breaker's test)
};


/// One job of the predicted timeline.
struct SimRow {
  size_t job;
  double start;
  double end;
  std::vector<int> gpus;
  int node = 0;  ///< with SimOptions::nodes > 1: the node (0-based) its GPUs are on
};

/// A job that can never start, and why, in words.
struct Stuck {
  size_t job;
  std::string why;
};

/// The predicted timeline.
struct Simulation {
  std::vector<SimRow> rows;          ///< in the order jobs were started
  std::vector<std::string> notes;    ///< stall-breaker notes (fix 12), for stderr
  std::vector<Stuck> stuck;          ///< non-empty when the plan cannot be scheduled
  std::vector<Stuck> blocked;        ///< jobs predicted never to run because a plain dep of theirs (or of
                                     ///< their deps) is predicted to time out: est_hours over its limit,
                                     ///< without retry_on_timeout (a failure, as `run` counts it)
  double stuck_at = 0;               ///< the time it got stuck
};

/// Simulates the plan with the same pass as `run`, each job lasting est_hours,
/// cut at its time limit (limits.h). A job cut at its limit without
/// retry_on_timeout fails there: its plain dependents are blocked (`blocked`),
/// its after: dependents go on.
/// `file:` deps of a job with `produced_by` wait for that job to reach
/// produced_at_frac of its run; other `file:` deps count as present.
/// With `from`, starts from the live state instead of an empty node; a file:
/// dep then counts only if it exists now or a job yet to reach it produces it.
Simulation simulate(const Plan& plan, const SimOptions& opt, const SimStart* from = nullptr);

}  // namespace gpuq
