// How jobs and `gpuq run` end: the steps for jobs that ended on their own, time limits, kills
// past --kill-grace and the hang watchdog; then whether all is finished, and the last lines.
#include <fmt/format.h>

#include <set>

#include "gpuq/core/outlook.h"

#include <algorithm>
#include <limits>

#include "gpuq/core/host_mem.h"
#include "gpuq/core/limits.h"
#include "gpuq/core/local_time.h"
#include "gpuq/core/watchdog.h"
#include "gpuq/live/control.h"
#include "gpuq/live/run_loop.h"
#include "gpuq/core/hint.h"
#include "gpuq/core/stale.h"
#include "run_tick.h"

namespace gpuq {

// Jobs that ended, given to the engine; then kill what they left in their process group
// (fix 7: only if the pid is not now some other process), once the state that records the end is
// saved (signal_groups). A job's end is usually read while its wrapper, the group's leader, still
// syncs the code: `run` wakes on the exit code's rename, and the wrapper syncs it after
// (write_exit_code), so a chain's next job starts without waiting for that sync. `run` syncs each
// code it read itself before any save records it (sync_ends): the group's SIGKILL after the save,
// or anything that killed the wrapper before, may cut the wrapper's own sync short, and a power
// cut must not leave a state that says done beside an exit file that lost its code. A job's
// cgroup is removed here, before the save, and its removal kills the wrapper: those codes are
// synced first.
void RunLoop::refresh_ended(Tick& t) {
  bool cgroup = false;
  for (const EndedLine& e : settle(t.world.jobs, *q_, t.now)) {
    if (!e.not_started.empty()) t.not_started = e.not_started;
    const JobState& s = *q_->state().find(e.id);
    if (s.pid && s.status != Status::Pending && os_.launcher.identify(s) != Identity::Other)
      t.signals.push_back({.group = *s.pid, .sig = Signal::Kill, .recorded = false});
    t.unsynced_ends.push_back(e.id);
    cgroup = cgroup || s.cgroup;
    say(t, e.line, "end " + e.id);
    t.ended.insert(e.id);
  }
  if (cgroup) sync_ends(t);
  remove_cgroups(t);
}

// The exit codes of the ends this tick read, and of the groups it SIGKILLs, made durable (a
// failure said once: the state records the code all the same). A code whose wrapper synced it
// already costs little; a job with no exit file has nothing to sync.
void RunLoop::sync_ends(Tick& t) {
  if (t.unsynced_ends.empty()) return;
  for (const std::string& problem : os_.launcher.sync_ends(t.unsynced_ends)) say(t, problem);
  t.unsynced_ends.clear();
}

// The cgroups of attempts that ended (cgroup.h): what is left in each killed, its peak kept in the
// entry, the group removed; one whose processes still die is tried again in a second. Not the
// group of a job stopped and still in its --kill-grace (a time limit, `gpuq kill`, over memory:
// its entry says failed at once): it may be saving a checkpoint; escalate_kills kills the group
// when the grace is over, and its removal follows.
void RunLoop::remove_cgroups(Tick& t) {
  auto remove = [&](const std::string& group, JobState* s) {
    CgroupGone g = os_.launcher.remove_cgroup(group);
    if (s && g.peak_bytes) {
      // The group's peak is what the kernel held to mem_gib (page cache included), and it sees
      // what a sample between two ticks missed: the attempt's host peak is at least it, so that
      // history, learned estimates and validate's warning read the figure the limit is about.
      long long mib = (*g.peak_bytes + (1 << 20) - 1) >> 20;
      s->mem_cgroup_peak_mib = mib;
      if (mib > s->mem_peak_mib.value_or(-1)) s->mem_peak_mib = mib;
    }
    if (!g.gone) t.wake_in = std::min(t.wake_in, 1.0);
    return g.gone;
  };
  for (auto& [id, s] : q_->state().entries()) {
    if (!s.cgroup || s.status == Status::Running) continue;
    if (s.kill_sent && s.pid && os_.launcher.group_alive(*s.pid)) continue;  // in its grace
    if (remove(*s.cgroup, &s)) s.cgroup.reset();
  }
  std::erase_if(host_.cgroups_left, [&](const std::string& group) { return remove(group, nullptr); });
}

// Time limits (limits.h), measured from the start the state records (an adopted job keeps
// its deadline): the warning signal once, then at the deadline time_out. The tick wakes
// for the next of them.
void RunLoop::enforce_limits(Tick& t) {
  std::vector<std::string> due;
  for (auto& [id, s] : q_->state().entries()) {
    if (s.status != Status::Running || !s.pid) continue;
    const Job* job = job_of(id);
    if (!job) continue;
    LimitCheck c = check_limit(*job, s, opt_.time_limit_factor, t.now);
    if (c.act == LimitCheck::Act::Timeout) {
      due.push_back(id);
      continue;
    }
    if (c.act == LimitCheck::Act::Warn) {
      bool sent = can_signal(os_.launcher, s);
      if (sent) t.signals.push_back({.group = *s.pid, .warn = *job->warn_signal});
      s.warn_sent = t.now;  // once, sent or not: a restarted run does not send it again
      say(t, fmt::format("warned {}: {} to {} {}{}", id, job->warn_signal->text(),
                             job->warn_signal->shell_only ? "the script's bash, through its wrapper" : "process group",
                             *s.pid, sent ? "" : " (no process left to get it)"));
    }
    t.wake_in = std::min(t.wake_in, c.next_in);
  }
  for (const std::string& id : due) time_out(t, *job_of(id), id);
}

// SIGTERM to a job the engine stopped, while the pid is still the job's (escalate_kills sends
// SIGKILL after --kill-grace), sent once the state that says why is saved; true when it goes.
bool RunLoop::stop(Tick& t, JobState& s) { return stop_later(os_.launcher, s, t.now, t.signals); }

// stop() of the entry of `id`, in the words of run's lines: "SIGTERM to process group N", or "its
// process was already gone" (a time limit, a hang, idle, over memory: one wording).
std::string RunLoop::stop_words(Tick& t, const std::string& id) {
  JobState& s = *q_->state().find(id);
  return stop(t, s) ? fmt::format("SIGTERM to process group {}", *s.pid) : "its process was already gone";
}

namespace {

// What follows a stop for a time limit, a hang or idleness: retry_on_timeout's automatic retry.
const char* retry_words(const Job& job) {
  return job.retry_on_timeout ? "retried automatically (retry_on_timeout)" : "not retried automatically";
}

}  // namespace

// The job's limit is reached: the engine's timeout (failed, an exit code the original reads
// alike: not retried, unless retry_on_timeout), SIGTERM to its group (kill_sent:
// escalate_kills sends SIGKILL after --kill-grace, the GPUs busy until the group is gone).
void RunLoop::time_out(Tick& t, const Job& job, const std::string& id) {
  double start = q_->state().find(id)->start.value_or(t.now);
  if (std::optional<size_t> j = index_of(id))
    q_->apply(ev::LimitReached{*j, t.now}, t.now);
  else
    write_stop(*q_->state().find(id), job, Outcome::Timeout, Cause::Limit, t.now);  // no engine holds it
  const std::string sent = stop_words(t, id);
  const JobState& s = *q_->state().find(id);
  double limit = *limit_hours(job, opt_.time_limit_factor);
  double ran = (t.now - start) / 3600;
  std::string warned =
      s.warn_sent ? fmt::format(", warned with {} at {}", job.warn_signal ? job.warn_signal->text() : "its signal",
                                local_time(*s.warn_sent, t.now))
                  : "";
  say(t,
      fmt::format("timed out {} after {} (limit {}){}: {}; {}", job.id, hours_text(ran), hours_text(limit), warned,
                  sent, retry_words(job)),
      "timeout " + id);
  note_in_log(t, job.id, "timeout " + id, fmt::format("time limit {} reached after {}{}: SIGTERM to the job's "
                                               "process group, SIGKILL after --kill-grace {:g} s",
                                               hours_text(limit), hours_text(ran), warned, opt_.kill_grace));
}

// Killed jobs that outlive --kill-grace get SIGKILL (fix 6); until gone they keep their GPUs.
// A preempted job gets it after --preempt-grace, its time to checkpoint and exit.
void RunLoop::escalate_kills(Tick& t) {
  std::vector<std::string> gone_over;  // stopped over memory, and gone: their on_oom retry, if due
  for (auto& [id, s] : q_->state().entries()) {
    if (s.preempt && s.status == Status::Running && s.pid && !s.kill_sent) {
      if (!os_.launcher.group_alive(*s.pid)) continue;  // refresh makes it pending
      if (t.now - *s.preempt >= opt_.preempt_grace) {
        t.signals.push_back({.group = *s.pid, .sig = Signal::Kill, .cgroup = s.cgroup, .recorded = false});  // and what left it
        t.unsynced_ends.push_back(id);  // a code its wrapper renamed into place, synced before the SIGKILL cuts its sync
        say(t, fmt::format("SIGKILL to {} (process group {}): preempted {:.0f} s ago and still alive "
                               "(--preempt-grace {:g} s)",
                               id, *s.pid, t.now - *s.preempt, opt_.preempt_grace));
        s.kill_sent = t.now;  // its end is seen as for a kill: gone at the next look
      } else {
        t.running.push_back({*s.pid, id});
        t.wake_in = std::min(t.wake_in, *s.preempt + opt_.preempt_grace - t.now);
      }
      continue;
    }
    if (!s.kill_sent || !s.pid) continue;
    if (!os_.launcher.group_alive(*s.pid)) {
      s.kill_sent.reset();
      if (s.outcome == kOverMemoryOutcome) gone_over.push_back(id);
      continue;
    }
    if (t.now - *s.kill_sent >= opt_.kill_grace) {
      // The cgroup too: what left the group. After a SIGTERM decided in this tick (--kill-grace
      // 0), it goes with it or not at all: sent alone, it would end the job with its stop unsaved.
      t.signals.push_back(
          {.group = *s.pid, .sig = Signal::Kill, .cgroup = s.cgroup, .recorded = *s.kill_sent == t.now});
      t.unsynced_ends.push_back(id);  // as above
      say(t, fmt::format("SIGKILL to {} (process group {}): still alive {:.0f} s after SIGTERM", id, *s.pid,
                             t.now - *s.kill_sent));
      s.kill_sent.reset();
    } else {
      t.running.push_back({*s.pid, id});  // its end wakes the loop: the GPUs are free then, not at the grace
      t.wake_in = std::min(t.wake_in, *s.kill_sent + opt_.kill_grace - t.now);
    }
  }
  for (const std::string& id : gone_over) {
    std::optional<size_t> j = index_of(id);
    if (!j || !q_->engine().oom_retry_due(*j)) continue;
    q_->apply(ev::OomRetry{*j}, t.now);
    const Waiting* w = std::get_if<Waiting>(&q_->engine().life(*j));
    long long n = w ? w->oom_retries : 0;
    std::string values = oom_values(plan_.jobs[*j], n).text;
    say(t, fmt::format("{}'s processes are gone: on_oom runs it again (retry {} of {}{})", id, n,
                           plan_.jobs[*j].on_oom->retries, values.empty() ? "" : ": " + values));
  }
}

// The watchdogs (watchdog.h): each running job's log size (where the hang watchdog watches it)
// and what the reading says of its GPUs recorded in its entry, then judged. A job that looks
// hung is said once (until its log grows again); with on_quiet "kill" it is stopped as at its
// time limit. An idle job is acted on as its on_idle says (act_on_idle).
void RunLoop::watch_activity(Tick& t) {
  std::vector<std::pair<std::string, QuietCheck>> hung;
  std::vector<std::pair<std::string, IdleCheck>> idle;
  for (auto& [id, s] : q_->state().entries()) {
    if (s.status != Status::Running || !s.pid || s.kill_sent || s.requeue || s.preempt) continue;
    const Job* job = job_of(id);
    if (!job) continue;
    bool quiet = quiet_minutes(*job, opt_).has_value();
    note_activity(s, quiet ? os_.launcher.log_size(id) : std::nullopt, t.activity, t.now);
    if (IdleCheck c = check_idle(*job, s, opt_, t.now); c.idle)
      idle.emplace_back(id, c);
    else if (c.watched)
      t.wake_in = std::min(t.wake_in, c.next_in);
    if (!quiet) continue;
    QuietCheck c = check_quiet(*job, s, opt_, t.now);
    if (!c.hung) {
      t.wake_in = std::min(t.wake_in, c.next_in);
      continue;
    }
    if (job->kill_on_quiet) {
      hung.emplace_back(id, c);
      continue;
    }
    if (s.hung_noted) continue;
    s.hung_noted = t.now;
    say(t, fmt::format("hung? {}: {} (quiet_minutes {:g}); it keeps its GPUs: {} stops it, "
                           "on_quiet \"kill\" would have",
                           id, c.detail(), *quiet_minutes(*job, opt_), hint("kill", {id})));
  }
  for (const auto& [id, c] : hung) stop_hung(t, *job_of(id), id, c);
  // A spell over (the job worked, ended, or runs again): its next one is said again.
  for (const std::string& id : told_.under("idle:"))
    if (std::none_of(idle.begin(), idle.end(), [&](const auto& i) { return i.first == id; })) told_.gone("idle:" + id);
  for (const auto& [id, c] : idle)
    if (const JobState* s = q_->state().find(id); s && s->status == Status::Running && !s->kill_sent)
      act_on_idle(t, *job_of(id), id, c);
}

// An idle job (watchdog.h's idle watch), as its on_idle says: "warn" says so once (until it is at
// work again); "requeue" stops it as `gpuq requeue` does (it runs again, no retry spent); "kill"
// stops it as the hang watchdog does, failed with the outcome "idle". Each is an `idle` event.
void RunLoop::act_on_idle(Tick& t, const Job& job, const std::string& id, const IdleCheck& c) {
  JobState& s = *q_->state().find(id);
  std::optional<size_t> j = index_of(id);
  IdleAction what = idle_action(job, opt_);
  // A job a reload removed from the plan never runs again: it is not requeued, only said (once).
  if (what == IdleAction::Requeue && !j) what = IdleAction::Warn;
  std::string why = fmt::format("{} (idle_minutes {:g})", c.detail(), *idle_minutes(job, opt_));
  if (what == IdleAction::Warn) {
    if (!told_.fresh("idle:" + id)) return;  // said; again once the spell has ended (watch_activity)
    say(t, fmt::format("idle: {}: {}; it keeps its GPUs: {} stops it, on_idle \"requeue\" or \"kill\" would have",
                           id, why, hint("kill", {id})));
    log_idle(t, id, why + "; on_idle warn");
    return;
  }
  log_idle(t, id, fmt::format("{}; on_idle {}", why, idle_action_name(what)));
  if (what == IdleAction::Requeue) {
    q_->apply(ev::Requeue{*j, t.now}, t.now);
  } else if (j) {
    q_->apply(ev::Hung{*j, t.now, Outcome::Idle}, t.now);
  } else {
    write_stop(s, job, Outcome::Idle, Cause::Hung, t.now);
  }
  const std::string sent = stop_words(t, id);
  const char* after = what == IdleAction::Requeue ? "it runs again later (no retry spent)" : retry_words(job);
  say(t, fmt::format("{} {} as idle ({}; on_idle \"{}\"): {}; {}", what == IdleAction::Requeue ? "requeued" : "stopped",
                         id, why, idle_action_name(what), sent, after),
      "idle stop " + id);
  note_in_log(t, id, "idle stop " + id, fmt::format("idle: {}: gpuq stopped the job (on_idle \"{}\"): SIGTERM to its process "
                                           "group, SIGKILL after --kill-grace {:g} s",
                                           why, idle_action_name(what), opt_.kill_grace));
}

// The idle watch's event (PLAN.events.jsonl and the hooks): the job, its attempt and what was seen.
void RunLoop::log_idle(Tick& t, const std::string& id, const std::string& detail) {
  // Once while the state cannot be saved (each tick then decides it again from the state on disk).
  if (!log_.journal || !told_.fresh("unsaved:idle event " + id)) return;
  Event e = plan_event("idle", t.now, "run", detail);
  e.id = id;
  if (const JobState* s = q_->state().find(id)) {
    e.attempt = attempt_of(*s);
    e.gpus = s->gpus;
  }
  try {
    if (log_.journal->append_plan_event(e) && log_.hooks) log_.hooks->fire({e}, log_.journal->count());
  } catch (const StoreError& x) {
    say(t, fmt::format("cannot append the idle event of {} to the event log ({})", id, x.what()));
  }
}

// The watchdog stops a hung job as time_out stops one at its limit: the engine's Hung,
// SIGTERM, SIGKILL after --kill-grace, the GPUs busy until the group is gone.
void RunLoop::stop_hung(Tick& t, const Job& job, const std::string& id, const QuietCheck& c) {
  if (std::optional<size_t> j = index_of(id))
    q_->apply(ev::Hung{*j, t.now}, t.now);
  else
    write_stop(*q_->state().find(id), job, Outcome::Hung, Cause::Hung, t.now);
  say(t, fmt::format("stopped {} as hung ({}; on_quiet \"kill\"): {}; {}", job.id, c.detail(), stop_words(t, id),
                         retry_words(job)),
      "hung " + id);
  note_in_log(t, job.id, "hung " + id, fmt::format("hung? {}: the watchdog stopped the job (on_quiet \"kill\"): SIGTERM to "
                                               "its process group, SIGKILL after --kill-grace {:g} s",
                                               c.detail(), opt_.kill_grace));
}

// A job over its mem_gib is stopped as time_out stops one at its limit: the engine's OverMemory,
// SIGTERM, SIGKILL after --kill-grace, its GPUs busy until the group is gone. Never retried
// automatically (life.h's auto_retryable: over memory is one outcome whoever caught it).
void RunLoop::stop_over_memory(Tick& t, const Job& job, const std::string& id, double resident_gib, double mem_gib) {
  if (std::optional<size_t> j = index_of(id))
    q_->apply(ev::OverMemory{*j, t.now}, t.now);
  else
    write_stop(*q_->state().find(id), job, Outcome::OverMemory, Cause::OverMemory, t.now);
  const std::string sent = stop_words(t, id);
  std::string why = over_memory_text(mem_gib, resident_gib, opt_.mem_margin_percent);
  std::optional<size_t> j = index_of(id);
  std::string retry = j && q_->engine().oom_retry_due(*j) ? "on_oom runs it again once its processes are gone"
                                                          : "not retried automatically (on_oom would, resized)";
  say(t, fmt::format("stopped {}: over memory: {}; {}; {}", job.id, why, sent, retry), "over memory " + id);
  note_in_log(t, job.id, "over memory " + id, fmt::format("over memory: {}: gpuq stopped the job: SIGTERM to its process group, "
                                               "SIGKILL after --kill-grace {:g} s",
                                               why, opt_.kill_grace));
}

// "10 done, 1 failed (hang: killed)": how each job of the plan ended.
std::string RunLoop::outcomes(const State& state) const {
  size_t done = 0;
  std::vector<std::string> failed, blocked;
  for (size_t i = 0; i < plan_.jobs.size(); ++i) {
    const JobState* s = state.of(plan_, i);
    if (!s) continue;
    if (s->status == Status::Done) ++done;
    if (s->status == Status::Blocked) blocked.push_back(plan_.jobs[i].id);
    if (s->status != Status::Failed) continue;
    std::string how;
    switch (outcome_of(*s).value_or(Outcome::Failed)) {
      case Outcome::Killed: how = "killed"; break;
      case Outcome::Timeout: how = "timed out"; break;
      case Outcome::Hung: how = "stopped as hung"; break;
      case Outcome::Idle: how = "stopped as idle"; break;
      case Outcome::OverMemory: how = "over memory"; break;
      case Outcome::OomGpu: how = fmt::format("out of memory (GPU), exit {}", s->exit.value_or(kLostExit)); break;
      case Outcome::OomHost: how = "out of memory (host: the kernel's OOM killer)"; break;
      case Outcome::Unstartable: how = "could not start"; break;
      case Outcome::Lost: how = "lost"; break;
      default: how = fmt::format("exit {}", s->exit.value_or(kLostExit));
    }
    failed.push_back(plan_.jobs[i].id + ": " + how);
  }
  std::string out = fmt::format("{} done", done);
  // Done before their deps changed or ran again (stale.h): never rerun on their own.
  std::vector<std::string> stale;
  for (size_t i : stale_jobs(plan_, state)) stale.push_back(plan_.jobs[i].id);
  if (!stale.empty())
    out += fmt::format(" ({} stale: {}; {} reruns {})", stale.size(), id_list(stale), hint("retry --stale"),
                       stale.size() == 1 ? "it" : "them");
  if (!failed.empty()) out += fmt::format(", {} failed ({})", failed.size(), id_list(failed));
  if (!blocked.empty()) out += fmt::format(", {} blocked by a failed dep ({})", blocked.size(), id_list(blocked));
  if (end_.never_count) out += fmt::format(", {} can never start ({})", end_.never_count, end_.never_ids);
  return out;
}

bool RunLoop::all_finished(const Tick& t) const {
  (void)t;
  if (!last_save_problem_.empty()) return false;  // never finish with the last state unsaved
  // A job a reload removed from the plan is left to finish, and a killed job still finishing
  // (within --kill-grace) is not finished either: run waits for them.
  for (const auto& [id, s] : q_->state().entries())
    if ((s.removed && s.status == Status::Running) || s.kill_sent) return false;
  // The engine's word: nothing waits, runs or is held, and no automatic retry is to come.
  const Engine& e = q_->engine();
  for (size_t i = 0; i < plan_.jobs.size(); ++i) {
    const Life& l = e.life(i);
    LifeKind k = kind_of(l);
    if (k == LifeKind::Waiting || k == LifeKind::Held || k == LifeKind::Queued || k == LifeKind::Running) return false;
    if (e.retry_at(i)) return false;
  }
  return true;
}

// Nothing runs, nothing is due, and every job left waits for what never comes (a job wider than
// the node or the user's cap, GPU memory no GPU has, a file its producer ended without making):
// run ends (exit 3), naming each and why, rather than wait in silence for ever. A job that waits
// for a file no job of the plan makes (made outside gpuq) keeps the run waiting, as ever.
bool RunLoop::never_finishes(Tick& t) {
  if (!t.saved || !t.launched.empty() || t.paused || !last_save_problem_.empty()) return false;
  for (const auto& [id, s] : q_->state().entries())
    if ((s.removed && s.status == Status::Running) || s.kill_sent) return false;
  const Engine& e = q_->engine();
  std::vector<size_t> waiting;
  for (size_t i = 0; i < plan_.jobs.size(); ++i) {
    LifeKind k = kind_of(e.life(i));
    if (k == LifeKind::Held || k == LifeKind::Queued || k == LifeKind::Running || e.retry_at(i)) return false;
    if (k == LifeKind::Waiting) waiting.push_back(i);
  }
  if (waiting.empty()) return false;
  // Looked at once per state: an idle run ticks at each poll with nothing new.
  size_t sig = state_signature(q_->state()) ^ (plan_.serial * 0x9e3779b97f4a7c15ULL);
  if (end_.never_sig && *end_.never_sig == sig) return false;
  end_.never_sig = sig;
  Policy p = e.policy();
  // On a shared node the user's cap is this run's too: a job wider than it never starts here (the
  // node's decision leaves it out), with or without a node directory the run ends.
  if (node_) p.max_gpus = node_->cap();
  GpuMask free = mask_of(opt_.node_gpus) & ~t.busy;
  Outlook o = make_outlook(plan_, q_->state(), p, t.now, free, os_.files);
  std::set<size_t> never(o.never.begin(), o.never.end());
  for (size_t i : waiting)
    if (!never.count(i)) return false;
  std::vector<std::string> lines;
  for (const Stuck& st : o.sim.stuck) {
    if (st.why.kind == Why::Kind::Deps && st.why.source == Why::Source::NoProducer) return false;  // made outside gpuq?
    std::string line = fmt::format("{} can never start: {}", plan_.jobs[st.job].id, stuck_text(plan_, p, st));
    if (st.why.kind == Why::Kind::Deps && st.why.source == Why::Source::ProducerGone)
      for (const Dep& d : plan_.jobs[st.job].deps)
        if (d.kind == Dep::Kind::File && !os_.files.exists(os_.files.expand(d.target))) {
          line += fmt::format(" ({} ended without making {}", plan_.jobs[*plan_.jobs[st.job].produced_by].id, d.target);
          std::string near = nearest_existing_path(d.target, os_.files.expand(d.target), os_.files);
          line += near.empty() ? ")" : fmt::format("; did you mean {}?)", near);
        }
    lines.push_back(std::move(line));
  }
  for (const Stuck& st : o.sim.blocked)
    lines.push_back(fmt::format("{} can never start: {}", plan_.jobs[st.job].id, stuck_text(plan_, p, st)));
  for (const std::string& l : lines) say(t, l);
  std::vector<std::string> ids;
  for (size_t i : waiting) ids.push_back(plan_.jobs[i].id);
  end_.never_ids = id_list(ids);
  end_.never_count = ids.size();
  return true;
}

int RunLoop::stopped(const Wake& w) {
  State state;
  try {
    state = os_.store.read();
  } catch (const StoreError&) {
  }
  std::string list;
  size_t still = 0;
  for (auto& [id, s] : state.entries()) {
    if (s.status != Status::Running) continue;
    list += (still++ ? ", " : "") + id;
  }
  say(os_.clock.now(), fmt::format("stopped by {}: the state is saved; {} job(s) left running{}{}; the next `gpuq "
                                   "run` adopts them",
                                   w.stop_name, still, still ? ": " : "", list));
  return 0;
}

}  // namespace gpuq
