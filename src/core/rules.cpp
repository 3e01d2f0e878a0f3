#include "gpuq/core/rules.h"

#include <cmath>

#include <fmt/format.h>

#include "gpuq/core/hint.h"
#include "gpuq/core/limits.h"
#include "gpuq/core/simulate.h"
#include "gpuq/core/suggest.h"

namespace gpuq {

std::optional<Outcome> outcome_of(const JobState& s) {
  if (s.status != Status::Done && s.status != Status::Failed) return std::nullopt;
  return std::get<Ended>(life_of(&s, false, 0)).outcome;
}

bool files_present(const Job& job, const FileChecks& files) {
  for (const Dep& d : job.deps)
    if (d.kind == Dep::Kind::File && !files.exists(files.expand(d.target))) return false;
  return true;
}

std::string nearest_existing_path(const std::string& written, const std::string& expanded, const FileChecks& files) {
  if (expanded.empty() || files.exists(expanded)) return "";
  std::vector<std::string> parts;
  for (size_t at = 0; at <= expanded.size();) {
    size_t end = std::min(expanded.find('/', at), expanded.size());
    if (end > at) parts.push_back(expanded.substr(at, end - at));
    at = end + 1;
  }
  auto join = [](const std::string& folder, const std::string& name) {
    return folder.empty() ? name : folder.back() == '/' ? folder + name : folder + "/" + name;
  };
  std::string have = expanded[0] == '/' ? "/" : "";  // "": the current folder
  size_t k = 0;
  for (; k < parts.size() && files.exists(join(have, parts[k])); ++k) have = join(have, parts[k]);
  for (; k < parts.size(); ++k) {
    std::string next = join(have, parts[k]);
    if (files.exists(next)) {
      have = std::move(next);
      continue;
    }
    std::vector<std::string> names = files.names_in(have.empty() ? "." : have);
    std::vector<std::string_view> views(names.begin(), names.end());
    std::optional<std::string> near = nearest_name(parts[k], views);
    if (!near) return "";
    have = join(have, *near);
  }
  if (!files.exists(have)) return "";
  // As the plan wrote it: the same tail, relative where the plan's path is.
  size_t keep = written.size() <= expanded.size() ? expanded.size() - written.size() : 0;
  return written != expanded && have.size() > keep && have.compare(0, keep, expanded, 0, keep) == 0
             ? have.substr(keep)
             : have;
}

GpuMask busy_in_state(const State& state) {
  GpuMask busy = 0;
  for (const auto& [id, s] : state.entries())
    if ((s.status == Status::Running || s.kill_sent) && s.gpus) busy |= mask_of(*s.gpus);
  return busy;
}

GpuMask busy_by_memory(const std::map<int, long long>& used_mib, long long max_used_mib) {
  GpuMask busy = 0;
  for (auto& [g, mib] : used_mib)
    if (mib > max_used_mib && g >= 0 && g <= kMaxGpuId) busy |= GpuMask{1} << g;
  return busy;
}

std::map<int, long long> used_by_others(const std::map<int, long long>& used_mib, long long max_used_mib,
                                        const State& state) {
  GpuMask ours = busy_in_state(state);
  std::map<int, long long> others;
  for (auto& [g, mib] : used_mib)
    if (mib > max_used_mib && g >= 0 && g <= kMaxGpuId && !(ours & (GpuMask{1} << g))) others[g] = mib;
  return others;
}

std::string busy_by_other_text(int gpu, long long mib) {
  return "GPU " + std::to_string(gpu) + " busy: " + std::to_string(mib) + " MiB in use by another process";
}

bool Policy::counts_host(const Plan& plan) const {
  if (batch) return false;
  for (const Job& j : plan.jobs)
    if (j.cpus || j.mem_gib > 0) return true;
  return false;
}

std::string host_too_big_text(const Policy& p, const Job& j) {
  if (p.node_cpus > 0 && j.cpus > p.node_cpus)
    return fmt::format("needs {} cores, the node has {:g} for jobs (node_cpus)", j.cpus, p.node_cpus);
  return fmt::format("needs {:g} GiB of host memory, the node has {:g} for jobs (node_mem_gib)", j.mem_gib,
                     p.node_mem_gib);
}

std::string too_big_text(const Policy& p, const Job& j) {
  double most = p.most_room();
  return fmt::format("needs {:g} GiB on a GPU, more than any takes ({:g} GiB less --gpu-mem-headroom {:g}%: {:.1f})",
                     j.gpu_mem_gib.value_or(0), most / (1 - p.gpu_mem_headroom / 100), p.gpu_mem_headroom, most);
}

namespace {

std::string list(const Plan& plan, const std::vector<size_t>& jobs) {
  std::string s;
  for (size_t j : jobs) s += (s.empty() ? "" : ", ") + plan.jobs[j].id;
  return s;
}

}  // namespace

// "needs 32 cores, 12 free", "needs 40 GiB of host memory, 12.5 free": what it waits for of cores and
// host memory.
std::string host_text(const Why& w) {
  std::string out;
  if (w.need.cpus > w.host.cpus + 1e-9)
    out = fmt::format("needs {} core{}, {:g} free", w.need.cpus, w.need.cpus == 1 ? "" : "s",
                      std::max(0.0, std::floor(w.host.cpus + 1e-9)));
  if (w.need.mem_gib > w.host.mem_gib + 1e-9)
    out += fmt::format("{}needs {:g} GiB of host memory, {:.1f} free", out.empty() ? "" : "; ", w.need.mem_gib,
                       std::max(0.0, w.host.mem_gib));
  return out;
}

std::string stuck_text(const Plan& plan, const Policy& p, const Stuck& s) {
  const Job& job = plan.jobs[s.job];
  const Why& w = s.why;
  switch (w.kind) {
    case Why::Kind::Blocked: {
      if (w.jobs.empty()) return "blocked";
      const Job& r = plan.jobs[w.jobs[0]];
      double limit = run_hours(r, p.time_limit_factor);
      if (r.retry_on_timeout)
        return fmt::format("{} is predicted to time out at each of its {} attempts (est_hours {} is more than {} "
                           "attempts of its limit {}h, with retry_on_timeout and {} {}), so it never runs",
                           r.id, p.retries_of(r) + 1, r.est_hours, p.retries_of(r) + 1, limit,
                           r.max_retries ? "its max_retries" : "--max-retries", p.retries_of(r));
      return fmt::format("{} is predicted to time out (est_hours {} over its limit {}h, no retry_on_timeout), so "
                         "it never runs",
                         r.id, r.est_hours, limit);
    }
    case Why::Kind::Failed: return "failed; no automatic retry will come (its entry has no end time)";
    case Why::Kind::Deps: {
      if (!w.jobs.empty() || !w.afters.empty()) {
        std::vector<size_t> waits;
        for (const Dep& d : job.deps)
          if (d.kind != Dep::Kind::File &&
              (std::find(w.jobs.begin(), w.jobs.end(), d.job) != w.jobs.end() ||
               std::find(w.afters.begin(), w.afters.end(), d.job) != w.afters.end()))
            waits.push_back(d.job);
        return "waits for " + list(plan, waits) + ", which never ran";
      }
      switch (w.source) {
        case Why::Source::NoProducer:
          return "waits for a file: dep that does not exist, and no job of the plan produces it";
        case Why::Source::ProducerGone:
          return fmt::format("waits for a file: dep that does not exist, and {} (its producer) will not run again",
                             plan.jobs[*job.produced_by].id);
        default:
          return fmt::format("waits for the file: dep that {} produces, and {} never ran",
                             plan.jobs[*job.produced_by].id, plan.jobs[*job.produced_by].id);
      }
    }
    case Why::Kind::Backfill:
      return fmt::format("est_hours {} is over --backfill-max-hours {} while {} waits for {}", job.est_hours,
                         p.backfill_max_hours, plan.jobs[w.head].id, w.head_host ? "cores or host memory" : "GPUs");
    case Why::Kind::Held: return "held by hand";
    case Why::Kind::Paused: return "paused: starts after " + hint("resume");
    case Why::Kind::Host: return p.host_too_big(job) ? host_too_big_text(p, job) : host_text(w);
    default: break;
  }
  GpuMask node = mask_of(p.node_gpus);
  GpuMask closed = 0;
  for (const auto& [r, members] : w.closing) closed |= plan.reservations[r].gpus;
  std::string why = fmt::format("needs {} GPUs, {} of {} are open to it", job.gpus, count(node & ~closed), count(node));
  if (p.over_cap(job))
    return fmt::format("needs {} GPUs, more than the {} you may hold at once on this node (the node config's max_gpus)",
                       job.gpus, *p.max_gpus);
  if (p.too_big(job)) return too_big_text(p, job);
  if (p.nodes > 1) why = fmt::format("needs {} GPUs, and a job runs on one node of {} GPUs", job.gpus, count(node));
  for (const auto& [r, members] : w.closing)
    why += fmt::format("; reservation #{} closes GPUs {} until {} {}", r + 1, py_list(plan.reservations[r].gpu_list),
                       list(plan, members), members.size() == 1 ? "finishes" : "finish");
  return why;
}

}  // namespace gpuq
