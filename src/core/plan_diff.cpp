#include "gpuq/core/plan_diff.h"

#include <fmt/format.h>

namespace gpuq {

namespace {

bool same_deps(const Job& a, const Job& b) {
  if (a.deps.size() != b.deps.size()) return false;
  for (size_t k = 0; k < a.deps.size(); ++k)
    if (a.deps[k].kind != b.deps[k].kind || a.deps[k].target != b.deps[k].target) return false;
  return true;
}

std::string warn_text(const std::optional<WarnSpec>& w) { return w ? w->text() : ""; }

// "a, b, c" (the first 5, then the count of the rest).
std::string few(const std::vector<std::string>& ids) {
  std::string out;
  for (size_t k = 0; k < ids.size() && k < 5; ++k) out += (k ? ", " : "") + ids[k];
  if (ids.size() > 5) out += fmt::format(" and {} more", ids.size() - 5);
  return out;
}

}  // namespace

bool same_job(const Plan& pa, const Job& a, const Plan& pb, const Job& b) {
  auto producer = [](const Plan& p, const Job& j) { return j.produced_by ? p.jobs[*j.produced_by].id : ""; };
  return a.id == b.id && a.script == b.script && a.gpus == b.gpus && a.priority == b.priority &&
         a.est_hours == b.est_hours && a.est_given == b.est_given && same_deps(a, b) &&
         producer(pa, a) == producer(pb, b) && a.produced_at_frac == b.produced_at_frac &&
         a.first_look_frac == b.first_look_frac && a.time_limit_hours == b.time_limit_hours &&
         warn_text(a.warn_signal) == warn_text(b.warn_signal) && a.retry_on_timeout == b.retry_on_timeout &&
         a.quiet_minutes == b.quiet_minutes && a.kill_on_quiet == b.kill_on_quiet && a.args == b.args &&
         a.env == b.env;
}

PlanChange diff_plans(const Plan& before, const Plan& after) {
  PlanChange c;
  for (const Job& j : after.jobs) {
    const Job* was = before.find(j.id);
    if (!was) c.added.push_back(j.id);
    else if (!same_job(before, *was, after, j)) c.changed.push_back(j.id);
  }
  for (const Job& j : before.jobs)
    if (!after.find(j.id)) c.removed.push_back(j.id);
  auto ids = [](const Plan& p, const Reservation& r) {
    std::vector<std::string> out;
    for (size_t i : r.jobs) out.push_back(p.jobs[i].id);
    return out;
  };
  c.reservations = before.reservations.size() != after.reservations.size();
  for (size_t k = 0; !c.reservations && k < before.reservations.size(); ++k)
    c.reservations = before.reservations[k].gpu_list != after.reservations[k].gpu_list ||
                     ids(before, before.reservations[k]) != ids(after, after.reservations[k]);
  c.workdir = before.workdir != after.workdir;
  return c;
}

std::string change_text(const PlanChange& c) {
  std::vector<std::string> parts;
  if (!c.added.empty())
    parts.push_back(fmt::format("+{} job{} ({})", c.added.size(), c.added.size() == 1 ? "" : "s", few(c.added)));
  if (!c.removed.empty()) parts.push_back(fmt::format("{} removed ({})", c.removed.size(), few(c.removed)));
  if (!c.changed.empty()) parts.push_back(fmt::format("{} changed ({})", c.changed.size(), few(c.changed)));
  if (c.reservations) parts.push_back("reservations changed");
  if (c.workdir) parts.push_back("\"workdir\" changed (it takes effect at the next start of `gpuq run`)");
  if (parts.empty()) return "no job changed";
  std::string out;
  for (size_t k = 0; k < parts.size(); ++k) out += (k ? ", " : "") + parts[k];
  return out;
}

}  // namespace gpuq
