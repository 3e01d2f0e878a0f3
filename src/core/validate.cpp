#include "gpuq/core/validate.h"

#include <fmt/format.h>

#include "gpuq/core/simulate.h"

namespace gpuq {

namespace {
constexpr double kWeekHours = 168;
}  // namespace

std::vector<Finding> loader_findings(const std::vector<std::string>& warnings) {
  std::vector<Finding> out;
  for (const std::string& w : warnings) out.push_back({false, "", w});
  return out;
}

std::vector<Finding> validate_plan(const Plan& plan, const std::vector<int>& node_gpus, double backfill_max_hours,
                                   const FileChecks& files, const std::function<bool(const std::string&)>& readable) {
  std::vector<Finding> out;
  const GpuMask node = mask_of(node_gpus);

  // A reservation member that (through its deps) waits on a job in no reservation of its own
  // that cannot fit outside the reserved GPUs: the member never finishes, so the GPUs never open.
  for (size_t r = 0; r < plan.reservations.size(); ++r) {
    const Reservation& res = plan.reservations[r];
    for (size_t m : res.jobs) {
      std::vector<size_t> stack{m};
      std::vector<char> seen(plan.jobs.size(), 0);
      while (!stack.empty()) {
        size_t j = stack.back();
        stack.pop_back();
        for (const Dep& d : plan.jobs[j].deps) {
          if (d.kind == Dep::Kind::File || seen[d.job]) continue;
          seen[d.job] = 1;
          stack.push_back(d.job);
          const auto& theirs = plan.reservations_of[d.job];
          bool listed = std::find(theirs.begin(), theirs.end(), r) != theirs.end();
          int outside = count(node & ~res.gpus);
          if (!listed && plan.jobs[d.job].gpus > outside)
            out.push_back({true, plan.jobs[m].id,
                           fmt::format("is in reservation #{} (GPUs {}) but waits for {}, which needs {} GPUs and "
                                       "can only have the {} outside that reservation until {} finishes: neither can "
                                       "start. Add {} to the reservation, or drop the dep",
                                       r + 1, py_list(res.gpu_list), plan.jobs[d.job].id, plan.jobs[d.job].gpus,
                                       outside, plan.jobs[m].id, plan.jobs[d.job].id)});
        }
      }
    }
  }

  // Reservations that wait on each other, and any other way the plan cannot finish: simulate it.
  SimOptions so;
  so.node_gpus = node_gpus;
  so.backfill_max_hours = backfill_max_hours;
  Simulation sim = simulate(plan, so);
  for (const Stuck& s : sim.stuck)
    if (s.why.find("never ran") == std::string::npos)  // the root causes, not the jobs waiting on them
      out.push_back({true, plan.jobs[s.job].id,
                     fmt::format("can never start: {}. Change the reservations so that each job can get its GPUs",
                                 s.why)});

  for (const Job& j : plan.jobs) {
    std::string script = files.expand(j.script);
    if (!readable(script))
      out.push_back({true, j.id,
                     fmt::format("its script {} is missing or not readable (relative paths are taken from the "
                                 "folder `gpuq run` starts in); fix the path or create the script",
                                 script)});
    if (!j.produced_by) {
      for (const Dep& d : j.deps) {
        if (d.kind != Dep::Kind::File) continue;
        std::string p = files.expand(d.target);
        if (!files.exists(p))
          out.push_back({true, j.id,
                         fmt::format("waits for the file {}, which does not exist and that no job produces; create "
                                     "it, or name the job that writes it in \"produced_by\"",
                                     p)});
      }
    }
    if (!j.est_given)
      out.push_back({false, j.id,
                     "has no est_hours: simulate and the backfill rule take 1.0; give it an estimate"});
    if (j.time_limit_hours && j.est_hours > *j.time_limit_hours)
      out.push_back({false, j.id,
                     fmt::format("est_hours {} is over its time_limit_hours {}: `run` stops it at the limit before "
                                 "it is expected to finish; raise the limit or lower the estimate",
                                 j.est_hours, *j.time_limit_hours)});
    if (j.est_hours > kWeekHours)
      out.push_back({false, j.id,
                     fmt::format("est_hours {} is more than a week ({} h): est_hours is in hours; simulate, status "
                                 "and the backfill rule take it as written",
                                 j.est_hours, kWeekHours)});
    if (j.kill_on_quiet && !j.quiet_minutes)
      out.push_back({false, j.id,
                     "has on_quiet \"kill\" but no quiet_minutes: the watchdog watches it only when `run` has "
                     "--quiet-minutes; give it quiet_minutes"});
    if (j.time_limit_hours && j.warn_signal && j.warn_signal->seconds >= *j.time_limit_hours * 3600)
      out.push_back({false, j.id,
                     fmt::format("warn_signal {} comes {} s before a limit of {} s: the job gets it as soon as it "
                                 "starts; use fewer seconds",
                                 j.warn_signal->text(), j.warn_signal->seconds, *j.time_limit_hours * 3600)});
  }
  return out;
}

}  // namespace gpuq
