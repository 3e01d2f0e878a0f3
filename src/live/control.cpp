// The live queue's records over the ports: refresh and the control commands, as events to the
// engine (queue_state.h), their stops carried out here.
#include "gpuq/live/control.h"

#include "gpuq/core/host_mem.h"
#include "gpuq/core/hint.h"
#include "gpuq/core/job_words.h"
#include "gpuq/live/journal.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <optional>
#include <stdexcept>

#include "gpuq/core/local_time.h"
#include "gpuq/live/launcher.h"
#include "gpuq/live/backend.h"

namespace gpuq {

namespace {

// When an attempt that exited ended: when its exit code was written, where that is known and
// makes sense (from its start to now: a clock stepped since, or a file's time from another
// clock, is not believed), else now, when it was seen.
double end_of(const Observed& o, const JobState& s, double now) {
  if (!o.ended) return now;
  double start = s.start.value_or(*o.ended);
  if (*o.ended < start - 1 || *o.ended > now + 1) return now;
  return std::clamp(*o.ended, std::min(start, now), now);  // a coarse file time never before the start
}

// The line refresh prints for what the launcher saw of an attempt that ended; one seen late says
// when it ended.
std::string ended_line(const std::string& id, const Observed& o, double end, double now) {
  std::string at = clock_stamp(end);  // "[HH:MM:SS]"
  std::string late = now - end >= 2 ? fmt::format(" (it ended at {})", at.substr(1, at.size() - 2)) : "";
  switch (o.kind) {
    case Observed::Kind::Exited:
      return o.exit == 0 ? fmt::format("done {}{}", id, late)
                         : fmt::format("failed {} (exit {}){}{}", id, o.exit, late, o.note.empty() ? "" : ": " + o.note);
    case Observed::Kind::Vanished: return fmt::format("failed {} (its process is gone without an exit code)", id);
    case Observed::Kind::Aborted:
      if (o.node_restarted)
        return fmt::format("requeued {}: the node restarted while it ran (its attempt began before this boot); it "
                           "waits again, not counted against max_retries",
                           id);
      if (!o.note.empty())
        return fmt::format("requeued {}: its script could not start ({}); it waits again, not counted against "
                           "max_retries",
                           id, o.note);
      return fmt::format("requeued {}: its launch was cut short before it ran", id);
    case Observed::Kind::Running: break;
  }
  return "";
}

// An entry settled alone, without the engine (a job the plan does not have, or a refresh that
// only reads): the same lives the engine gives (life.h), written as it writes them.
void settle_entry_alone(JobState& s, const Observed& o, double now) {
  long long attempts = s.attempts_or0();
  switch (o.kind) {
    case Observed::Kind::Exited:
      write_life(s, ended_by_exit(o.exit, end_of(o, s, now), s.start, attempts), Cause::Exit);
      break;
    case Observed::Kind::Vanished: write_life(s, ended_lost(now, s.start, attempts), Cause::Vanish); break;
    case Observed::Kind::Aborted: write_life(s, Waiting{attempts}, Cause::Abort); break;
    case Observed::Kind::Running: break;
  }
}

std::optional<size_t> job_index(const Plan& plan, const std::string& id) {
  const Job* j = plan.find(id);
  if (!j) return std::nullopt;
  return static_cast<size_t>(j - plan.jobs.data());
}

// What the launcher saw (read.h's see_jobs) settled: `apply(j, event)` gives a plan job's event
// to the engine, or null to settle every entry alone.
template <class Apply>
std::vector<EndedLine> settle_entries(const JobsSeen& seen, const Plan& plan, State& state, double now,
                                      const Apply* apply) {
  std::vector<EndedLine> ended;
  for (const auto& [id, start] : seen.started) {
    std::optional<size_t> j = apply ? job_index(plan, id) : std::nullopt;
    if (j)
      (*apply)(ev::QueueStarted{*j, start});
    else if (JobState* s = state.find(id))
      s->start = start;
  }
  for (const JobSeen& js : seen.ended) {  // the engine's changes write entries as it goes
    const std::string& id = js.id;
    const Observed& o = js.seen;
    JobState* s = state.find(id);
    if (!s || s->status != Status::Running) continue;
    std::optional<size_t> j = apply ? job_index(plan, id) : std::nullopt;
    if (s->requeue) {
      // `gpuq requeue`: pending again, but only once nothing of the job is left (its GPUs are
      // free then); until then it stays running, so that no `after:` dependent starts.
      if (js.group_alive) continue;
      if (j)
        (*apply)(ev::GroupGone{*j});
      else
        write_life(*s, Waiting{s->attempts_or0()}, Cause::Requeued);
      ended.push_back({id, fmt::format("requeued {}: its process group is gone; it is pending again", id)});
      continue;
    }
    std::optional<Outcome> oom;
    if (s->preempt && o.kind != Observed::Kind::Aborted) {
      // Preempted: it gives its GPUs up once nothing of it is left (run sends SIGKILL after
      // --preempt-grace); an exit 0 on its signal is done, any other end makes it pending again.
      if (js.group_alive) continue;
      bool done = o.kind == Observed::Kind::Exited && o.exit == 0;
      std::string how = o.kind == Observed::Kind::Exited ? fmt::format("exit {}", o.exit) : "no exit code";
      ended.push_back({id, done ? fmt::format("done {} (it finished on its preemption signal)", id)
                                : fmt::format("preempted {}: it ended ({}) after its signal; it runs again when GPUs "
                                              "allow",
                                              id, how)});
    } else {
      ended.push_back({id, ended_line(id, o, end_of(o, *s, now), now)});
      if (o.kind == Observed::Kind::Aborted) ended.back().not_started = o.note;
      // A failure of a plan job looked at for an out-of-memory (host_mem.h), unless gpuq stopped it.
      if (j && (oom = js.oom))
        ended.back().oom = true, ended.back().line += *oom == Outcome::OverMemory
                                   ? fmt::format(": over memory ({})", js.oom_why)
                                   : fmt::format(": out of memory ({})", *oom == Outcome::OomGpu
                                                                             ? "GPU: its log says so"
                                                                             : "host: the kernel's OOM killer");
    }
    if (!j) {
      settle_entry_alone(*s, o, now);
      continue;
    }
    if (o.cpu_seconds) s->cpu_seconds = std::llround(*o.cpu_seconds);
    switch (o.kind) {
      case Observed::Kind::Exited: (*apply)(ev::Exited{*j, end_of(o, *s, now), o.exit, oom}); break;
      case Observed::Kind::Vanished: (*apply)(ev::Vanished{*j, now}); break;
      case Observed::Kind::Aborted:
        // The node restarted under it: its attempt ended then (by the boot), not by its doing.
        if (o.node_restarted)
          (*apply)(ev::Vanished{*j, std::min(o.ended.value_or(now), now), true});
        else
          (*apply)(ev::Aborted{*j});
        break;
      case Observed::Kind::Running: break;
    }
  }
  return ended;
}

}  // namespace

std::vector<EndedLine> settle(const JobsSeen& seen, QueueState& q, double now) {
  auto apply = [&](const EngineEvent& e) { q.apply(e, now); };
  std::vector<EndedLine> ended = settle_entries(seen, q.plan(), q.state(), now, &apply);
  // A preemptible job's own exit 85 is its checkpoint, not a failure: the engine made it waiting.
  // An out-of-memory with an on_oom retry left: the engine made it waiting, resized (host_mem.h).
  for (EndedLine& e : ended)
    if (std::optional<size_t> j = job_index(q.plan(), e.id);
        j && e.line.starts_with("failed ") && kind_of(q.engine().life(*j)) == LifeKind::Waiting) {
      const Waiting& w = std::get<Waiting>(q.engine().life(*j));
      if (e.oom && w.oom_retries > 0)
        e.line += fmt::format("; on_oom runs it again at once (retry {} of {}{})", w.oom_retries,
                              q.plan().jobs[*j].on_oom->retries,
                              oom_values(q.plan().jobs[*j], w.oom_retries).text.empty()
                                  ? ""
                                  : ": " + oom_values(q.plan().jobs[*j], w.oom_retries).text);
      else
        e.line = fmt::format("checkpointed {} (exit {}): it runs again when GPUs allow", e.id, kCheckpointExit);
    }
  return ended;
}

std::vector<EndedLine> settle_alone(const JobsSeen& seen, State& state, double now) {
  using NoApply = void (*)(const EngineEvent&);
  const NoApply* none = nullptr;
  static const Plan no_plan;
  return settle_entries(seen, no_plan, state, now, none);
}

std::vector<EndedLine> refresh(const Plan& plan, const PlanPaths& paths, State& state, double now) {
  // Jobs in a batch queue are seen through it (squeue, not /proc).
  std::unique_ptr<Launcher> launcher = backend_in_use(&state, nullptr)->launcher(plan, paths);
  return settle_alone(see_jobs(*launcher, state, now, nullptr), state, now);
}

void send_signals(Launcher& launcher, const std::vector<GroupSignal>& signals) {
  for (const GroupSignal& g : signals) {
    if (g.warn)
      launcher.warn_group(g.group, *g.warn);
    else
      launcher.signal_group(g.group, g.sig);
    if (g.cgroup) launcher.kill_cgroup(*g.cgroup);
  }
}

bool can_signal(Launcher& launcher, const JobState& s) {
  return s.pid && launcher.identify(s) == Identity::Same && launcher.group_alive(*s.pid);
}

bool stop_later(Launcher& launcher, JobState& s, double now, std::vector<GroupSignal>& signals) {
  if (!can_signal(launcher, s)) return false;
  signals.push_back({.group = *s.pid, .sig = Signal::Term});
  s.kill_sent = now;
  return true;
}

bool preempt_later(Launcher& launcher, const JobState& s, const Job& job, std::vector<GroupSignal>& signals) {
  if (!can_signal(launcher, s)) return false;
  GroupSignal g{.group = *s.pid};
  if (job.preempt_signal.given()) g.warn = job.preempt_signal.warn();
  signals.push_back(g);
  return true;
}

std::string preempt_signal_text(const JobState& s, const Job& job) {
  if (s.queue_id) return fmt::format("scancel of Slurm job {}", *s.queue_id);
  if (!job.preempt_signal.given()) return fmt::format("SIGTERM to process group {}", s.pid.value_or(0));
  return job.preempt_signal.shell_only
             ? fmt::format("{} to the script's bash (through its wrapper)", job.preempt_signal.text().substr(2))
             : fmt::format("{} to process group {}", job.preempt_signal.text(), s.pid.value_or(0));
}

namespace {

// One control command on plan job j, given to the engine; its stops carried out. False when refused.
class Command {
 public:
  Command(QueueState& q, Launcher& launcher, double now, std::vector<std::string>& lines)
      : q_(q), launcher_(launcher), now_(now), lines_(lines) {}

