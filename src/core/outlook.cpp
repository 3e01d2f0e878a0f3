// The live queue seen from outside: the next tick as the rule book decides it,
// the prediction from the same starting point, and why each job waits.
#include "gpuq/core/outlook.h"
#include "gpuq/core/watchdog.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <ctime>
#include <unordered_map>

namespace gpuq {

namespace {

std::string names(const std::vector<std::string>& ids) {
  std::string s;
  for (size_t i = 0; i < ids.size() && i < 5; ++i) s += (i ? ", " : "") + ids[i];
  if (ids.size() > 5) s += fmt::format(" and {} more", ids.size() - 5);
  return s;
}

// File checks that look at each path once: the tick, the prediction and the reasons all ask.
class OnceFiles : public FileChecks {
 public:
  explicit OnceFiles(const FileChecks& files) : files_(files) {}
  std::string expand(const std::string& written) const override { return files_.expand(written); }
  bool exists(const std::string& path) const override {
    auto [it, fresh] = seen_.emplace(path, false);
    if (fresh) it->second = files_.exists(path);
    return it->second;
  }

 private:
  const FileChecks& files_;
  mutable std::unordered_map<std::string, bool> seen_;
};

// Blocked jobs that the first automatic retry makes pending for good: run unblocks every
// blocked job at a retry, and blocks again those with a plain dep that failed or is blocked.
// So a blocked job revives when every plain dep of it can still be done: none failed for good
// or blocked for good. Without a retry to come, none revives.
void revive_blocked(const Plan& plan, const TickPlan& tick, SimStart& st) {
  using Kind = SimStart::Kind;
  const size_t n = plan.jobs.size();
  bool retry_comes = false;
  for (size_t i = 0; i < n; ++i) retry_comes |= st.kind[i] == Kind::Retry && st.retry_in[i] < 1e300;
  for (size_t i = 0; i < n; ++i)
    if (tick.status[i] == Status::Blocked) st.kind[i] = retry_comes ? Kind::Blocked : Kind::Finished;
  if (!retry_comes) return;
  // "Blocked for good" spreads along plain deps, which form no cycle: each blocked job is
  // settled after its blocked deps (a depth-first walk with its own stack: plans are deep).
  std::vector<char> settled(n, 0);
  for (size_t root = 0; root < n; ++root) {
    if (st.kind[root] != Kind::Blocked || settled[root]) continue;
    std::vector<std::pair<size_t, size_t>> stack{{root, 0}};  // (job, next dep to look at)
    while (!stack.empty()) {
      auto& [j, k] = stack.back();
      const auto& deps = plan.jobs[j].deps;
      if (k < deps.size()) {
        const Dep& d = deps[k++];
        if (d.kind == Dep::Kind::Done && st.kind[d.job] == Kind::Blocked && !settled[d.job])
          stack.push_back({d.job, 0});
        continue;
      }
      for (const Dep& d : deps)
        if (d.kind == Dep::Kind::Done && st.kind[d.job] == Kind::Finished) st.kind[j] = Kind::Finished;
      settled[j] = 1;
      stack.pop_back();
    }
  }
}

}  // namespace

bool any_running(const State& state) {
  for (const auto& [id, s] : state.entries())
    if (s.status == Status::Running) return true;
  return false;
}

SimStart live_start(const Plan& plan, const State& state, const TickPlan& tick, const Policy& p, double now,
                    const FileChecks& files) {
  using Kind = SimStart::Kind;
  const size_t n = plan.jobs.size();
  SimStart st;
  st.kind.assign(n, Kind::Pending);
  st.elapsed.assign(n, 0);
  st.gpus.assign(n, {});
  st.retry_in.assign(n, 0);
  st.files_present.assign(n, 1);
  GpuMask plan_running = 0;
  for (size_t i = 0; i < n; ++i) {
    const JobState* s = state.of(plan, i);
    switch (tick.status[i]) {
      case Status::Pending: break;
      case Status::Running:
        st.kind[i] = Kind::Running;
        st.elapsed[i] = s->start ? std::max(0.0, (now - *s->start) / 3600) : 0;
        st.gpus[i] = s->gpus.value_or(std::vector<int>{});
        plan_running |= mask_of(st.gpus[i]);
        break;
      case Status::Done: st.kind[i] = Kind::Done; break;
      case Status::Failed:
        if (finished(s, p.max_retries)) {
          st.kind[i] = Kind::Finished;
        } else {  // not due at this tick (it would be pending): later, or never without an end time
          st.kind[i] = Kind::Retry;
          st.retry_in[i] = will_retry(s, p) ? (retry_at(*s, p) - now) / 3600 : std::numeric_limits<double>::infinity();
        }
        break;
      case Status::Blocked: st.kind[i] = Kind::Finished; break;
      case Status::Held: st.kind[i] = Kind::Held; break;
    }
    // Files matter only to jobs that are yet to start (a done job's outputs may be long gone).
    if ((st.kind[i] == Kind::Pending || st.kind[i] == Kind::Retry) && plan.jobs[i].has_file_dep())
      st.files_present[i] = files_present(plan.jobs[i], files);
  }
  revive_blocked(plan, tick, st);
  st.busy = tick.input.node & ~tick.input.free & ~plan_running;
  st.busy_hours = std::max(kSoon, p.poll / 3600);  // busy until run's next look at them, at the latest
  st.any_running = !tick.input.nothing_running;
  return st;
}

SimStart live_start(const Plan& plan, const State& state, const Policy& p, double now, GpuMask free,
                    const FileChecks& files) {
  OnceFiles once(files);
  TickPlan tick = plan_tick(plan, state, p, now, free, any_running(state), once);
  return live_start(plan, state, tick, p, now, once);
}

namespace {

// The views' fields that come from the state alone.
std::vector<JobView> views_of(const Plan& plan, const State& state, double now) {
  std::vector<JobView> views(plan.jobs.size());
  for (size_t i = 0; i < plan.jobs.size(); ++i) {
    const JobState* s = state.of(plan, i);
    JobView& v = views[i];
    v.job = i;
    Status st = s ? s->status : Status::Pending;
    v.status = status_name(st);
    if (s) {
      v.gpus = s->gpus.value_or(std::vector<int>{});
      v.attempts = s->attempts_or0();
      v.exit = s->exit;
      if (auto o = outcome_of(*s)) v.outcome = outcome_name(*o);
      v.start = s->start;
      v.end = s->end;
      v.queued_in_slurm = queued_in_slurm(*s);
      if (s->start) v.elapsed = (s->end && *s->end != 0 ? *s->end : now) - *s->start;
    }
    v.overdue = st == Status::Running && v.elapsed / 3600 > plan.jobs[i].est_hours;
  }
  return views;
}

// What `status` says of each job, from the next tick (`tick`, its pass `pass`) and the prediction.
class Reasons {
 public:
  Reasons(const Plan& plan, const State& state, const Policy& p, const TickPlan& tick, const PassResult& pass,
          const Simulation& sim, const FileChecks& files, double now, const std::map<int, std::string>& others)
      : plan_(plan), state_(state), p_(p), tick_(tick), files_(files), now_(now), others_(others),
        held_(plan.jobs.size(), nullptr), starts_(plan.jobs.size(), 0), stuck_(plan.jobs.size()),
        doomed_(plan.jobs.size()) {
    for (const Held& h : pass.held) held_[h.job] = &h;
    for (const Start& s : pass.starts) starts_[s.job] = 1;
    for (const Stuck& s : sim.stuck) stuck_[s.job] = s.why;
    for (const Stuck& s : sim.blocked) doomed_[s.job] = s.why;
  }

