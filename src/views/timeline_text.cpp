// The simulate views as text: the original's timeline and the stuck report.
#include <fmt/format.h>

#include <algorithm>

#include "gpuq/views/text.h"

namespace gpuq {

std::string format_timeline(const Plan& plan, const Simulation& sim, const SimOptions& opt, bool all) {
  std::string out;
  std::vector<const SimRow*> rows;
  for (const SimRow& r : sim.rows) rows.push_back(&r);
  std::sort(rows.begin(), rows.end(), [&](const SimRow* a, const SimRow* b) {
    if (a->start != b->start) return a->start < b->start;
    return plan.jobs[a->job].id < plan.jobs[b->job].id;
  });
  for (const SimRow* r : rows) {
    const std::string& id = plan.jobs[r->job].id;
    if (!all && id.rfind("eval_", 0) == 0) continue;
    out += fmt::format("{:6.2f}h -> {:6.2f}h gpus={:<8} {}\n", r->start, r->end, py_list(r->gpus), id);
  }
  double makespan = 0, busy = 0;
  for (const SimRow& r : sim.rows) {
    makespan = std::max(makespan, r.end);
    busy += static_cast<double>(r.gpus.size()) * (r.end - r.start);
  }
  if (makespan != 0)
    out += fmt::format("makespan {:.1f}h, GPU utilization {:.1f}%\n", makespan,
                       busy / (static_cast<double>(opt.node_gpus.size()) * makespan) * 100);
  else
    out += "empty plan\n";
  std::vector<double> started_at(plan.jobs.size(), -1);
  for (const SimRow& r : sim.rows) started_at[r.job] = r.start;
  bool any = false;
  double lo = 0, hi = 0;
  for (size_t j = 0; j < plan.jobs.size(); ++j) {
    const Job& job = plan.jobs[j];
    if (!job.first_look_frac || started_at[j] < 0) continue;
    double mark = started_at[j] + *job.first_look_frac * job.est_hours;
    if (!any || mark < lo) lo = mark;
    if (!any || mark > hi) hi = mark;
    any = true;
  }
  if (any)
    out += fmt::format("round-100 in-loop eval of the first-wave arms: earliest ~{:.1f}h, all ~{:.1f}h\n", lo, hi);
  return out;
}

std::string format_stuck(const Plan& plan, const Simulation& sim) {
  std::string out = fmt::format("the plan cannot be scheduled: at {:.2f}h nothing runs and {} job(s) can never start:\n",
                                sim.stuck_at, sim.stuck.size());
  for (const Stuck& s : sim.stuck) out += fmt::format("  {}: {}\n", plan.jobs[s.job].id, s.why);
  return out;
}

}  // namespace gpuq
