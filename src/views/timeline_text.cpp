// The simulate views as text: the original's timeline and the stuck report.
#include <fmt/format.h>

#include <bit>

#include <algorithm>
#include <map>

#include "gpuq/core/local_time.h"
#include "gpuq/views/reasons.h"
#include "gpuq/views/text.h"

namespace gpuq {

namespace {
void pad_to(std::string& out, size_t size) {
  if (out.size() < size) out.append(size - out.size(), ' ');
}
}  // namespace

std::string format_timeline(const Plan& plan, const Simulation& sim, const SimOptions& opt, bool all) {
  std::string out;
  std::vector<const SimRow*> rows;
  for (const SimRow& r : sim.rows) rows.push_back(&r);
  auto by_id = [&](const SimRow* a, const SimRow* b) { return plan.jobs[a->job].id < plan.jobs[b->job].id; };
  auto by_start = [](const SimRow* a, const SimRow* b) { return a->start < b->start; };
  // By start, ties by id. The prediction makes its rows as jobs start, so they come in order of
  // start: then only the jobs that start together are sorted, by id (a whole sort read two
  // jobs' ids for most of its 20 million comparisons on 1,000,000 jobs).
  if (!std::is_sorted(rows.begin(), rows.end(), by_start))
    std::stable_sort(rows.begin(), rows.end(), by_start);
  for (auto from = rows.begin(); from != rows.end();) {
    auto to = std::find_if(from, rows.end(), [&](const SimRow* r) { return r->start != (*from)->start; });
    if (to - from > 1) std::sort(from, to, by_id);
    from = to;
  }
  // One line a job, appended piece by piece: the line as one fmt::format (with
  // py_list's string) cost twice as much on 100,000 jobs (callgrind).
  const size_t node_width = std::to_string(opt.nodes - 1).size();
  out.reserve(rows.size() * 48);
  // A job of --from-state that started just before now has a start a hair below 0: "0.00h", not
  // "-0.00h" (a plain simulate's times are never below 0: the original's text is unchanged).
  auto shown = [](double hours) { return hours < 0 && hours > -0.005 ? 0.0 : hours; };
  for (const SimRow* r : rows) {
    const std::string& id = plan.jobs[r->job].id;
    if (!all && id.rfind("eval_", 0) == 0) continue;
    append_fixed(out, shown(r->start), 6, 2);
    out += "h -> ";
    append_fixed(out, shown(r->end), 6, 2);
    out += "h ";
    if (opt.nodes > 1) {  // simulate --nodes: which node, then the GPUs on it
      size_t at = out.size();
      out += "node=";
      out += std::to_string(r->node);
      pad_to(out, at + 5 + node_width);
      out += ' ';
    }
    size_t at = out.size();
    out += "gpus=[";
    for (size_t i = 0; i < r->gpus.size(); ++i) {
      if (i) out += ", ";
      out += std::to_string(r->gpus[i]);
    }
    out += ']';
    pad_to(out, at + 5 + 8);
    out += ' ';
    out += id;
    out += '\n';
  }
  double makespan = 0, busy = busy_gpu_hours(plan, sim, opt);
  GpuMask used = mask_of(opt.node_gpus);  // and a drained GPU a running job keeps (gpu_health.h)
  for (const SimRow& r : sim.rows) {
    makespan = std::max(makespan, r.end);
    if (opt.nodes == 1) used |= mask_of(r.gpus);
  }
  size_t gpus = opt.nodes == 1 ? static_cast<size_t>(std::popcount(used)) : opt.node_gpus.size() * static_cast<size_t>(opt.nodes);
  if (makespan != 0)
    out += fmt::format("makespan {}h, GPU utilization {:.1f}%\n", fixed(makespan, 0, 1),
                       busy / (static_cast<double>(gpus) * makespan) * 100);
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
    out += fmt::format("round-100 in-loop eval of the first-wave arms: earliest ~{}h, all ~{}h\n", fixed(lo, 0, 1),
                       fixed(hi, 0, 1));
  return out;
}

std::string packing_note(const Plan& plan, const SimOptions& opt, const Simulation& packed, const Simulation& whole) {
  auto makespan = [](const Simulation& sim) {
    double m = 0;
    for (const SimRow& r : sim.rows) m = std::max(m, r.end);
    return m;
  };
  // The most jobs one GPU held at once: the rows' starts and ends on each GPU, in time order.
  std::map<std::pair<int, int>, std::vector<std::pair<double, int>>> at;
  for (const SimRow& r : packed.rows)
    for (int g : r.gpus) {
      at[{r.node, g}].push_back({r.start, 1});
      at[{r.node, g}].push_back({r.end, -1});
    }
  int most = 0;
  for (auto& [gpu, v] : at) {
    std::sort(v.begin(), v.end());  // an end before a start at the same time
    int n = 0;
    for (auto [t, d] : v) most = std::max(most, n += d);
  }
  size_t jobs = 0;
  for (const Job& j : plan.jobs) jobs += j.gpu_mem_gib && j.gpus > 0;
  std::string stuck = whole.stuck.empty() ? "" : fmt::format(", {} never start", whole.stuck.size());
  return fmt::format("packed: makespan {}h ({} job{} with gpu_mem_gib; at most {} on one GPU of {} GiB less {}%); "
                     "whole GPUs: makespan {}h{}\n",
                     fixed(makespan(packed), 0, 1), jobs, jobs == 1 ? "" : "s", most, fmt::format("{:g}", opt.gpu_mem_gib),
                     fmt::format("{:g}", opt.gpu_mem_headroom), fixed(makespan(whole), 0, 1), stuck);
}

std::string timeline_note(const Plan& plan, const Simulation& sim, bool all) {
  size_t hidden = 0;
  for (const SimRow& r : sim.rows) hidden += !all && plan.jobs[r.job].id.rfind("eval_", 0) == 0;
  bool first_look = false;
  for (const SimRow& r : sim.rows) first_look |= plan.jobs[r.job].first_look_frac.has_value();
  std::vector<std::string> parts;
  if (hidden)
    parts.push_back(fmt::format("{} eval_ job{} not listed (--all adds {} row{})", hidden, hidden == 1 ? "" : "s",
                                hidden, hidden == 1 ? "" : "s"));
  if (first_look)
    parts.push_back("the round-100 line gives when the first and the last job with first_look_frac reach that "
                    "fraction of their est_hours");
  std::string note;
  for (const std::string& p : parts) note += (note.empty() ? "" : "; ") + p;
  note = note.empty() ? "" : "gpuq: " + note + "\n";
  // A preempted job's row spans its attempts: each preemption on a line of its own.
  for (const SimPreemption& p : sim.preemptions) {
    std::optional<double> back = sim.resumes_at(p);
    note += fmt::format("gpuq: {} is preempted at {:.2f}h for {} (it ran {:.2f}h){}\n", plan.jobs[p.job].id, p.at,
                        plan.jobs[p.by].id, p.ran,
                        back ? fmt::format("; it resumes at {:.2f}h", *back) : std::string("; it does not resume"));
  }
  return note;
}

std::string format_stuck(const Plan& plan, const SimOptions& opt, const Simulation& sim) {
  std::string out = fmt::format("the plan cannot be scheduled: at {:.2f}h nothing runs and {} job(s) can never start:\n",
                                sim.stuck_at, sim.stuck.size());
  for (const Stuck& s : sim.stuck) out += fmt::format("  {}: {}\n", plan.jobs[s.job].id, stuck_text(plan, opt, s));
  return out;
}

}  // namespace gpuq