  /// Why job i waits, or "" when it does not.
  std::string why(size_t i, const JobView& v) const {
    const Job& j = plan_.jobs[i];
    const JobState* s = state_.of(plan_, i);
    Status st = s ? s->status : Status::Pending;
    // A job the next tick makes pending again (its retry is due, or a retry releases it) waits as pending ones do.
    if (tick_.status[i] == Status::Pending && st != Status::Pending) return pending(i);
    switch (st) {
      case Status::Held: return fmt::format("held by hand; `gpuq retry {}` releases it", j.id);
      case Status::Blocked:
        // Predicted to run: a retry to come releases it (run unblocks every blocked job at a retry).
        return fmt::format("blocked: its dep {} failed; {}", names(failed_deps(i)),
                           v.predicted_start ? "the next automatic retry releases it"
                                             : "`gpuq retry` the dep to run it");
      case Status::Failed: return failed(j, *s);
      case Status::Running: {
        if (v.queued_in_slurm) return "queued in Slurm: submitted, not started yet";
        std::string hung = check_quiet(j, *s, p_, now_).text();
        std::string over =
            v.overdue ? fmt::format("past its estimate ({}h run, est {}h)", fixed(v.elapsed / 3600, 0, 1),
                                    fixed(j.est_hours, 0, 1))
                      : "";
        return hung.empty() || over.empty() ? hung + over : hung + "; " + over;
      }
      case Status::Done: return "";
      case Status::Pending: return pending(i);
    }
    return "";
  }

 private:
  std::vector<std::string> failed_deps(size_t i) const {
    std::vector<std::string> ids;
    for (const Dep& d : plan_.jobs[i].deps)
      if (d.kind == Dep::Kind::Done && blocks_dependents(tick_.status[d.job])) ids.push_back(plan_.jobs[d.job].id);
    return ids;
  }

