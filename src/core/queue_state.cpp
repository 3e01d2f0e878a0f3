#include "gpuq/core/queue_state.h"

#include <fmt/format.h>

#include "gpuq/core/local_time.h"

#include "gpuq/core/stale.h"

#include <algorithm>

namespace gpuq {

QueueState::QueueState(const Plan& plan, const Policy& policy, State state, double now, std::string by,
                       std::shared_ptr<const PlanIndex> index)
    : plan_(&plan), state_(std::move(state)), by_(std::move(by)) {
  load(plan, policy, now, std::move(index));
}

void QueueState::load(const Plan& plan, const Policy& policy, double now, std::shared_ptr<const PlanIndex> index) {
  std::vector<Life> lives;
  lives.reserve(plan.jobs.size());
  for (size_t j = 0; j < plan.jobs.size(); ++j) {
    const JobState* s = state_.of(plan, j);
    lives.push_back(life_of(s, s && s->queue_id, now));
  }
  engine_.emplace(plan, policy, 1, std::move(index), std::move(lives));
  write_back(now);
}

void QueueState::use_plan(const Plan& plan, double now, std::shared_ptr<const PlanIndex> index) {
  plan_ = &plan;
  Policy policy = engine_->policy();
  load(plan, policy, now, std::move(index));
}

JobState& QueueState::entry(size_t j) {
  if (JobState* e = state_.of(*plan_, j)) return *e;
  state_.set(*plan_, j, JobState{});
  return *state_.of(*plan_, j);
}

const Effects& QueueState::apply(const EngineEvent& e, double now) {
  engine_->apply(e);
  write_back(now);
  return engine_->effects();
}

// Each change of the engine's last event, in order, into its job's entry, with its events.
void QueueState::write_back(double now) {
  for (const Change& c : engine_->effects().changes) {
    JobState& e = entry(c.job);
    JobState before = e;
    write_life(e, c.life, c.cause);
    std::optional<std::string> detail;
    if (c.cause == Cause::Preempt)  // whom it gives way to, and the work it loses, in its entry and its event
      for (const Preemption& p : engine_->effects().preempted)
        if (p.job == c.job) {
          e.preempt_for = p.by ? plan_->jobs[*p.by].id : p.other;
          detail = fmt::format("{}; {}", !e.preempt_for->empty() ? "for " + *e.preempt_for : "by hand",
                               p.work_text());
        }
    const std::string& id = plan_->jobs[c.job].id;
    Change logged = c;
    if (c.cause == Cause::LaunchFail) {
      // It never started: the start of this batch goes, and its end has no start.
      for (auto it = events_.rbegin(); it != events_.rend(); ++it)
        if (it->id == id && it->kind == "start") {
          events_.erase(std::next(it).base());
          break;
        }
      logged.from = LifeKind::Waiting;
    }
    for (Event& x : events_of(id, logged, before, e, now, by_)) {
      if (x.kind == "preempt") x.detail = detail;
      events_.push_back(std::move(x));
    }
    changes_.push_back(c);
  }
}

void QueueState::launched(size_t j, long long pid, std::optional<unsigned long long> pid_start,
                          std::optional<long long> queue_id) {
  JobState& e = entry(j);
  e.pid = pid;
  e.pid_start = pid_start;
  e.queue_id = queue_id;
  // The deps it starts with: a done job whose deps change or grow after this is stale (stale.h).
  if (std::vector<std::string> deps = job_deps_of(plan_->jobs[j]); !deps.empty()) set_deps_ran(e, deps);
  const std::string& id = plan_->jobs[j].id;
  for (auto it = events_.rbegin(); it != events_.rend(); ++it)
    if (it->id == id && it->kind == "start") {
      it->pid = pid;
      note_snapshot(*it, e);  // the snapshot taken at its launch, when it had none
      if (e.oom_values) it->detail = "on_oom: " + *e.oom_values;  // what it runs with after on_oom retries
      break;
    }
}

std::vector<Event> QueueState::take_events() { return std::exchange(events_, {}); }

std::vector<Change> QueueState::take_changes() { return std::exchange(changes_, {}); }

bool QueueState::others_running() const {
  size_t running = 0;
  for (const auto& [id, s] : state_.entries()) running += s.status == Status::Running;
  return running > engine_->running();
}

}  // namespace gpuq
