#include "gpuq/core/watchdog.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cmath>

namespace gpuq {

std::optional<double> quiet_minutes(const Job& job, const Policy& p) {
  if (job.quiet_minutes) return job.quiet_minutes;
  if (p.quiet_minutes > 0) return p.quiet_minutes;
  return std::nullopt;
}

std::string QuietCheck::detail() const {
  std::string silent = log_silent < 60 ? fmt::format("log silent {:.0f} s", std::floor(log_silent))
                                       : fmt::format("log silent {:.0f} min", std::floor(log_silent / 60));
  return gpus_known ? silent + ", GPUs idle" : silent + " (no GPU utilization reading: the log alone)";
}

QuietCheck check_quiet(const Job& job, const JobState& s, const Policy& p, double now) {
  QuietCheck c;
  auto minutes = quiet_minutes(job, p);
  if (!minutes || s.status != Status::Running || !s.start) return c;
  c.watched = true;
  const double limit = *minutes * 60;
  c.log_silent = std::max(0.0, now - s.log_grew.value_or(*s.start));
  c.gpus_known = s.gpus_read.has_value() && s.gpus && !s.gpus->empty();
  double quiet = c.log_silent;
  if (c.gpus_known) quiet = std::min(quiet, std::max(0.0, now - s.gpus_busy.value_or(*s.start)));
  c.hung = quiet >= limit;
  if (!c.hung) c.next_in = limit - quiet;
  return c;
}

GpuActivity activity_of(const GpuReading& r, const Policy& p) {
  return {r.util_pct, r.processes, p.settings.idle_util_percent};
}

void note_activity(JobState& s, std::optional<long long> log_bytes, const GpuActivity& a, double now) {
  if (log_bytes) {
    bool grew = s.log_size ? *log_bytes != *s.log_size : *log_bytes > 0;
    if (grew) {
      s.log_grew = now;
      s.hung_noted.reset();
    }
    s.log_size = *log_bytes;
  }
  if (!s.gpus || s.gpus->empty()) return;
  bool all_read = true, busy = false, used = false;
  for (int g : *s.gpus) {
    auto it = a.util_pct.find(g);
    if (it == a.util_pct.end())
      all_read = false;
    else if (it->second > a.idle_pct)
      busy = true;
    if (a.processes && s.pid)
      if (auto on = a.processes->find(g); on != a.processes->end())
        for (const GpuProcess& proc : on->second)
          used = used || std::find(proc.lineage.begin(), proc.lineage.end(), *s.pid) != proc.lineage.end();
  }
  if (busy) s.gpus_busy = now;  // one GPU at work is enough, read or not the others
  if (all_read) s.gpus_read = now;
  // The idle watch's streaks: unbroken runs of readings, each broken by a reading that says
  // otherwise or by none (a streak never spans a time nobody looked).
  bool idle = all_read && !busy;
  if (!idle) s.idle_since.reset();
  else if (!s.idle_since) s.idle_since = now;
  bool unused = a.processes && !used;
  if (!unused) s.unused_since.reset();
  else if (!s.unused_since) s.unused_since = now;
}

std::optional<double> idle_minutes(const Job& job, const Policy& p) {
  if (job.idle_ok || p.settings.idle_minutes <= 0) return std::nullopt;
  return p.settings.idle_minutes;
}

IdleAction idle_action(const Job& job, const Policy& p) {
  if (job.on_idle != IdleAction::Setting) return job.on_idle;
  const std::string& a = p.settings.on_idle;
  return a == "kill" ? IdleAction::Kill : a == "requeue" ? IdleAction::Requeue : IdleAction::Warn;
}

const char* idle_action_name(IdleAction a) {
  switch (a) {
    case IdleAction::Requeue: return "requeue";
    case IdleAction::Kill: return "kill";
    default: return "warn";
  }
}

std::string IdleCheck::detail() const {
  std::string span = idle_for < 60 ? fmt::format("{:.0f} s", std::floor(idle_for))
                                   : fmt::format("{:.0f} min", std::floor(idle_for / 60));
  std::string on = fmt::format("GPU{} [{}]", gpus.size() == 1 ? "" : "s", fmt::join(gpus, ", "));
  if (unused) return fmt::format("no process of it on {} for {}", on, span);
  return fmt::format("idle {} on {} (at or below {:g}% utilization)", span, on, idle_pct);
}

IdleCheck check_idle(const Job& job, const JobState& s, const Policy& p, double now) {
  IdleCheck c;
  c.idle_pct = p.settings.idle_util_percent;
  auto minutes = idle_minutes(job, p);
  if (!minutes || s.status != Status::Running || !s.start || !s.gpus || s.gpus->empty()) return c;
  c.watched = true;
  c.gpus = *s.gpus;
  const double limit = *minutes * 60;
  const double seen_to = std::min(now, s.gpus_read.value_or(now));
  double util = s.idle_since ? std::max(0.0, seen_to - *s.idle_since) : -1;
  double procs = s.unused_since ? std::max(0.0, seen_to - *s.unused_since) : -1;
  c.unused = procs > util;
  c.idle_for = std::max({0.0, util, procs});
  c.idle = (s.idle_since || s.unused_since) && c.idle_for >= limit;
  // A spell begins only at a tick's reading: until one has, there is nothing to wake for.
  if (!c.idle && (s.idle_since || s.unused_since)) c.next_in = limit - c.idle_for;
  return c;
}

}  // namespace gpuq