  std::string failed(const Job& j, const JobState& s) const {
    if (outcome_of(s) == Outcome::Timeout) return timed_out(j, s);
    if (outcome_of(s) == Outcome::Hung) return stopped_hung(j, s);
    if (outcome_of(s) == Outcome::Killed) return "killed; `gpuq retry " + j.id + "` runs it again";
    if (outcome_of(s) == Outcome::Unstartable)
      return fmt::format("could not start: {}; not retried automatically: fix that, then `gpuq retry {}`",
                         s.reason.value_or("unknown cause"), j.id);
    if (will_retry(&s, p_))
      return fmt::format("failed (exit {}); automatic retry {} of {} at {}", s.exit.value_or(kLostExit),
                         s.attempts_or0() + 1, p_.max_retries, local_time(retry_at(s, p_), now_));
    return fmt::format("failed (exit {}), automatic retries used up; `gpuq retry {}` runs it again",
                       s.exit.value_or(kLostExit), j.id);
  }

  // "timed out after 4.00h (limit 4.00h)", the warning's time if one was sent, and what comes next.
  std::string timed_out(const Job& j, const JobState& s) const {
    std::string why = "timed out";
    if (s.start && s.end) why += fmt::format(" after {:.2f}h", (*s.end - *s.start) / 3600);
    if (auto limit = limit_hours(j, p_.time_limit_factor)) why += fmt::format(" (limit {:.2f}h)", *limit);
    if (s.warn_sent)
      why += fmt::format(", warned with {} at {}", j.warn_signal ? j.warn_signal->text() : "its signal",
                         local_time(*s.warn_sent, now_));
    if (will_retry(&s, p_))
      return why + fmt::format("; automatic retry {} of {} at {}", s.attempts_or0() + 1, p_.max_retries,
                               local_time(retry_at(s, p_), now_));
    return why + "; `gpuq retry " + j.id + "` runs it again";
  }

  // "stopped as hung: log silent 42 min, GPUs idle (on_quiet "kill")", and what comes next.
  std::string stopped_hung(const Job& j, const JobState& s) const {
    std::string why = "stopped as hung";
    if (s.end) {
      JobState then = s;
      then.status = Status::Running;
      QuietCheck c = check_quiet(j, then, p_, *s.end);
      if (c.watched) why += ": " + c.detail();
    }
    why += " (on_quiet \"kill\")";
    if (will_retry(&s, p_))
      return why + fmt::format("; automatic retry {} of {} at {}", s.attempts_or0() + 1, p_.max_retries,
                               local_time(retry_at(s, p_), now_));
    return why + "; `gpuq retry " + j.id + "` runs it again";
  }

  std::string pending(size_t i) const {
    const Job& j = plan_.jobs[i];
    if (tick_.status[i] == Status::Blocked) return fmt::format("blocked: its dep {} failed", names(failed_deps(i)));
    std::vector<std::string> deps, afters, missing;
    for (const Dep& d : j.deps) {
      if (d.kind == Dep::Kind::File) {
        std::string path = files_.expand(d.target);
        if (!files_.exists(path)) missing.push_back(path);
      } else if (d.kind == Dep::Kind::Done) {
        if (tick_.status[d.job] != Status::Done) deps.push_back(plan_.jobs[d.job].id);
      } else if (!finished_as(tick_.status[d.job], state_.of(plan_, d.job), p_.max_retries)) {
        afters.push_back(plan_.jobs[d.job].id);
      }
    }
    std::vector<std::string> parts;
    if (!deps.empty()) parts.push_back("waits for " + names(deps) + " to be done");
    if (!afters.empty()) parts.push_back("waits for " + names(afters) + " to finish");
    if (!missing.empty()) parts.push_back("waits for the file " + names(missing));
    std::string why;
    for (size_t k = 0; k < parts.size(); ++k) why += (k ? "; " : "") + parts[k];
    if (why.empty() && starts_[i])
      why = p_.paused ? "paused: ready, starts at the first tick after `gpuq resume`" : "ready: starts at the next tick";
    if (why.empty() && held_[i]) why = held(i, *held_[i]);
    if (!doomed_[i].empty()) return why.empty() ? doomed_[i] : why + "; " + doomed_[i];
    return why.empty() ? stuck_[i] : why;
  }

  std::string held(size_t i, const Held& h) const {
    const Job& j = plan_.jobs[i];
    if (h.why == Held::Why::Backfill)
      return fmt::format("held back by the backfill limit: est {}h is over --backfill-max-hours {} while {} "
                         "waits for GPUs",
                         j.est_hours, p_.backfill_max_hours, plan_.jobs[h.head].id);
    std::string why = fmt::format("needs {} GPU{}, {} free", j.gpus, j.gpus == 1 ? "" : "s", h.free_for_job);
    if (!h.closed) return why + others();
    std::vector<std::string> rs;
    const auto& mine = plan_.reservations_of[i];
    const auto& open = tick_.input.open;
    for (size_t r = 0; r < open.size(); ++r)
      if (open[r] && (plan_.reservations[r].gpus & h.closed) && std::find(mine.begin(), mine.end(), r) == mine.end())
        rs.push_back(fmt::format("#{}", r + 1));
    return why + fmt::format(" to it; GPUs {} are closed by reservation {}", py_list(ids_of(h.closed)), names(rs)) +
           others();
  }

