#include "gpuq/core/validate.h"

#include <fmt/format.h>

#include <algorithm>

#include "gpuq/core/simulate.h"
#include "gpuq/core/suggest.h"
#include "gpuq/core/watchdog.h"

namespace gpuq {

namespace {
constexpr double kWeekHours = 168;
}  // namespace

bool script_holds_arguments(const std::string& script) {
  return script.find_first_of(" \t") != std::string::npos;
}

std::vector<Finding> loader_findings(const std::vector<std::string>& warnings) {
  std::vector<Finding> out;
  for (const std::string& w : warnings) out.push_back({false, "", w});
  return out;
}

std::vector<size_t> jobs_without_script(const Plan& plan, const FileChecks& files,
                                        const std::function<bool(const std::string&)>& readable,
                                        const std::function<bool(size_t)>& wanted) {
  std::vector<size_t> out;
  for (size_t i = 0; i < plan.jobs.size(); ++i)
    if (!plan.jobs[i].script.empty() && (!wanted || wanted(i)) && !readable(files.expand(plan.jobs[i].script)))
      out.push_back(i);
  return out;
}

bool waits_on_a_job(const Plan& plan, size_t i, const std::function<bool(size_t)>& done) {
  const Job& job = plan.jobs[i];
  if (job.produced_by && !done(*job.produced_by)) return true;
  for (const Dep& d : job.deps)
    if (d.kind != Dep::Kind::File && !done(d.job)) return true;
  return false;
}

std::string nearest_script(const Plan& plan, const std::string& script, const FileChecks& files,
                           const std::vector<std::string_view>& missing) {
  if (script.empty() || script_holds_arguments(script)) return "";
  // The plan's own scripts that are there first (a typo of one of them), then the files of the folder.
  std::vector<std::string_view> there;
  auto among = [](const std::vector<std::string_view>& v, std::string_view w) {
    return std::find(v.begin(), v.end(), w) != v.end();
  };
  for (const Job& j : plan.jobs)
    if (!j.script.empty() && j.script != script && !among(there, j.script) && !among(missing, j.script) &&
        files.exists(files.expand(j.script)))
      there.push_back(j.script);
  if (std::optional<std::string> near = nearest_name(script, there)) return *near;
  return nearest_existing_path(script, files.expand(script), files);
}

std::string missing_scripts_text(const Plan& plan, const std::vector<size_t>& jobs, const FileChecks& files,
                                 const std::string& folder) {
  // By script, in plan order: a sweep's points, or jobs sharing one script, make one entry.
  std::vector<std::pair<std::string, std::vector<size_t>>> by_script;
  for (size_t i : jobs) {
    const std::string& w = plan.jobs[i].script;
    auto it = std::find_if(by_script.begin(), by_script.end(), [&](const auto& e) { return e.first == w; });
    if (it == by_script.end()) by_script.push_back({w, {i}});
    else it->second.push_back(i);
  }
  std::vector<std::string_view> missing;
  for (const auto& e : by_script) missing.push_back(e.first);
  auto id = [&](size_t i) { return "'" + (plan.jobs[i].id.empty() ? std::string("?") : plan.jobs[i].id) + "'"; };
  std::string list;
  bool relative = false, spaced = false;
  constexpr size_t kShown = 8, kIds = 3;
  for (size_t k = 0; k < by_script.size(); ++k) {
    const auto& [w, ids] = by_script[k];
    relative = relative || (w[0] != '/' && w[0] != '~' && w[0] != '$');
    spaced = spaced || script_holds_arguments(w);
    if (k >= kShown) continue;
    std::string who = ids.size() == 1 ? "job " + id(ids[0]) : fmt::format("{} jobs: ", ids.size());
    for (size_t j = 0; ids.size() > 1 && j < ids.size() && j < kIds; ++j) who += (j ? ", " : "") + id(ids[j]);
    if (ids.size() > kIds) who += ", ...";
    std::string near = nearest_script(plan, w, files, missing);
    if (!near.empty()) who += "; did you mean " + near + "?";
    list += fmt::format("{}{} ({})", k ? ", " : "", w, who);
  }
  if (by_script.size() > kShown) list += fmt::format(" and {} more", by_script.size() - kShown);
  std::string text = fmt::format("{} script{} missing or not readable: {}", by_script.size(),
                                 by_script.size() == 1 ? " is" : "s are", list);
  if (spaced) text += fmt::format(" ({})", kArgsGoInArgs);
  if (!relative) return text + "; fix the paths or create the scripts";
  return text + fmt::format(
                    ". Relative script paths are taken from {}: start gpuq in the folder the scripts are in, or set "
                    "\"workdir\" in the plan (a folder relative to the plan file), or give --workdir DIR",
                    folder);
}

std::vector<Finding> file_findings(const Plan& plan, const FileChecks& files,
                                   const std::function<bool(const std::string&)>& readable, const std::string& folder) {
  std::vector<Finding> out;
  std::vector<size_t> missing = jobs_without_script(plan, files, readable);
  auto nothing_done = [](size_t) { return false; };
  auto later = std::stable_partition(missing.begin(), missing.end(),
                                     [&](size_t i) { return !waits_on_a_job(plan, i, nothing_done); });
  if (later != missing.begin())
    out.push_back({true, later - missing.begin() == 1 ? plan.jobs[missing[0]].id : "",
                   missing_scripts_text(plan, std::vector<size_t>(missing.begin(), later), files, folder)});
  if (later != missing.end())
    out.push_back({false, missing.end() - later == 1 ? plan.jobs[*later].id : "",
                   "not there yet, for jobs that wait on other jobs (which may make them): " +
                       missing_scripts_text(plan, std::vector<size_t>(later, missing.end()), files, folder)});
  for (const Job& j : plan.jobs) {
    if (j.produced_by) continue;
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
  return out;
}

std::vector<Finding> job_findings(const Plan& plan, const Policy* mem) {
  std::vector<Finding> out;
  for (const Job& j : plan.jobs) {
    if (mem && mem->too_big(j))
      out.push_back({true, j.id,
                     fmt::format("gpu_mem_gib: it {}: it would never start (GPUs with more memory: give their GiB as "
                                 "--gpu-mem-gib, or \"gpu_mem_gib\" in the plan's \"settings\")",
                                 too_big_text(*mem, j))});
    if (mem && mem->host_too_big(j))
      out.push_back({true, j.id,
                     fmt::format("{}: it would never start on this node (give it fewer, or run the plan on a bigger "
                                 "node; `simulate` predicts the rest without it)",
                                 host_too_big_text(*mem, j))});
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
    if (j.idle_ok && j.on_idle != IdleAction::Setting)
      out.push_back({false, j.id,
                     fmt::format("has on_idle \"{}\" and idle_ok: true: an idle_ok job is never idle, so its on_idle "
                                 "never acts; drop one of them",
                                 idle_action_name(j.on_idle))});
    if (j.time_limit_hours && j.warn_signal && j.warn_signal->seconds >= *j.time_limit_hours * 3600)
      out.push_back({false, j.id,
                     fmt::format("warn_signal {} comes {} s before a limit of {} s: the job gets it as soon as it "
                                 "starts; use fewer seconds",
                                 j.warn_signal->text(), j.warn_signal->seconds, *j.time_limit_hours * 3600)});
  }
  return out;
}

std::vector<Finding> validate_plan(const Plan& plan, const std::vector<int>& node_gpus, double backfill_max_hours,
                                   const FileChecks& files, const std::function<bool(const std::string&)>& readable,
                                   const std::string& folder, const Policy* mem) {
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
  so.gpu_mem_gib = 1e12;  // a gpu_mem_gib no GPU takes is job_findings' check, with the node's memory (`mem`)
  Simulation sim = simulate(plan, so);
  for (const Stuck& s : sim.stuck) {
    // The root causes, not the jobs waiting on them (for jobs that never ran).
    bool waits = s.why.kind == Why::Kind::Deps &&
                 (!s.why.jobs.empty() || !s.why.afters.empty() || s.why.source == Why::Source::ProducerNever);
    if (!waits) out.push_back({true, plan.jobs[s.job].id, "", s});
  }

  for (Finding& x : file_findings(plan, files, readable, folder)) out.push_back(std::move(x));
  for (Finding& x : job_findings(plan, mem)) out.push_back(std::move(x));
  return out;
}

}  // namespace gpuq
