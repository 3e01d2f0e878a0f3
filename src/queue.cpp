// The original's rules over the state file.
#include <fmt/format.h>
#include <cmath>
#include <limits>

#include "gpuq/proc.h"
#include "gpuq/queue.h"

namespace gpuq {

namespace {

// finished() for a job whose status is `st`, which a tick may have changed from the
// entry's: the entry's other fields are read only for a failed job, and a tick never
// changes an entry into a failed one.
bool finished_as(Status st, const JobState* s, long long max_retries) {
  if (st == Status::Done || st == Status::Blocked) return true;
  return st == Status::Failed && (s->exit == -15 || s->attempts_or0() >= max_retries);
}

template <class StatusOf>
bool deps_met_by(const Plan& plan, const Job& job, const State& state, const StatusOf& status_of, long long max_retries,
                 const std::function<bool(const std::string&)>& file_exists) {
  for (const Dep& d : job.deps) {
    switch (d.kind) {
      case Dep::Kind::File:
        if (!file_exists(expand_path(d.target))) return false;
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
  for (const Dep& d : job.deps) {
    if (d.kind != Dep::Kind::Done) continue;
    Status st = status_of(d.job);
    if (st == Status::Failed || st == Status::Blocked) return true;
  }
  return false;
}

// What a tick changes in the state, in the order the original makes the changes.
struct TickChanges {
  std::vector<std::pair<size_t, long long>> retried;  // job, its attempts from now on
  bool unblock = false;                               // every blocked entry becomes pending
  std::vector<size_t> blocked;                        // pending jobs that become blocked
};

// decide_tick over a state it does not change: the jobs' statuses as the tick changes
// them are kept in an array of their own (a copy of the state at 100,000 jobs costs tens
// of MB), and the changes are listed for decide_tick to make.
TickDecision decide(const Plan& plan, const State& state, const RunOptions& opt, double now, GpuMask free,
                    bool any_running, const std::function<bool(const std::string&)>& file_exists, bool explain,
                    TickChanges& changes) {
  TickDecision tick;
  const size_t n = plan.jobs.size();
  std::vector<Status> st(n);
  for (size_t i = 0; i < n; ++i) st[i] = state.status_of(plan, i);
  for (size_t i = 0; i < n; ++i) {
    const Job& j = plan.jobs[i];
    const JobState* s = state.of(plan, i);
    if (retryable(s, opt, now)) {
      long long attempts = s->attempts_or0() + 1;
      changes.retried.push_back({i, attempts});
      st[i] = Status::Pending;
      // The original unblocks every blocked job at each retry; after the first, none is left.
      if (!changes.unblock)
        for (Status& x : st)
          if (x == Status::Blocked) x = Status::Pending;
      changes.unblock = true;
      tick.retried.push_back({j.id, attempts});
    } else if (s && s->status == Status::Failed && s->exit != -15 && s->attempts_or0() < opt.max_retries && s->end) {
      tick.next_retry_in = std::min(tick.next_retry_in, *s->end + opt.retry_after - now);
    }
  }

  auto status_of = [&](size_t k) { return st[k]; };
  std::vector<size_t> ready;
  for (size_t i = 0; i < n; ++i) {
    const Job& j = plan.jobs[i];
    if (st[i] != Status::Pending) continue;
    if (deps_failed_by(j, status_of)) {
      st[i] = Status::Blocked;
      changes.blocked.push_back(i);
      continue;
    }
    if (deps_met_by(plan, j, state, status_of, opt.max_retries, file_exists)) ready.push_back(i);
  }
  PassInput in;
  in.free = free;
  in.node = mask_of(opt.node_gpus);
  in.open.resize(plan.reservations.size());
  // The original's `finished` for reservations: done, failed or blocked.
  for (size_t r = 0; r < plan.reservations.size(); ++r) {
    for (size_t m : plan.reservations[r].jobs) {
      if (st[m] != Status::Done && st[m] != Status::Failed && st[m] != Status::Blocked) in.open[r] = true;
    }
  }
  in.nothing_running = !any_running;
  in.explain = explain;
  tick.pass = schedule_pass(plan, ReadySet(plan, opt.backfill_max_hours, ready), in);
  return tick;
}

}  // namespace

bool finished(const JobState* s, long long max_retries) {
  return s && finished_as(s->status, s, max_retries);
}

bool deps_met(const Plan& plan, const Job& job, const State& state, long long max_retries,
              const std::function<bool(const std::string&)>& file_exists) {
  return deps_met_by(plan, job, state, [&](size_t k) { return state.status_of(plan, k); }, max_retries, file_exists);
}

bool deps_failed(const Plan& plan, const Job& job, const State& state) {
  return deps_failed_by(job, [&](size_t k) { return state.status_of(plan, k); });
}

bool retryable(const JobState* s, const RunOptions& opt, double now) {
  if (!s || s->status != Status::Failed || s->exit == -15 || s->attempts_or0() >= opt.max_retries) return false;
  // The original: now - s.get("end", now) >= retry_after (with no end, never).
  double end = s->end.value_or(now);
  double waited = now - end;
  return !std::isnan(waited) && waited >= opt.retry_after;
}

TickDecision decide_tick(const Plan& plan, State& state, const RunOptions& opt, double now, GpuMask free,
                         bool any_running, const std::function<bool(const std::string&)>& file_exists,
                         bool explain) {
  TickChanges changes;
  TickDecision tick = decide(plan, state, opt, now, free, any_running, file_exists, explain, changes);
  for (auto [i, attempts] : changes.retried) {
    JobState fresh;
    fresh.status = Status::Pending;
    fresh.attempts = attempts;
    state.set(plan, i, fresh);
  }
  if (changes.unblock)
    for (auto& [id, s] : state.entries())
      if (s.status == Status::Blocked) s.status = Status::Pending;
  for (size_t i : changes.blocked) {
    JobState blocked;
    blocked.status = Status::Blocked;
    state.set(plan, i, blocked);
  }
  return tick;
}

TickDecision preview_tick(const Plan& plan, const State& state, const RunOptions& opt, double now, GpuMask free,
                          bool any_running, const std::function<bool(const std::string&)>& file_exists) {
  TickChanges changes;
  return decide(plan, state, opt, now, free, any_running, file_exists, true, changes);
}

}  // namespace gpuq
