#include "gpuq/core/watchdog.h"

#include <fmt/format.h>

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

void note_activity(JobState& s, std::optional<long long> log_bytes, const std::map<int, int>& util_pct, double now) {
  if (log_bytes) {
    bool grew = s.log_size ? *log_bytes != *s.log_size : *log_bytes > 0;
    if (grew) {
      s.log_grew = now;
      s.hung_noted.reset();
    }
    s.log_size = *log_bytes;
  }
  if (!s.gpus || s.gpus->empty()) return;
  bool all_read = true, busy = false;
  for (int g : *s.gpus) {
    auto it = util_pct.find(g);
    if (it == util_pct.end())
      all_read = false;
    else if (it->second > kIdlePercent)
      busy = true;
  }
  if (busy) s.gpus_busy = now;  // one GPU at work is enough, read or not the others
  if (all_read) s.gpus_read = now;
}

}  // namespace gpuq
