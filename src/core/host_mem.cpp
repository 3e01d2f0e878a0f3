#include "gpuq/core/host_mem.h"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <cctype>
#include <charconv>
#include <cmath>

namespace gpuq {

bool over_memory(double mem_gib, double resident_gib, double margin_percent) {
  return mem_gib > 0 && resident_gib > mem_gib * (1 + margin_percent / 100);
}

std::string over_memory_text(double mem_gib, double resident_gib, double margin_percent) {
  return fmt::format("{:.2f} GiB resident, its mem_gib is {:g} (+{:g}%)", resident_gib, mem_gib, margin_percent);
}

bool gpu_oom_in_log(std::string_view tail) {
  static constexpr std::array<std::string_view, 5> kSigns{"CUDA out of memory", "torch.OutOfMemoryError",
                                                          "torch.cuda.OutOfMemoryError", "CUBLAS_STATUS_ALLOC_FAILED",
                                                          "RESOURCE_EXHAUSTED"};
  return std::any_of(kSigns.begin(), kSigns.end(), [&](std::string_view s) { return tail.find(s) != std::string_view::npos; });
}

namespace {

// The number that follows `at` in `line` (digits only), or -1.
long long number_at(std::string_view line, size_t at) {
  long long n = -1;
  for (; at < line.size() && std::isdigit(static_cast<unsigned char>(line[at])); ++at)
    n = (n < 0 ? 0 : n * 10) + (line[at] - '0');
  return n;
}

}  // namespace

bool oom_kill_in_kernel_log(std::string_view kernel_log, const std::vector<long long>& pids) {
  if (pids.empty()) return false;
  auto ours = [&](long long pid) { return pid > 0 && std::find(pids.begin(), pids.end(), pid) != pids.end(); };
  size_t from = 0;
  while (from < kernel_log.size()) {
    size_t end = std::min(kernel_log.find('\n', from), kernel_log.size());
    std::string_view line = kernel_log.substr(from, end - from);
    from = end + 1;
    // "Out of memory: Killed process 1234 (python3) total-vm:..." (and "Memory cgroup out of memory: ...").
    if (size_t k = line.find("Killed process "); k != std::string_view::npos && ours(number_at(line, k + 15)))
      return true;
    // "oom-kill:constraint=CONSTRAINT_NONE,...,task=python3,pid=1234,uid=0"
    if (line.find("oom-kill:") != std::string_view::npos)
      if (size_t k = line.find(",pid="); k != std::string_view::npos && ours(number_at(line, k + 5))) return true;
  }
  return false;
}

bool is_oom(Outcome o) { return o == Outcome::OverMemory || o == Outcome::OomGpu || o == Outcome::OomHost; }

namespace {

// `value` halved or doubled, when it is a number: a whole one stays whole (at least 1).
std::optional<std::string> scaled(const std::string& value, bool half) {
  double v = 0;
  auto [end, ec] = std::from_chars(value.data(), value.data() + value.size(), v);
  if (ec != std::errc() || end != value.data() + value.size() || !std::isfinite(v)) return std::nullopt;
  bool whole = value.find_first_of(".eE") == std::string::npos;
  double next = half ? v / 2 : v * 2;
  if (whole) return fmt::format("{}", std::max(1LL, static_cast<long long>(std::floor(next))));
  return fmt::format("{}", next);
}

}  // namespace

OomValues oom_values(const Job& job, long long n) {
  OomValues out;
  out.mem_gib = job.mem_gib;
  out.gpu_mem_gib = job.gpu_mem_gib.value_or(0);
  if (!job.on_oom || n <= 0) return out;
  const OnOom& o = *job.on_oom;
  out.mem_gib = job.mem_gib * std::pow(o.mem_factor, static_cast<double>(n));
  out.gpu_mem_gib *= std::pow(o.gpu_mem_factor, static_cast<double>(n));
  std::vector<std::string> said;
  if (job.mem_gib > 0 && o.mem_factor != 1) said.push_back(fmt::format("mem_gib {:g}", out.mem_gib));
  if (out.gpu_mem_gib > 0 && o.gpu_mem_factor != 1) said.push_back(fmt::format("gpu_mem_gib {:g}", out.gpu_mem_gib));
  for (const auto& [name, rule] : o.env) {
    std::optional<std::string> value;
    for (const auto& [k, v] : job.env)
      if (k == name) value = v;
    bool scales = rule == "half" || rule == "double";
    if (scales && !value) continue;  // nothing to scale: left as it is
    for (long long i = 0; i < n; ++i) {
      if (!scales) {
        value = rule;
        break;
      }
      std::optional<std::string> next = scaled(*value, rule == "half");
      if (!next) break;  // no number: left as it is
      value = next;
    }
    out.env.emplace_back(name, *value);
    said.push_back(name + "=" + *value);
  }
  for (size_t i = 0; i < said.size(); ++i) out.text += (i ? ", " : "") + said[i];
  return out;
}

}  // namespace gpuq
