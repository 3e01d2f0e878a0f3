// `gpuq run`'s steps for a plan or a state that changes while it runs: reload on edit, pause, and
// the state replaced from another shell (or by the original).
#include <fmt/format.h>

#include "gpuq/core/local_time.h"
#include "gpuq/core/plan_diff.h"
#include "gpuq/live/run_loop.h"
#include "gpuq/core/hint.h"
#include "gpuq/core/job_words.h"
#include "run_tick.h"

namespace gpuq {

// The plan file changed: a valid version replaces the plan now; one with errors is said once
// (after the settle time: an editor may be mid-save) and changes nothing.
void RunLoop::reload_plan(Tick& t) {
  if (!reload_.source) return;
  PlanLook l = reload_.source->look(t.now);
  t.wake_in = std::min(t.wake_in, l.recheck_in);
  if (l.kind == PlanLook::Kind::Loaded) {
    for (const std::string& u : l.unknown_fields) say(t, "warning: " + u);
    take_plan(t, std::move(*l.plan), l.text);
  } else if (l.kind == PlanLook::Kind::Broken) {
    for (const std::string& e : l.errors) say(t, e);
    say(t, fmt::format("the plan on disk has {} problem{}; still running the version loaded at {}",
                           l.errors.size(), l.errors.size() == 1 ? "" : "s", local_time(reload_.loaded_at, t.now)));
  }
}

// `next` replaces the plan: pending jobs take their new definition at once (the scheduling
// pass reads the plan), running ones keep the one they started with (reload_.started_as) until
// they end, entries of jobs no longer in the plan get "removed" (nothing starts them again;
// a running one is left to finish), and a job back in the plan loses the mark.
void RunLoop::take_plan(Tick& t, Plan next, const std::string& text) {
  PlanChange c = diff_plans(plan_, next);
  for (auto& [id, s] : q_->state().entries()) {
    const Job* now = next.find(id);
    if (s.status == Status::Running && !reload_.started_as.count(id))
      if (const Job* was = plan_.find(id); was && (!now || !same_job(plan_, *was, next, *now)))
        reload_.started_as.emplace(id, *was);
    if (now) {
      s.removed.reset();
    } else if (!s.removed && s.status != Status::Done) {
      s.removed = t.now;
      if (s.status != Status::Running) clear_snapshot(s);  // back in the plan, it is loaded anew
    }
  }
  plan_ = std::move(next);
  index_ = std::make_shared<PlanIndex>(plan_);
  q_->use_plan(plan_, t.now, index_);
  with_file_deps_.clear();
  for (size_t i = 0; i < plan_.jobs.size(); ++i)
    if (plan_.jobs[i].has_file_dep()) with_file_deps_.push_back(i);
  reload_.loaded_at = t.now;
  snap_.due = true;  // the jobs added and changed take a snapshot of the code as it is now
  snap_.changed.insert(c.changed.begin(), c.changed.end());
  std::string what = change_text(c);
  say(t, "plan reloaded: " + what);
  if (reload_.then) reload_.then(text, t.now);
  if (!log_.journal) return;
  try {
    Event e = plan_event("reload", t.now, "run", what);
    if (log_.journal->append_plan_event(e) && log_.hooks) log_.hooks->fire({e}, log_.journal->count());
  } catch (const StoreError& e) {
    say(t, fmt::format("cannot append the reload to the event log ({})", e.what()));
  }
}

// `gpuq pause` / `gpuq resume` from another shell: said once each way.
void RunLoop::note_pause(Tick& t) {
  if (!pause_.from) return;
  std::optional<double> since = t.world.paused;
  t.paused = since.has_value();
  if (pause_.seen && since.has_value() == pause_.was.has_value()) return;
  if (since)
    say(t, fmt::format("paused since {}: no new job starts until {} (running jobs go on)",
                           local_time(*since, t.now), hint("resume")));
  else if (pause_.seen)
    say(t, "resumed: jobs start again");
  pause_.seen = true;
  pause_.was = since;
}

// The definition a running job runs with (the one it started with, when a reload changed
// or removed it), else the plan's; nullptr for a job in neither.
const Job* RunLoop::job_of(const std::string& id) const {
  auto it = reload_.started_as.find(id);
  return it != reload_.started_as.end() ? &it->second : plan_.find(id);
}

namespace {

// Handed to the batch queue, not started by it yet.
bool queued(const JobState& s) { return kind_of(life_of(&s, s.queue_id.has_value(), 0)) == LifeKind::Queued; }

// The command that most likely made an entry go from `was` to `now` (kill, hold, ...).
std::string command_of(Status was, const JobState& now) {
  if (now.status == Status::Held) return "hold";
  if (was == Status::Held && queued(now)) return "retry";  // released in Slurm's queue
  if (was == Status::Running && now.status == Status::Failed && now.exit == kKilledExit) return "kill";
  if (was == Status::Running && now.status == Status::Pending) return "requeue";
  if (was == Status::Held && now.status == Status::Blocked) return "retry";  // released into a block
  if (now.status == Status::Pending) return "retry";
  return "";
}

}  // namespace

std::string id_list(const std::vector<std::string>& ids) { return few_of(ids, 10); }

// The state was replaced since this loop saved it: a control command from another shell
// (or the original's). One line per job of the plan whose status it changed.
void RunLoop::say_changes(Tick& t, const State& before, const State& state) {
  for (size_t i = 0; i < plan_.jobs.size(); ++i) {
    const JobState* was = before.of(plan_, i);
    const JobState* now = state.of(plan_, i);
    Status a = was ? was->status : Status::Pending, b = now ? now->status : Status::Pending;
    if (a == b && now && now->requeue && !(was && was->requeue))
      say(t, fmt::format("gpuq requeue {} from another shell: SIGTERM to its process group; it is pending again "
                             "once the group is gone",
                             plan_.jobs[i].id));
    // Preempted by hand: its signal was sent there; this run sends SIGKILL after --preempt-grace.
    if (a == b && now && now->preempt && !(was && was->preempt))
      say(t, fmt::format("gpuq preempt {} from another shell: its preemption signal sent; SIGKILL after "
                             "--preempt-grace {:g} s, then it runs again when GPUs allow (an exit 0 is done)",
                             plan_.jobs[i].id, opt_.preempt_grace));
    if (a == b) continue;
    JobState shown = now ? *now : JobState{};
    std::string cmd = command_of(a, shown);
    // A job submitted to Slurm that Slurm has not started is "queued in Slurm", not running.
    auto name = [](Status st, const JobState* s) -> std::string {
      return s && queued(*s) ? "queued in Slurm" : status_name(st);
    };
    say(t, fmt::format("{} {} from another shell: {} (was {})", cmd.empty() ? "changed" : "gpuq " + cmd,
                           plan_.jobs[i].id, name(b, now), name(a, was)));
  }
}

// The first tick: the jobs an earlier run (gpuq's or the original's) left running.
void RunLoop::say_adopted(Tick& t) {
  std::vector<std::string> ids;
  for (const auto& [id, s] : q_->state().entries())
    if (s.status == Status::Running) ids.push_back(id);
  if (!ids.empty())
    say(t, fmt::format("adopted {} running job{}: {}", ids.size(), ids.size() == 1 ? "" : "s", id_list(ids)));
}

}  // namespace gpuq
