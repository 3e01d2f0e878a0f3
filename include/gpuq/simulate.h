// The est_hours simulator: the scheduling pass run over a predicted world.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "gpuq/plan.h"
#include "gpuq/schedule.h"

namespace gpuq {

/// Settings of a simulation (the `simulate` flags).
struct SimOptions {
  std::vector<int> node_gpus{0, 1, 2, 3, 4, 5, 6, 7};
  double backfill_max_hours = 0.5;
};

/// Where a simulation starts from when it predicts a live queue (`status`,
/// `simulate --from-state`): per job, what the state says now. Times in the
/// result are then hours from now.
struct SimStart {
  enum class Kind {
    Pending,   ///< not started (failed jobs with retries left count as pending)
    Running,   ///< started `elapsed` hours ago on `gpus`; ends at est_hours, or now if past it
    Done,      ///< satisfies plain and after: deps
    Finished,  ///< failed for good or blocked: satisfies after: deps only
    Held,      ///< satisfies nothing until released
  };
  std::vector<Kind> kind;
  std::vector<double> elapsed;
  std::vector<std::vector<int>> gpus;
  std::vector<char> files_present;  ///< per job: every file: dep exists now
};

/// One job of the predicted timeline.
struct SimRow {
  size_t job;
  double start;
  double end;
  std::vector<int> gpus;
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
  double stuck_at = 0;               ///< the time it got stuck
};

/// What a simulation of a plan needs that does not depend on where it starts
/// from: each job's deps turned around (who waits for it), and the few fields
/// of a job the simulation reads at every event, packed together (a Job is 160
/// bytes, and at 100,000 jobs each read of one was a cache miss). `status` makes
/// it on a second core while it reads the live state.
class SimModel {
 public:
  SimModel(const Plan& plan, const SimOptions& opt);

 private:
  friend Simulation simulate(const Plan&, const SimOptions&, SimModel, const SimStart*);
  // Lists of jobs per job in two flat arrays (compressed rows).
  class JobLists {
   public:
    explicit JobLists(size_t n) : first_(n + 2, 0) {}
    /// First pass: count an item for `j`; then fill() once; then add() the items in the same order.
    void count(size_t j) { ++first_[j + 2]; }
    void fill();
    void add(size_t j, size_t item) { items_[first_[j + 1]++] = static_cast<uint32_t>(item); }
    std::span<const uint32_t> operator[](size_t j) const {
      return {items_.data() + first_[j], items_.data() + first_[j + 1]};
    }

   private:
    std::vector<uint32_t> first_;  // after fill and add: items of j are [first_[j], first_[j + 1])
    std::vector<uint32_t> items_;
  };
  struct Packed {
    double est_hours;
    double produced_at_frac;
    uint32_t producer;  // kNone when no job produces its files
    uint8_t file_dep;   // it has a file: dep
  };
  static constexpr uint32_t kNone = UINT32_MAX;
  std::vector<Packed> job_;
  std::vector<uint32_t> unmet_;     // job deps (done: and after:) of each job
  JobLists dependents_, after_dependents_, produced_for_;
  ReadySet ready_;                  // empty, indexed for this plan
};

/// Simulates the plan with the same pass as `run`, each job lasting est_hours.
/// `file:` deps of a job with `produced_by` wait for that job to reach
/// produced_at_frac of its run; other `file:` deps count as present.
/// With `from`, starts from the live state instead of an empty node; a file:
/// dep then counts only if it exists now or a job yet to reach it produces it.
Simulation simulate(const Plan& plan, const SimOptions& opt, const SimStart* from = nullptr);
/// The same with the model made beforehand (SimModel(plan, opt)).
Simulation simulate(const Plan& plan, const SimOptions& opt, SimModel model, const SimStart* from);

/// The original's output: one row per job (eval_ jobs only with `all`) in
/// order of (start, id), the makespan and utilization line, and the first-look
/// line. Byte for byte the original's.
std::string format_timeline(const Plan& plan, const Simulation& sim, const SimOptions& opt, bool all);

/// Why the simulation got stuck, one line per job, for stderr.
std::string format_stuck(const Plan& plan, const Simulation& sim);

}  // namespace gpuq
