#include "gpuq/core/rules.h"

#include <cmath>

#include <fmt/format.h>

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

}  // namespace gpuq
