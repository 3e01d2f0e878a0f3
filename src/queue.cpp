// The original's rules over the state file, `status`, and the control commands.
#include <fmt/format.h>
#include <signal.h>
#include <sys/stat.h>

#include <array>
#include <cmath>
#include <ctime>
#include <limits>

#include "gpuq/proc.h"
#include "gpuq/queue.h"

namespace gpuq {

double unix_now() {
  timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  return static_cast<double>(ts.tv_sec) + ts.tv_nsec / 1e9;
}

std::string clock_stamp(double t) {
  time_t secs = static_cast<time_t>(t);
  tm local;
  localtime_r(&secs, &local);
  char buf[16];
  strftime(buf, sizeof buf, "%H:%M:%S", &local);
  return fmt::format("[{}]", buf);
}

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

Observed observe(const PlanPaths& paths, const std::string& id, const JobState& s) {
  Observed o;
  bool alive = s.pid && process_alive(*s.pid, s.pid_start);
  std::optional<std::string> text;
  try {
    text = read_file(paths.exit(id), true);
  } catch (const StoreError& e) {
    o.note = e.what();
  }
  if (text) {
    std::string t = *text;
    while (!t.empty() && std::isspace(static_cast<unsigned char>(t.back()))) t.pop_back();
    size_t i = 0;
    while (i < t.size() && std::isspace(static_cast<unsigned char>(t[i]))) ++i;
    t = t.substr(i);
    if (t.empty()) {
      // The original's wrapper writes the file in place: empty may mean "being written".
      if (alive) return o;
      o.kind = Observed::Kind::Exited;
      o.exit = 1;
      return o;
    }
    char* endp = nullptr;
    errno = 0;
    long long code = std::strtoll(t.c_str(), &endp, 10);
    o.kind = Observed::Kind::Exited;
    if (errno || *endp) {
      o.exit = 1;
      o.note = fmt::format("{} holds '{}', not an exit code; the job counts as failed (exit 1)", paths.exit(id),
                           t.substr(0, 40));
    } else {
      o.exit = code;
    }
    return o;
  }
  if (alive) return o;
  struct stat st;
  o.kind = ::lstat(paths.aborted(id).c_str(), &st) == 0 ? Observed::Kind::Aborted : Observed::Kind::Vanished;
  o.exit = -1;
  return o;
}

std::vector<std::pair<std::string, std::string>> refresh(const PlanPaths& paths, State& state, double now) {
  std::vector<std::pair<std::string, std::string>> ended;
  for (auto& [id, s] : state.entries()) {
    if (s.status != Status::Running) continue;
    Observed o = observe(paths, id, s);
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
        s.exit = -1;
        s.end = now;
        ended.push_back({id, fmt::format("failed {} (its process is gone without an exit code)", id)});
        break;
      case Observed::Kind::Aborted: {
        JobState fresh;
        fresh.status = Status::Pending;
        fresh.attempts = s.attempts;
        s = fresh;
        ended.push_back({id, fmt::format("requeued {}: its launch was cut short before it ran", id)});
        break;
      }
    }
  }
  return ended;
}

std::string format_status(const Plan& plan, const State& state, double now, bool all) {
  std::string out;
  // Per status, its count, and the statuses in the order first met, like the original's dict.
  constexpr size_t kStatuses = static_cast<size_t>(Status::Held) + 1;
  std::array<size_t, kStatuses> count{};
  std::vector<Status> met;
  for (size_t i = 0; i < plan.jobs.size(); ++i) {
    const Job& j = plan.jobs[i];
    const JobState* s = state.of(plan, i);
    Status st = s ? s->status : Status::Pending;
    const char* name = status_name(st);
    if (count[static_cast<size_t>(st)]++ == 0) met.push_back(st);
    if (st == Status::Running || st == Status::Failed || st == Status::Blocked || st == Status::Held || all) {
      double el = 0;
      if (s && s->start) {
        double end = s->end && *s->end != 0 ? *s->end : now;
        el = (end - *s->start) / 3600;
      }
      std::string gpus = s && s->gpus ? py_list(*s->gpus) : "-";
      out += fmt::format("{:<8} {:<45} gpus={:<8} {:5.2f}h est={:.1f}h\n", name, j.id, gpus, el,
                         j.est_given ? j.est_hours : 0.0);
    }
  }
  out += "{";
  for (size_t i = 0; i < met.size(); ++i)
    out += fmt::format("{}'{}': {}", i ? ", " : "", status_name(met[i]), count[static_cast<size_t>(met[i])]);
  out += "}\n";
  return out;
}

ControlResult control(const Plan& plan, const PlanPaths& paths, const std::string& action,
                      const std::vector<std::string>& ids) {
  ControlResult r;
  std::vector<std::string> unknown;
  for (const auto& id : ids)
    if (!plan.find(id)) unknown.push_back(id);
  if (!unknown.empty()) {
    std::string list;
    for (const auto& u : unknown) list += (list.empty() ? "" : ", ") + u;
    r.lines.push_back(fmt::format("gpuq {}: no job {} in {}; nothing was changed", action, list, paths.plan));
    r.status = 2;
    return r;
  }
  StateLock lock(paths);
  State state = read_state(paths);
  double now = unix_now();
  bool failed_any = false;
  for (const auto& id : ids) {
    JobState* s = state.find(id);
    Status st = s ? s->status : Status::Pending;
    if (action == "hold") {
      if (st == Status::Pending || st == Status::Failed || st == Status::Blocked) {
        JobState held;
        held.status = Status::Held;
        state.set(id, held);
        r.lines.push_back(fmt::format("held {} (was {}); `gpuq retry {}` releases it", id, status_name(st), id));
      } else if (st == Status::Held) {
        r.lines.push_back(fmt::format("{} is already held", id));
      } else {
        r.lines.push_back(fmt::format("not held: {} is {}{}", id, status_name(st),
                                      st == Status::Running ? " (`gpuq kill` stops it)" : ""));
        failed_any = true;
      }
    } else if (action == "retry") {
      if (st == Status::Running) {
        r.lines.push_back(fmt::format("not retried: {} is running (pid {}); a retry would start a second copy", id,
                                      s && s->pid ? *s->pid : 0));
        failed_any = true;
        continue;
      }
      JobState fresh;
      fresh.status = Status::Pending;
      state.set(id, fresh);
      r.lines.push_back(st == Status::Held ? fmt::format("released {} (was held); it is pending", id)
                                           : fmt::format("{} is pending again (was {})", id, status_name(st)));
      for (auto& [other, os] : state.entries()) {
        if (os.status == Status::Blocked) {
          os.status = Status::Pending;
          r.lines.push_back(fmt::format("{} is pending again (was blocked)", other));
        }
      }
    } else if (action == "kill") {
      if (st != Status::Running) {
        r.lines.push_back(fmt::format("not killed: {} is not running (it is {})", id, status_name(st)));
        failed_any = true;
        continue;
      }
      bool same = s->pid && process_alive(*s->pid, s->pid_start);
      bool sent = same && signal_group(*s->pid, SIGTERM);
      s->status = Status::Failed;
      s->exit = -15;
      s->end = now;
      if (sent) {
        s->kill_sent = now;
        r.lines.push_back(fmt::format("killed {}: sent SIGTERM to process group {}; `gpuq run` sends SIGKILL if it "
                                      "outlives --kill-grace",
                                      id, *s->pid));
      } else {
        r.lines.push_back(fmt::format("killed {}: its process was already gone; marked failed", id));
      }
    }
  }
  write_state(paths, state);
  r.status = failed_any ? 1 : 0;
  return r;
}

}  // namespace gpuq
