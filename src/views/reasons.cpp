// The engine's reasons in words.
#include "gpuq/core/job_words.h"
#include "gpuq/views/reasons.h"

#include <fmt/format.h>

#include <algorithm>
#include <set>

#include "gpuq/core/hint.h"
#include "gpuq/core/limits.h"
#include <cmath>

#include "gpuq/core/local_time.h"
#include "gpuq/core/watchdog.h"
#include "gpuq/views/node_text.h"

namespace gpuq {

namespace {

// "a, b, c, d, e and 3 more".
std::string names(const Plan& plan, const std::vector<size_t>& jobs) {
  return few_of(jobs.size(), 5, [&](size_t i) { return plan.jobs[jobs[i]].id; });
}

std::string names(const std::vector<std::string>& ids) { return few_of(ids, 5); }

// What comes after a failure: the automatic retry and when, or how to run it again.
std::string next_for(const Job& j, const JobState& s, const Outlook& o) {
  Life l = life_of(&s, false, o.now);
  const Ended* e = std::get_if<Ended>(&l);
  if (e && will_retry(*e, o.policy.retries_of(j)))
    return fmt::format("; automatic retry {} of {} at {}", s.attempts_or0() + 1, o.policy.retries_of(j),
                       local_time(*s.end + o.policy.retry_after, o.now));
  return "; " + hint("retry", {j.id}) + " runs it again";
}

std::string failed(const Job& j, const JobState& s, const Outlook& o) {
  const Policy& p = o.policy;
  std::optional<Outcome> out = outcome_of(s);
  if (out == Outcome::Timeout) {
    std::string why = "timed out";
    if (s.start && s.end) why += " after " + hours_text((*s.end - *s.start) / 3600);
    if (auto limit = limit_hours(j, p.time_limit_factor)) why += " (limit " + hours_text(*limit) + ")";
    if (s.warn_sent)
      why += fmt::format(", warned with {} at {}", j.warn_signal ? j.warn_signal->text() : "its signal",
                         local_time(*s.warn_sent, o.now));
    return why + next_for(j, s, o);
  }
  if (out == Outcome::Hung || out == Outcome::Idle) {  // a watchdog stopped it: what it saw at the end
    bool hung = out == Outcome::Hung;
    std::string why = hung ? "stopped as hung" : "stopped as idle";
    if (s.end) {
      JobState then = s;
      then.status = Status::Running;
      QuietCheck q = hung ? check_quiet(j, then, p, *s.end) : QuietCheck{};
      IdleCheck i = hung ? IdleCheck{} : check_idle(j, then, p, *s.end);
      if (q.watched || i.idle) why += ": " + (hung ? q.detail() : i.detail());
    }
    return why + (hung ? " (on_quiet \"kill\")" : " (on_idle \"kill\")") + next_for(j, s, o);
  }
  if (out == Outcome::OverMemory) {
    std::string why = "stopped over memory";
    if (s.mem_peak_mib)
      why += fmt::format(": {:.2f} GiB resident at the most, its mem_gib is {:g}",
                         static_cast<double>(*s.mem_peak_mib) / 1024, j.mem_gib);
    return why + next_for(j, s, o);
  }
  if (out == Outcome::OomGpu || out == Outcome::OomHost)
    return fmt::format("out of memory ({}; exit {}){}",
                       out == Outcome::OomGpu ? "GPU: its log says so" : "host: the kernel's OOM killer",
                       s.exit.value_or(kLostExit), next_for(j, s, o));
  if (out == Outcome::Killed) return "killed; " + hint("retry", {j.id}) + " runs it again";
  if (out == Outcome::Unstartable)
    return fmt::format("could not start: {}; not retried automatically: fix that, then {}",
                       s.reason.value_or("unknown cause"), hint("retry", {j.id}));
  std::string next = next_for(j, s, o);
  if (next.rfind("; automatic", 0) == 0) return fmt::format("failed (exit {}){}", s.exit.value_or(kLostExit), next);
  return fmt::format("failed (exit {}), automatic retries used up; {} runs it again",
                     s.exit.value_or(kLostExit), hint("retry", {j.id}));
}

// "; GPU 1 busy: 20000 MiB in use by another process" for each GPU of the node another user holds.
std::string others(const Outlook& o) {
  std::string s;
  GpuMask node = mask_of(o.policy.node_gpus);
  std::set<std::string_view> said;  // a job on several GPUs is named once
  for (auto& [g, text] : o.others)
    if ((node & (GpuMask{1} << g)) && said.insert(text).second) s += "; " + text;
  return s;
}

std::string waiting(const Plan& plan, const Outlook& o, const JobView& v, const Why& w) {
  const Job& j = plan.jobs[v.job];
  const std::vector<std::string>& missing_files = o.missing_files[static_cast<size_t>(v.wait_at)];
  switch (w.kind) {
    case Why::Kind::Deps: {
      std::vector<std::string> parts;
      if (!w.jobs.empty()) parts.push_back("waits for " + names(plan, w.jobs) + " to be done");
      if (!w.afters.empty()) parts.push_back("waits for " + names(plan, w.afters) + " to finish");
      if (!missing_files.empty()) parts.push_back("waits for the file " + names(missing_files));
      std::string why;
      for (size_t k = 0; k < parts.size(); ++k) why += (k ? "; " : "") + parts[k];
      return why;
    }
    case Why::Kind::Ready:
      if (o.run.known && !o.run.running) return "ready: starts when " + hint("run") + " is started";
      return "ready: starts at the next tick";
    case Why::Kind::Paused: return "paused: ready, starts at the first tick after " + hint("resume");
    case Why::Kind::Backfill:
      return fmt::format("held back by the backfill limit: est {}h is over --backfill-max-hours {} while {} "
                         "waits for {}",
                         j.est_hours, o.policy.backfill_max_hours, plan.jobs[w.head].id,
                         w.head_host ? "cores or host memory" : "GPUs");
    case Why::Kind::Gpus: {
      std::string why = fmt::format("needs {} GPU{}, {} free", j.gpus, j.gpus == 1 ? "" : "s", w.free);
      if (o.policy.packed_gib(j) > 0)
        why = fmt::format("needs {:g} GiB on {} GPU{}, {} {} room for it (the most on one: {:.1f} GiB)",
                          *j.gpu_mem_gib, j.gpus, j.gpus == 1 ? "" : "s", w.free, w.free == 1 ? "has" : "have",
                          std::max(0.0, w.room));
      if (!w.closed) return why + others(o);
      std::vector<std::string> rs;
      for (const auto& [r, members] : w.closing)
        if (plan.reservations[r].gpus & w.closed) rs.push_back(fmt::format("#{}", r + 1));
      return why + fmt::format(" to it; GPUs {} are closed by reservation {}", py_list(ids_of(w.closed)), names(rs)) +
             others(o);
    }
    case Why::Kind::Host: return host_text(w);
    default: return "";
  }
}

}  // namespace

namespace {

// When job j runs again after `at` (hours from now): its next predicted row's start.
std::optional<double> resumes(const Outlook& o, size_t j, double at) {
  for (const SimRow& r : o.sim.rows)
    if (r.job == j && r.start > at + 1e-9) return r.start;
  return std::nullopt;
}

// The preemptions the prediction plays for or of job v: "by preempting train_c (ran 2.1h; resumes
// ~16:30)", "preempted ~14:05 for eval; resumes ~16:30", or a preemption going on now.
std::string preempt_note(const Plan& plan, const State& state, const Outlook& o, const JobView& v) {
  const JobState* s = state.of(plan, v.job);
  if (s && s->status == Status::Running && s->preempt) {
    std::string who = s->preempt_for && !s->preempt_for->empty() ? " for " + *s->preempt_for : " by hand";
    return fmt::format("stopping: preempted{} at {}; it runs again when GPUs allow", who, local_time(*s->preempt, o.now));
  }
  std::string out;
  for (const SimPreemption& p : o.sim.preemptions) {
    auto back = resumes(o, p.job, p.at);
    std::string resume = back ? "resumes ~" + local_time(o.now + *back * 3600, o.now) : "does not resume as things stand";
    if (p.by == v.job && (!v.predicted_start || std::abs(o.now + p.at * 3600 - *v.predicted_start) < 1))
      out += fmt::format("{}by preempting {} (ran {}; {})", out.empty() ? "" : "; ", plan.jobs[p.job].id,
                         duration_text(p.ran * 3600), resume);
    else if (p.job == v.job && out.empty())
      return fmt::format("preempted ~{} for {}; {}", local_time(o.now + p.at * 3600, o.now), plan.jobs[p.by].id, resume);
  }
  return out;
}

}  // namespace

std::string why_text(const Plan& plan, const State& state, const Outlook& o, const JobView& v) {
  std::string why = why_text_of(plan, state, o, v), note = preempt_note(plan, state, o, v);
  return note.empty() ? why : why.empty() ? note : why + "; " + note;
}

std::string why_text_of(const Plan& plan, const State& state, const Outlook& o, const JobView& v) {
  const Job& j = plan.jobs[v.job];
  const JobState* s = state.of(plan, v.job);
  Status st = s ? s->status : Status::Pending;
  static const Why kNone;
  const Why& w = o.wait_of(v) ? *o.wait_of(v) : kNone;
  const Stuck* fate = o.fate_of(v);
  if (v.not_in_run_plan && st == Status::Pending)
    return fmt::format("not in the plan `gpuq run` loaded at {}: it starts once run has reloaded the plan",
                       o.run.plan_loaded_at ? local_time(*o.run.plan_loaded_at, o.now) : "?");
  if (st == Status::Pending && w.kind != Why::Kind::Held && w.kind != Why::Kind::Blocked)
    if (auto r = o.node_reasons.find(v.job); r != o.node_reasons.end()) return "on the shared node: " + node_why_text(r->second, o.now);
  // Wider than the user's cap on a shared node: never, whatever is free (also when the node does
  // not list the job: its run has ended, or it is not ready yet).
  if (st == Status::Pending && (w.kind == Why::Kind::Gpus || w.kind == Why::Kind::Ready) &&
      (o.policy.over_cap(j) || o.policy.too_big(j)))
    return "never: " + stuck_text(plan, o.policy, Stuck{v.job, w});
  if (st == Status::Pending && w.kind == Why::Kind::Host && o.policy.host_too_big(j))
    return "never: " + host_too_big_text(o.policy, j);
  std::string why;
  switch (w.kind) {
    case Why::Kind::Held: return fmt::format("held by hand; {} releases it", hint("retry", {j.id}));
    case Why::Kind::Blocked:
      if (st != Status::Blocked) return fmt::format("blocked: its dep {} failed", names(plan, w.jobs));
      // Predicted to run: a retry to come releases it (run unblocks every blocked job at a retry).
      return fmt::format("blocked: its dep {} failed; {}", names(plan, w.jobs),
                         v.predicted_start ? "the next automatic retry releases it"
                         : w.jobs.empty() ? "`gpuq retry` the dep to run it"
                                          : hint("retry", {plan.jobs[w.jobs[0]].id}) + " runs the dep again");
    case Why::Kind::Failed:
      if (s) return failed(j, *s, o);
      return "";
    case Why::Kind::Queued:
      if (auto r = o.queue_reasons.find(v.job); r != o.queue_reasons.end())
        return fmt::format("queued in Slurm (Slurm's reason: {})", r->second);
      return "queued in Slurm: submitted, not started yet";
    case Why::Kind::None:
      if (st == Status::Running && s) {
        std::string said;
        for (const std::string& part :
             {check_quiet(j, *s, o.policy, o.now).text(), check_idle(j, *s, o.policy, o.now).text(),
              v.overdue ? fmt::format("past its estimate ({}h run, est {}h)", fixed(v.elapsed / 3600, 0, 1),
                                      fixed(j.est_hours, 0, 1))
                        : std::string()})
          if (!part.empty()) said += (said.empty() ? "" : "; ") + part;
        return said;
      }
      if (st == Status::Done) return "";
      break;
    default: why = waiting(plan, o, v, w);
  }
  if (fate && v.doomed) {
    std::string doomed = stuck_text(plan, o.policy, *fate);
    return why.empty() ? doomed : why + "; " + doomed;
  }
  if (why.empty() && fate) return stuck_text(plan, o.policy, *fate);
  return why;
}

std::string finding_text(const Plan& plan, const Policy& p, const Finding& f) {
  if (!f.stuck) return f.text;
  return fmt::format("can never start: {}. Change the reservations so that each job can get its GPUs",
                     stuck_text(plan, p, *f.stuck));
}

}  // namespace gpuq