  /// The signals decided, sent once the state that records them is saved (control()).
  std::vector<GroupSignal> signals;

  bool hold(size_t j) {
    const std::string& id = q_.plan().jobs[j].id;
    Status was = q_.state().status_of(q_.plan(), j);
    if (kind_of(q_.engine().life(j)) == LifeKind::Queued) {
      // Submitted, not started: held where it waits (scontrol hold), or it has started already.
      BatchQueue* queue = launcher_.queue();
      if (!queue || !queue->hold(q_.entry(j))) {
        lines_.push_back(fmt::format("not held: {} is running ({} stops it)", id, hint("kill", {id})));
        return false;
      }
      q_.apply(ev::Hold{j}, now_);
      lines_.push_back(fmt::format("held {} (Slurm job {}, submitted, not started: scontrol hold); {} releases it",
                                   id, q_.entry(j).queue_id.value_or(0), hint("retry", {id})));
      return true;
    }
    const Effects& fx = q_.apply(ev::Hold{j}, now_);
    if (fx.refused == Refusal::AlreadyHeld) {
      lines_.push_back(fmt::format("{} is already held", id));
      return true;
    }
    if (fx.refused) {
      lines_.push_back(fmt::format("not held: {} is {}{}", id, status_name(was),
                                   was == Status::Running ? " (" + hint("kill", {id}) + " stops it)" : ""));
      return false;
    }
    lines_.push_back(fmt::format("held {} (was {}); {} releases it", id, status_name(was), hint("retry", {id})));
    return true;
  }

