#include "gpuq/core/rules.h"

#include <cmath>

namespace gpuq {

bool queued_in_slurm(const JobState& s) { return s.status == Status::Running && s.slurm_id && !s.start; }

std::optional<Outcome> outcome_of(const JobState& s) {
  if (s.status == Status::Done) return Outcome::Done;
  if (s.status != Status::Failed) return std::nullopt;
  if (timed_out(s)) return Outcome::Timeout;
  if (s.outcome && *s.outcome == "hung") return Outcome::Hung;
  if (s.outcome && *s.outcome == kUnstartableOutcome) return Outcome::Unstartable;
  if (s.exit == kKilledExit) return Outcome::Killed;
  if (s.exit == kLostExit) return Outcome::Lost;
  return Outcome::Failed;
}

const char* outcome_name(Outcome o) {
  switch (o) {
    case Outcome::Done: return "done";
    case Outcome::Failed: return "failed";
    case Outcome::Killed: return "killed";
    case Outcome::Lost: return "lost";
    case Outcome::Timeout: return "timeout";
    case Outcome::Hung: return "hung";
    case Outcome::Unstartable: return "unstartable";
  }
  return "failed";
}

namespace {

bool unstartable(const JobState& s) { return s.outcome && *s.outcome == kUnstartableOutcome; }

}  // namespace

bool finished_as(Status st, const JobState* s, long long max_retries) {
  if (st == Status::Done || st == Status::Blocked) return true;
  return st == Status::Failed && (s->exit == kKilledExit || s->attempts_or0() >= max_retries || unstartable(*s));
}

bool finished(const JobState* s, long long max_retries) { return s && finished_as(s->status, s, max_retries); }

bool files_present(const Job& job, const FileChecks& files) {
  for (const Dep& d : job.deps)
    if (d.kind == Dep::Kind::File && !files.exists(files.expand(d.target))) return false;
  return true;
}

GpuMask busy_in_state(const State& state) {
  GpuMask busy = 0;
  for (const auto& [id, s] : state.entries())
    if ((s.status == Status::Running || s.kill_sent) && s.gpus) busy |= mask_of(*s.gpus);
  return busy;
}

GpuMask busy_by_memory(const std::map<int, long long>& used_mib, long long max_used_mib) {
  GpuMask busy = 0;
  for (auto& [g, mib] : used_mib)
    if (mib > max_used_mib && g >= 0 && g <= kMaxGpuId) busy |= GpuMask{1} << g;
  return busy;
}

std::map<int, long long> used_by_others(const std::map<int, long long>& used_mib, long long max_used_mib,
                                        const State& state) {
  GpuMask ours = busy_in_state(state);
  std::map<int, long long> others;
  for (auto& [g, mib] : used_mib)
    if (mib > max_used_mib && g >= 0 && g <= kMaxGpuId && !(ours & (GpuMask{1} << g))) others[g] = mib;
  return others;
}

std::string busy_by_other_text(int gpu, long long mib) {
  return "GPU " + std::to_string(gpu) + " busy: " + std::to_string(mib) + " MiB in use by another process";
}

bool blocks_dependents(Status st) { return st == Status::Failed || st == Status::Blocked; }

bool leaves_reservation(Status st) { return st == Status::Done || st == Status::Failed || st == Status::Blocked; }

namespace {

// Failed, not killed, retries left: the original retries it once --retry-after has passed.
bool retries_left(const JobState* s, const Policy& p) {
  return s && s->status == Status::Failed && s->exit != kKilledExit && s->attempts_or0() < p.max_retries &&
         !unstartable(*s);
}

}  // namespace

bool will_retry(const JobState* s, const Policy& p) { return retries_left(s, p) && s->end.has_value(); }

double retry_at(const JobState& s, const Policy& p) { return *s.end + p.retry_after; }

bool retry_due(const JobState* s, const Policy& p, double now) {
  if (!retries_left(s, p)) return false;
  // The original: now - s.get("end", now) >= retry_after.
  double waited = now - s->end.value_or(now);
  return !std::isnan(waited) && waited >= p.retry_after;
}

namespace {

template <class StatusOf>
bool deps_met_by(const Plan& plan, const Job& job, const State& state, const StatusOf& status_of,
                 long long max_retries, const FileChecks& files) {
  for (const Dep& d : job.deps) {
    switch (d.kind) {
      case Dep::Kind::File:
        if (!files.exists(files.expand(d.target))) return false;
        break;
      case Dep::Kind::After:
        if (!finished_as(status_of(d.job), state.of(plan, d.job), max_retries)) return false;
        break;
      case Dep::Kind::Done:
        if (status_of(d.job) != Status::Done) return false;
        break;
    }
  }
  return true;
}

template <class StatusOf>
bool deps_failed_by(const Job& job, const StatusOf& status_of) {
  for (const Dep& d : job.deps)
    if (d.kind == Dep::Kind::Done && blocks_dependents(status_of(d.job))) return true;
  return false;
}

}  // namespace

bool deps_met(const Plan& plan, const Job& job, const State& state, long long max_retries,
              const FileChecks& files) {
  return deps_met_by(plan, job, state, [&](size_t k) { return state.status_of(plan, k); }, max_retries,
                     files);
}

bool deps_failed(const Plan& plan, const Job& job, const State& state) {
  return deps_failed_by(job, [&](size_t k) { return state.status_of(plan, k); });
}

TickPlan plan_tick(const Plan& plan, const State& state, const Policy& p, double now, GpuMask free,
                   bool any_running, const FileChecks& files, bool explain) {
  TickPlan tick;
  const size_t n = plan.jobs.size();
  // The statuses as the tick changes them, in an array of their own: the state is left as it is.
  std::vector<Status>& st = tick.status;
  st.resize(n);
  for (size_t i = 0; i < n; ++i) st[i] = state.status_of(plan, i);
  for (size_t i = 0; i < n; ++i) {
    const JobState* s = state.of(plan, i);
    if (retry_due(s, p, now)) {
      tick.retried.push_back({i, s->attempts_or0() + 1});
      st[i] = Status::Pending;
      // The original unblocks every blocked job at each retry; after the first, none is left.
      if (!tick.unblock)
        for (Status& x : st)
          if (x == Status::Blocked) x = Status::Pending;
      tick.unblock = true;
    } else if (will_retry(s, p)) {
      tick.next_retry_in = std::min(tick.next_retry_in, retry_at(*s, p) - now);
    }
  }
  auto status_of = [&](size_t k) { return st[k]; };
  for (size_t i = 0; i < n; ++i) {
    if (st[i] != Status::Pending) continue;
    const Job& j = plan.jobs[i];
    if (deps_failed_by(j, status_of)) {
      st[i] = Status::Blocked;
      tick.blocked.push_back(i);
    } else if (deps_met_by(plan, j, state, status_of, p.max_retries, files)) {
      tick.ready.push_back(i);
    }
  }
  PassInput& in = tick.input;
  in.free = free;
  in.node = mask_of(p.node_gpus);
  in.open.assign(plan.reservations.size(), false);
  for (size_t r = 0; r < plan.reservations.size(); ++r)
    for (size_t m : plan.reservations[r].jobs)
      if (!leaves_reservation(st[m])) in.open[r] = true;
  in.nothing_running = !any_running;
  in.explain = explain;
  in.placement = &p.placement;
  return tick;
}

void apply_tick(const Plan& plan, const TickPlan& tick, State& state) {
  for (auto [i, attempts] : tick.retried) {
    JobState fresh;
    fresh.status = Status::Pending;
    fresh.attempts = attempts;
    if (const JobState* prev = state.of(plan, i)) keep_attempts(*prev, fresh);
    state.set(plan, i, fresh);
  }
  if (tick.unblock)
    for (auto& [id, s] : state.entries())
      if (s.status == Status::Blocked) s.status = Status::Pending;
  for (size_t i : tick.blocked) {
    JobState blocked;
    blocked.status = Status::Blocked;
    if (const JobState* prev = state.of(plan, i)) keep_attempts(*prev, blocked);
    state.set(plan, i, blocked);
  }
}

namespace {

TickDecision decision_of(const Plan& plan, const TickPlan& tick, const Policy& p) {
  TickDecision d;
  for (auto [i, attempts] : tick.retried) d.retried.push_back({plan.jobs[i].id, attempts});
  d.next_retry_in = tick.next_retry_in;
  d.pass = schedule_pass(plan, ReadySet(plan, p.backfill_max_hours, tick.ready), tick.input);
  return d;
}

}  // namespace

TickDecision decide_tick(const Plan& plan, State& state, const Policy& p, double now, GpuMask free,
                         bool any_running, const FileChecks& files, bool explain) {
  TickPlan tick = plan_tick(plan, state, p, now, free, any_running, files, explain);
  TickDecision d = decision_of(plan, tick, p);
  apply_tick(plan, tick, state);
  if (p.paused) {  // `gpuq pause`: the running jobs go on, nothing new starts
    d.pass.starts.clear();
    d.pass.stall_broken = false;
  }
  return d;
}

TickDecision preview_tick(const Plan& plan, const State& state, const Policy& p, double now, GpuMask free,
                          bool any_running, const FileChecks& files) {
  return decision_of(plan, plan_tick(plan, state, p, now, free, any_running, files, true), p);
}

}  // namespace gpuq
