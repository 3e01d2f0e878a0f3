// The live queue's records over the ports: refresh, the control commands, status rows.
#include "gpuq/live/control.h"
#include "gpuq/live/journal.h"

#include <fmt/format.h>

#include <algorithm>
#include <optional>
#include <array>
#include <ctime>
#include <stdexcept>

#include "gpuq/core/local_time.h"
#include "gpuq/live/launcher.h"
#include "gpuq/live/slurm.h"

namespace gpuq {

JobState requeued(const JobState& s) {
  JobState fresh;
  fresh.status = Status::Pending;
  fresh.attempts = s.attempts;
  fresh.removed = s.removed;
  return fresh;
}

std::vector<Ended> refresh(Launcher& launcher, State& state, double now) {
  std::vector<Ended> ended;
  launcher.survey(state, now);
  for (auto& [id, s] : state.entries()) {
    if (s.status != Status::Running) continue;
    Observed o = launcher.observe(id, s);
    if (s.requeue && o.kind != Observed::Kind::Running) {
      // `gpuq requeue`: pending again, but only once nothing of the job is left (its GPUs are
      // free then); until then it stays running, so that no `after:` dependent starts.
      if (s.pid && launcher.group_alive(*s.pid)) continue;
      s = requeued(s);
      ended.push_back({id, fmt::format("requeued {}: its process group is gone; it is pending again", id)});
      continue;
    }
    switch (o.kind) {
      case Observed::Kind::Running:
        continue;
      case Observed::Kind::Exited:
        s.status = o.exit == 0 ? Status::Done : Status::Failed;
        s.exit = o.exit;
        s.end = now;
        ended.push_back({id, o.exit == 0 ? fmt::format("done {}", id)
                                         : fmt::format("failed {} (exit {}){}", id, o.exit,
                                                       o.note.empty() ? "" : ": " + o.note)});
        break;
      case Observed::Kind::Vanished:
        s.status = Status::Failed;
        s.exit = kLostExit;
        s.end = now;
        ended.push_back({id, fmt::format("failed {} (its process is gone without an exit code)", id)});
        break;
      case Observed::Kind::Aborted: {
        JobState fresh;
        fresh.status = Status::Pending;
        fresh.attempts = s.attempts;
        fresh.removed = s.removed;  // a job the plan no longer has stays one that never starts
        keep_attempts(s, fresh);
        s = fresh;
        ended.push_back({id, fmt::format("requeued {}: its launch was cut short before it ran", id)});
        break;
      }
    }
  }
  return ended;
}

std::vector<Ended> refresh(const PlanPaths& paths, State& state, double now) {
  if (state_in_slurm(state)) {  // its jobs are in Slurm's queue: squeue, not /proc
    static const Plan none;
    SlurmLauncher launcher(none, paths, SlurmOptions{});
    return refresh(launcher, state, now);
  }
  PosixLauncher launcher(paths);
  return refresh(launcher, state, now);
}

namespace {

/// `hold ID`: pending, failed and blocked jobs become held; so does a job submitted to
/// Slurm that has not started (scontrol hold: it stays in the queue, held). False when refused.
bool hold(State& state, const std::string& id, Launcher& launcher, std::vector<std::string>& lines) {
  Status st = state.status_of(id);
  JobState* queued = state.find(id);
  if (st == Status::Running && queued && queued->slurm_id && launcher.hold_queued(*queued)) {
    queued->status = Status::Held;
    queued->start.reset();
    lines.push_back(fmt::format("held {} (Slurm job {}, submitted, not started: scontrol hold); `gpuq retry {}` "
                                "releases it",
                                id, *queued->slurm_id, id));
    return true;
  }
  if (st == Status::Pending || st == Status::Failed || st == Status::Blocked) {
    JobState held;
    held.status = Status::Held;
    if (const JobState* prev = state.find(id)) keep_attempts(*prev, held);
    state.set(id, held);
    lines.push_back(fmt::format("held {} (was {}); `gpuq retry {}` releases it", id, status_name(st), id));
  } else if (st == Status::Held) {
    lines.push_back(fmt::format("{} is already held", id));
  } else {
    lines.push_back(fmt::format("not held: {} is {}{}", id, status_name(st),
                                st == Status::Running ? " (`gpuq kill` stops it)" : ""));
    return false;
  }
  return true;
}

/// `retry ID`: any job but a running one becomes pending, and every blocked job with it.
/// A job held in Slurm's queue is released there (scontrol release), or, gone from it, pending.
bool retry(State& state, const std::string& id, Launcher& launcher, std::vector<std::string>& lines) {
  JobState* held = state.find(id);
  if (held && held->status == Status::Held && held->slurm_id) {
    if (launcher.release_held(*held)) {
      held->status = Status::Running;
      held->start.reset();  // queued in Slurm: its start comes when Slurm starts it
      lines.push_back(fmt::format("released {} (Slurm job {}: scontrol release); it waits in Slurm's queue", id,
                                  *held->slurm_id));
      return true;
    }
    launcher.signal_group(*held->slurm_id, Signal::Term);  // never twice in the queue
    held->slurm_id.reset();
    held->pid.reset();
  }
  const JobState* s = state.find(id);
  Status st = s ? s->status : Status::Pending;
  if (st == Status::Running) {
    lines.push_back(fmt::format("not retried: {} is running (pid {}); a retry would start a second copy", id,
                                s->pid.value_or(0)));
    return false;
  }
  JobState fresh;
  fresh.status = Status::Pending;
  if (s) keep_attempts(*s, fresh);  // the picture of the past keeps the run a retry replaces
  state.set(id, fresh);
  lines.push_back(st == Status::Held ? fmt::format("released {} (was held); it is pending", id)
                                     : fmt::format("{} is pending again (was {})", id, status_name(st)));
  for (auto& [other, os] : state.entries()) {
    if (os.status == Status::Blocked) {
      os.status = Status::Pending;
      lines.push_back(fmt::format("{} is pending again (was blocked)", other));
    }
  }
  return true;
}

/// `kill ID`: SIGTERM to a running job's group (fix 6 records when, for run's SIGKILL).
bool kill(State& state, const std::string& id, Launcher& launcher, double now, std::vector<std::string>& lines) {
  JobState* s = state.find(id);
  Status st = s ? s->status : Status::Pending;
  if (st != Status::Running) {
    lines.push_back(fmt::format("not killed: {} is not running (it is {})", id, status_name(st)));
    return false;
  }
  // Only while the pid is still the job's (fix 7): a recycled pid's group is someone else's.
  bool sent = launcher.identify(*s) == Identity::Same && launcher.signal_group(*s->pid, Signal::Term);
  s->status = Status::Failed;
  s->exit = kKilledExit;
  s->end = now;
  if (sent && s->slurm_id) {
    s->kill_sent = now;
    lines.push_back(fmt::format("killed {}: scancel of Slurm job {}; `gpuq run` sends SIGKILL (scancel -s KILL) if "
                                "it outlives --kill-grace",
                                id, *s->slurm_id));
  } else if (sent) {
    s->kill_sent = now;
    lines.push_back(fmt::format("killed {}: sent SIGTERM to process group {}; `gpuq run` sends SIGKILL if it "
                                "outlives --kill-grace",
                                id, *s->pid));
  } else {
    lines.push_back(fmt::format("killed {}: its process was already gone; marked failed", id));
  }
  return true;
}

/// `requeue ID`: SIGTERM to a running job's group; it stays running (with "requeue") until the
/// group is gone, then refresh makes it pending.
bool requeue(State& state, const std::string& id, Launcher& launcher, double now, std::vector<std::string>& lines) {
  JobState* s = state.find(id);
  Status st = s ? s->status : Status::Pending;
  if (st != Status::Running) {
    lines.push_back(fmt::format("not requeued: {} is not running (it is {}){}", id, status_name(st),
                                st == Status::Pending ? "" : fmt::format("; `gpuq retry {}` makes it pending", id)));
    return false;
  }
  if (s->requeue) {
    lines.push_back(fmt::format("{} is being requeued already (since {})", id, local_time(*s->requeue, now)));
    return true;
  }
  bool sent = launcher.identify(*s) == Identity::Same && launcher.signal_group(*s->pid, Signal::Term);
  if (!sent && !(s->pid && launcher.group_alive(*s->pid))) {
    *s = requeued(*s);
    lines.push_back(fmt::format("requeued {}: its process was already gone; it is pending again", id));
    return true;
  }
  s->requeue = now;
  s->kill_sent = now;  // run sends SIGKILL after --kill-grace, as after `kill`
  lines.push_back(fmt::format("requeueing {}: sent SIGTERM to process group {}; it stays running until the group is "
                              "gone, then it is pending again",
                              id, s->pid.value_or(0)));
  return true;
}

}  // namespace

std::vector<std::string> finish_requeues(Store& store, Launcher& launcher, const std::vector<std::string>& ids) {
  std::vector<std::string> lines;
  Store::Locked lock(store);
  State state = store.read();
  bool changed = false;
  for (const auto& id : ids) {
    JobState* s = state.find(id);
    if (!s || !s->requeue || s->status != Status::Running) {
      lines.push_back(fmt::format("requeued {}: its process group is gone; `gpuq run` has made it pending again (it "
                                  "is {} now)",
                                  id, status_name(s ? s->status : Status::Pending)));
      continue;
    }
    if (s->pid && launcher.group_alive(*s->pid)) {
      lines.push_back(fmt::format("{}: process group {} is still there; it becomes pending once it is gone (`gpuq "
                                  "run` sees to it)",
                                  id, *s->pid));
      continue;
    }
    *s = requeued(*s);
    changed = true;
    lines.push_back(fmt::format("requeued {}: its process group is gone; it is pending again", id));
  }
  if (changed) store.write(state, false);
  return lines;
}

ControlResult control(const Plan& plan, const std::string& plan_name, Store& store, Launcher& launcher, Clock& clock,
                      const std::string& action, const std::vector<std::string>& ids, const std::string& events_log) {
  if (action != "hold" && action != "retry" && action != "kill" && action != "requeue")
    throw std::invalid_argument("control: no action " + action);
  ControlResult r;
  // A job the plan no longer has (removed from it while it ran, or a plan that does not load:
  // then `plan` is empty) can still be killed from its entry: nothing else could stop it. The
  // state is read for that without the lock; unknown ids change nothing.
  std::optional<State> peek;
  std::vector<std::string> unknown;
  for (const auto& id : ids) {
    if (plan.find(id)) continue;
    if (!peek) peek = store.read();
    const JobState* s = peek->find(id);
    if (action == "kill" && s && s->status == Status::Running) {
      r.lines.push_back(fmt::format("note: {} is not in {}; killing it as its entry in the state says", id, plan_name));
      continue;
    }
    unknown.push_back(s && s->status == Status::Running ? id + " (running, but only kill acts on a job the plan no longer has)"
                                                        : id);
  }
  if (!unknown.empty()) {
    std::string list;
    for (const auto& u : unknown) list += (list.empty() ? "" : ", ") + u;
    r.lines = {fmt::format("gpuq {}: no job {} in {}; nothing was changed", action, list, plan_name)};
    r.status = 2;
    return r;
  }
  Store::Locked lock(store);
  State state = store.read();
  double now = clock.now();
  std::vector<std::pair<std::string, Seen>> before;
  for (const auto& id : ids) {
    const JobState* s = state.find(id);
    bool again = std::any_of(before.begin(), before.end(), [&](const auto& b) { return b.first == id; });
    if (!again) before.emplace_back(id, s ? seen_of(*s) : Seen{});
  }
  bool refused = false;
  for (const auto& id : ids) {
    bool ok = action == "hold"      ? hold(state, id, launcher, r.lines)
              : action == "retry"   ? retry(state, id, launcher, r.lines)
              : action == "requeue" ? requeue(state, id, launcher, now, r.lines)
                                    : kill(state, id, launcher, now, r.lines);
    refused = refused || !ok;
  }
  store.write(state, false);
  if (!events_log.empty()) {
    std::vector<Event> events;
    for (const auto& [id, seen] : before)
      if (const JobState* s = state.find(id))
        for (Event& e : events_between(id, &seen, *s, now, action)) events.push_back(std::move(e));
    try {
      append_events(events_log, events);
    } catch (const StoreError& e) {
      r.lines.push_back(fmt::format("note: {}; the next `gpuq run` logs these events", e.what()));
    }
  }
  r.status = refused ? 1 : 0;
  return r;
}

}  // namespace gpuq