  bool retry(size_t j) {
    const std::string& id = q_.plan().jobs[j].id;
    if (const Held* h = std::get_if<Held>(&q_.engine().life(j)); h && h->in_queue) {
      // Held in the batch queue: released there, or, gone from it, pending here.
      JobState& e = q_.entry(j);
      BatchQueue* queue = launcher_.queue();
      if (queue && queue->release(e)) {
        q_.apply(ev::Retry{j}, now_);
        lines_.push_back(fmt::format("released {} (Slurm job {}: scontrol release); it waits in Slurm's queue", id,
                                     e.queue_id.value_or(0)));
        return true;
      }
      // Never twice in the queue: cancelled before the state forgets it (a cut in between leaves
      // the entry naming a job the queue no longer has, which run reads as gone).
      if (e.queue_id) launcher_.signal_group(*e.queue_id, Signal::Term);
      q_.apply(ev::Dequeued{j}, now_);
    }
    Status was = q_.state().status_of(q_.plan(), j);
    const Effects& fx = q_.apply(ev::Retry{j}, now_);
    if (fx.refused) {
      lines_.push_back(fmt::format("not retried: {} is running (pid {}); a retry would start a second copy", id,
                                   q_.entry(j).pid.value_or(0)));
      return false;
    }
    if (kind_of(q_.engine().life(j)) == LifeKind::Blocked) {
      // Released into a block: a plain dep of it is failed (or blocked) still.
      std::string deps;
      std::vector<std::string> ids;
      for (size_t d : q_.engine().why(j).jobs) {
        deps += (deps.empty() ? "" : ", ") + q_.plan().jobs[d].id;
        ids.push_back(q_.plan().jobs[d].id);
      }
      lines_.push_back(fmt::format("{} {} (was {}), but it is blocked: its dep {} failed; {} runs the dep again",
                                   was == Status::Held ? "released" : "retried", id, status_name(was), deps,
                                   hint("retry", ids)));
    } else {
      lines_.push_back(was == Status::Held ? fmt::format("released {} (was held); it is pending", id)
                                           : fmt::format("{} is pending again (was {})", id, status_name(was)));
    }
    for (const Change& c : fx.changes)
      if (c.cause == Cause::Unblock)
        lines_.push_back(fmt::format("{} is pending again (was blocked)", q_.plan().jobs[c.job].id));
    return true;
  }

