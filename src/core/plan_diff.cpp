#include "gpuq/core/job_words.h"
#include "gpuq/core/plan_diff.h"

#include "gpuq/core/job_fields.h"

#include <fmt/format.h>

namespace gpuq {

namespace {

// "a, b, c" (the first 5, then the count of the rest).
std::string few(const std::vector<std::string>& ids) { return few_of(ids, 5); }

}  // namespace

bool same_job(const Plan& pa, const Job& a, const Plan& pb, const Job& b) {
  for (const JobField& f : job_fields())
    if (f.same && !f.same(pa, a, pb, b)) return false;
  return true;
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
