// The original's rules over the state file, `status`, and the control commands.
#include <fmt/format.h>
#include <signal.h>
#include <sys/stat.h>

#include <array>
#include <cmath>
#include <ctime>
#include <limits>

#include "gpuq/rules.h"

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