  bool kill(size_t j) {
    const std::string& id = q_.plan().jobs[j].id;
    Status was = q_.state().status_of(q_.plan(), j);
    const Effects& fx = q_.apply(ev::Kill{j, now_}, now_);
    if (fx.refused) {
      lines_.push_back(fmt::format("not killed: {} is not running (it is {})", id, status_name(was)));
      return false;
    }
    say_killed(id, q_.entry(j), stop(q_.entry(j)));
    return true;
  }

  bool requeue(size_t j) {
    const std::string& id = q_.plan().jobs[j].id;
    Status was = q_.state().status_of(q_.plan(), j);
    const Effects& fx = q_.apply(ev::Requeue{j, now_}, now_);
    if (fx.refused == Refusal::Requeueing) {
      lines_.push_back(fmt::format("{} is being requeued already (since {})", id,
                                   local_time(q_.entry(j).requeue.value_or(now_), now_)));
      return true;
    }
    if (fx.refused) {
      lines_.push_back(fmt::format("not requeued: {} is not running (it is {}){}", id, status_name(was),
                                   was == Status::Pending ? "" : fmt::format("; {} makes it pending", hint("retry", {id}))));
      return false;
    }
    JobState& e = q_.entry(j);
    bool sent = stop(e);
    if (!sent && !(e.pid && launcher_.group_alive(*e.pid))) {
      q_.apply(ev::GroupGone{j}, now_);
      lines_.push_back(fmt::format("requeued {}: its process was already gone; it is pending again", id));
      return true;
    }
    e.kill_sent = now_;  // run sends SIGKILL after --kill-grace, as after `kill`
    lines_.push_back(fmt::format("requeueing {}: sent SIGTERM to process group {}; it stays running until the group is "
                                 "gone, then it is pending again",
                                 id, e.pid.value_or(0)));
    return true;
  }

