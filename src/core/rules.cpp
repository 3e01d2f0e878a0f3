#include "gpuq/core/rules.h"

#include <cmath>

#include <fmt/format.h>

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

std::string too_big_text(const Policy& p, const Job& j) {
  double most = p.most_room();
  return fmt::format("needs {:g} GiB on a GPU, more than any takes ({:g} GiB less --gpu-mem-headroom {:g}%: {:.1f})",
                     j.gpu_mem_gib.value_or(0), most / (1 - p.gpu_mem_headroom / 100), p.gpu_mem_headroom, most);
}

}  // namespace gpuq