  // "; GPU 1 busy: 20000 MiB in use by another process" for each GPU of the node another user's memory holds.
  std::string others() const {
    std::string s;
    for (auto& [g, text] : others_)
      if (tick_.input.node & (GpuMask{1} << g)) s += "; " + text;
    return s;
  }

  const Plan& plan_;
  const State& state_;
  const Policy& p_;
  const TickPlan& tick_;
  const FileChecks& files_;
  double now_;
  const std::map<int, std::string>& others_;
  std::vector<const Held*> held_;
  std::vector<char> starts_;
  std::vector<std::string> stuck_;
  std::vector<std::string> doomed_;  // predicted blocked: a dep is predicted to time out
};

}  // namespace

Outlook make_outlook(const Plan& plan, const State& state, const Policy& p, double now, GpuMask free,
                     const FileChecks& files_uncached, std::optional<size_t> explain_first,
                     const std::map<int, std::string>& others) {
  Outlook o;
  o.now = now;
  const size_t n = plan.jobs.size();
  OnceFiles files(files_uncached);
  // One tick's rules, for both the prediction's starting point and the reasons.
  TickPlan tick = plan_tick(plan, state, p, now, free, any_running(state), files, true);
  SimStart start = live_start(plan, state, tick, p, now, files);
  o.sim = simulate(plan, p, &start);
  o.jobs = views_of(plan, state, now);
  // Paused: the prediction is made as if resumed now, then keeps only the running jobs: the
  // others start after `gpuq resume`, at a time no one knows.
  o.paused = p.paused;
  if (p.paused) {
    std::vector<SimRow> running;
    for (SimRow& r : o.sim.rows)
      if (start.kind[r.job] == SimStart::Kind::Running)
        running.push_back(std::move(r));
      else
        o.jobs[r.job].after_resume = true;
    o.sim.rows = std::move(running);
  }
  for (size_t i = 0; i < n; ++i)
    if (const JobState* s = state.of(plan, i)) o.jobs[i].hung = check_quiet(plan.jobs[i], *s, p, now).hung;

  double last_end = 0;
  for (const SimRow& r : o.sim.rows) {
    last_end = std::max(last_end, r.end);
    JobView& v = o.jobs[r.job];
    const JobState* s = state.of(plan, r.job);
    v.predicted_start = s && s->status == Status::Running && s->start ? *s->start : now + r.start * 3600;
    v.predicted_finish = now + r.end * 3600;
  }
  bool after_resume = std::any_of(o.jobs.begin(), o.jobs.end(), [](const JobView& v) { return v.after_resume; });
  if (!o.sim.rows.empty() && !after_resume) o.finish = now + last_end * 3600;
  for (const Stuck& s : o.sim.stuck) o.never.push_back(s.job);
  for (const Stuck& s : o.sim.blocked) o.never.push_back(s.job);

  // Which jobs to explain: all, or the first rows `status` shows.
  std::vector<size_t> explain;
  if (explain_first) {
    o.order = predicted_order(o, *explain_first);
    o.order_sorted = std::min(o.order.size(), *explain_first);
    explain.assign(o.order.begin(), o.order.begin() + static_cast<std::ptrdiff_t>(o.order_sorted));
  } else {
    for (size_t i = 0; i < n; ++i) explain.push_back(i);
  }
  PassResult pass = schedule_pass(plan, ReadySet(plan, p.backfill_max_hours, tick.ready), tick.input);
  Reasons reasons(plan, state, p, tick, pass, o.sim, files, now, others);
  for (size_t i : explain) o.jobs[i].why = reasons.why(i, o.jobs[i]);
  return o;
}

std::vector<size_t> predicted_order(const Outlook& o, size_t first) {
  // By predicted start, ties in plan order; (start, job) pairs are unique, so sorting them is
  // the stable sort by start.
  std::vector<std::pair<double, size_t>> keyed;
  for (const JobView& v : o.jobs)
    if (v.status != "done") keyed.emplace_back(v.predicted_start.value_or(1e300), v.job);
  if (first < keyed.size())
    std::partial_sort(keyed.begin(), keyed.begin() + static_cast<std::ptrdiff_t>(first), keyed.end());
  else
    std::sort(keyed.begin(), keyed.end());
  std::vector<size_t> open(keyed.size());
  for (size_t k = 0; k < keyed.size(); ++k) open[k] = keyed[k].second;
  return open;
}

}  // namespace gpuq