  /// `gpuq preempt`: the job stops as a preemption stops it (its preempt_signal; SIGKILL by `run`
  /// after --preempt-grace) and runs again when GPUs allow; an exit 0 on the signal is done.
  bool preempt(size_t j) {
    const Job& job = q_.plan().jobs[j];
    Status was = q_.state().status_of(q_.plan(), j);
    ev::Preempt p{j, now_, std::nullopt};
    p.checkpoint = launcher_.checkpointed_at(job.id);
    const Effects& fx = q_.apply(p, now_);
    if (fx.refused == Refusal::Requeueing) {
      lines_.push_back(fmt::format("{} is being {} already", job.id, q_.entry(j).preempt ? "preempted" : "requeued"));
      return true;
    }
    if (fx.refused == Refusal::NotPreemptible) {
      lines_.push_back(fmt::format("not preempted: {} is not preemptible (give it \"preemptible\": true, or the "
                                   "setting preemptible true, if it can stop and resume)",
                                   job.id));
      return false;
    }
    if (fx.refused) {
      lines_.push_back(fmt::format("not preempted: {} is not running (it is {})", job.id, status_name(was)));
      return false;
    }
    JobState& e = q_.entry(j);
    bool sent = preempt_later(launcher_, e, job, signals);
    lines_.push_back(sent ? fmt::format("preempted {}: {}; it is pending again once it ends (an exit 0 is done), "
                                        "SIGKILL by `gpuq run` after --preempt-grace; it runs again when GPUs allow",
                                        job.id, preempt_signal_text(e, job))
                          : fmt::format("preempted {}: its process was already gone; `gpuq run` makes it pending "
                                        "again",
                                        job.id));
    return true;
  }

  /// `kill` of a job the plan no longer has, from its entry alone.
  bool kill_alone(const std::string& id, JobState& s) {
    if (s.status != Status::Running) {
      lines_.push_back(fmt::format("not killed: {} is not running (it is {})", id, status_name(s.status)));
      return false;
    }
    JobState before = s;
    Ended end;
    end.attempts = s.attempts_or0();
    end.outcome = Outcome::Killed;
    end.exit = kKilledExit;
    end.end = now_;
    end.start = s.start;
    write_life(s, end, Cause::Kill);
    say_killed(id, s, stop(s));
    for (Event& e : events_of(id, Change{0, LifeKind::Running, end, Cause::Kill}, before, s, now_, "kill"))
      alone_events.push_back(std::move(e));
    return true;
  }

  std::vector<Event> alone_events;  ///< the events of entries settled alone

 private:
  // SIGTERM to the job's group, while the pid is still the job's (fix 7: a recycled pid's
  // group is someone else's), sent once the state is saved; the time recorded for run's
  // --kill-grace.
  bool stop(JobState& e) { return stop_later(launcher_, e, now_, signals); }

  void say_killed(const std::string& id, const JobState& e, bool sent) {
    if (sent && e.queue_id)
      lines_.push_back(fmt::format("killed {}: scancel of Slurm job {}; `gpuq run` sends SIGKILL (scancel -s KILL) if "
                                   "it outlives --kill-grace",
                                   id, *e.queue_id));
    else if (sent)
      lines_.push_back(fmt::format("killed {}: sent SIGTERM to process group {}; `gpuq run` sends SIGKILL if it "
                                   "outlives --kill-grace",
                                   id, *e.pid));
    else
      lines_.push_back(fmt::format("killed {}: its process was already gone; marked failed", id));
  }

