// The live queue as the engine sees it and the state file records it, kept in step: the
// engine loaded from the file's entries, each of its changes written back into them (life.h's
// write_life), and the event log's lines made from the same changes (events.h's events_of).
// `run`'s tick, the control commands and `status`'s refresh all go through here. Pure.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "gpuq/core/engine.h"
#include "gpuq/core/events.h"
#include "gpuq/core/plan.h"
#include "gpuq/core/state.h"

namespace gpuq {

/// The engine over a state (times in seconds since the epoch).
class QueueState {
 public:
  /// Loads `state` at `now`: each plan job's entry read into its life (a running entry with a
  /// batch queue's id and no start is queued there). What the load itself changes (a pending
  /// job whose plain dep failed becomes blocked) is written back at once. `by` names the
  /// writer in the event log ("run", "kill", ...).
  QueueState(const Plan& plan, const Policy& policy, State state, double now, std::string by,
             std::shared_ptr<const PlanIndex> index = nullptr);

  const Plan& plan() const { return *plan_; }
  State& state() { return state_; }
  const State& state() const { return state_; }
  Engine& engine() { return *engine_; }
  const Engine& engine() const { return *engine_; }

  /// Applies an event at `now`, writes its changes into the entries; its effects.
  const Effects& apply(const EngineEvent& e, double now);

  /// The entry of plan job j (a pending one made if it has none).
  JobState& entry(size_t j);

  /// A job the engine launched is running as `pid` (and `pid_start`, `queue_id` where the
  /// backend gives them): recorded in its entry and in its start event.
  void launched(size_t j, long long pid, std::optional<unsigned long long> pid_start,
                std::optional<long long> queue_id);

  /// The event log's lines for the changes so far, in order; handed out once.
  std::vector<Event> take_events();
  /// Every change so far (job, the life it entered, why), in order; handed out once.
  std::vector<Change> take_changes();

  /// Some entry of the state that is no job of the plan runs (a job removed from it).
  bool others_running() const;

  /// The plan changed (a reload): the engine over `plan`, from the entries as they are.
  void use_plan(const Plan& plan, double now, std::shared_ptr<const PlanIndex> index = nullptr);

 private:
  void load(const Plan& plan, const Policy& policy, double now, std::shared_ptr<const PlanIndex> index);
  void write_back(double now);

  const Plan* plan_;
  State state_;
  std::optional<Engine> engine_;
  std::string by_;
  std::vector<Event> events_;
  std::vector<Change> changes_;
};

}  // namespace gpuq