  QueueState& q_;
  Launcher& launcher_;
  double now_;
  std::vector<std::string>& lines_;
};

void log_events(const std::string& events_log, const std::vector<Event>& events, std::vector<std::string>& lines) {
  if (events_log.empty()) return;
  try {
    append_events(events_log, events);
  } catch (const StoreError& e) {
    lines.push_back(fmt::format("note: {}; the next `gpuq run` logs these events", e.what()));
  }
}

}  // namespace

std::vector<std::string> finish_requeues(const Plan& plan, Store& store, Launcher& launcher,
                                         const std::vector<std::string>& ids, double now,
                                         const std::string& events_log) {
  std::vector<std::string> lines;
  Store::Locked lock(store);
  QueueState q(plan, Policy{}, store.read(), now, "requeue");
  bool changed = false;
  std::vector<Event> alone;
  for (const auto& id : ids) {
    JobState* s = q.state().find(id);
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
    if (std::optional<size_t> j = job_index(plan, id))
      q.apply(ev::GroupGone{*j}, now);
    else
      write_life(*s, Waiting{s->attempts_or0()}, Cause::Requeued);
    changed = true;
    lines.push_back(fmt::format("requeued {}: its process group is gone; it is pending again", id));
  }
  if (!changed) return lines;
  store.write(q.state(), false);
  log_events(events_log, q.take_events(), lines);
  return lines;
}

ControlResult control(const Plan& plan, const std::string& plan_name, Store& store, Launcher& launcher, Clock& clock,
                      const std::string& action, const std::vector<std::string>& ids, const std::string& events_log,
                      const Policy& policy) {
  if (action != "hold" && action != "retry" && action != "kill" && action != "requeue" && action != "preempt")
    throw std::invalid_argument("control: no action " + action);
  ControlResult r;
  // A job the plan no longer has (removed from it while it ran, or a plan that does not load:
  // then `plan` is empty) can still be killed from its entry: nothing else could stop it. The
  // state is read for that without the lock; unknown ids change nothing.
  std::optional<State> peek;
  std::vector<std::string> unknown;
  std::string suggestions;  // `; did you mean "X"?` for each mistyped id
  for (const auto& id : ids) {
    if (plan.find(id)) continue;
    if (!peek) peek = store.read();
    const JobState* s = peek->find(id);
    if (action == "kill" && s && s->status == Status::Running) {
      r.lines.push_back(plan.jobs.empty()  // a plan that does not load: the job may well be in the file
                            ? fmt::format("note: killing {} as its entry in the state says", id)
                            : fmt::format("note: {} is not in {}; killing it as its entry in the state says", id, plan_name));
      continue;
    }
    unknown.push_back(s && s->status == Status::Running ? id + " (running, but only kill acts on a job the plan no longer has)"
                                                        : id);
    if (!s || s->status != Status::Running) suggestions += job_suggestion(plan, id);
  }
  if (!unknown.empty()) {
    std::string list;
    for (const auto& u : unknown) list += (list.empty() ? "" : ", ") + u;
    r.lines = {fmt::format("gpuq {}: no job {} in {}{}; nothing was changed", action, list, plan_name, suggestions)};
    r.status = 2;
    return r;
  }
  Store::Locked lock(store);
  double now = clock.now();
  QueueState q(plan, policy, store.read(), now, action);
  Command cmd(q, launcher, now, r.lines);
  bool refused = false;
  for (const auto& id : ids) {
    std::optional<size_t> j = job_index(plan, id);
    bool ok = !j                   ? cmd.kill_alone(id, *q.state().find(id))
              : action == "hold"    ? cmd.hold(*j)
              : action == "retry"   ? cmd.retry(*j)
              : action == "requeue" ? cmd.requeue(*j)
              : action == "preempt" ? cmd.preempt(*j)
                                    : cmd.kill(*j);
    refused = refused || !ok;
  }
  // The stops are on disk before any is sent: a failed write sends none (StoreError: nothing
  // was changed), and a power cut between the two leaves the record of a stop that never came,
  // not a job stopped with no word of why (its exit read as a failure, and retried).
  bool stops = !cmd.signals.empty();
  store.write(q.state(), stops);
  if (stops) store.sync();
  send_signals(launcher, cmd.signals);
  std::vector<Event> events = q.take_events();
  for (Event& e : cmd.alone_events) events.push_back(std::move(e));
  log_events(events_log, events, r.lines);
  r.status = refused ? 1 : 0;
  return r;
}

}  // namespace gpuq
