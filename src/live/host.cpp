// The rest of the box as this machine has it: its cores and memory.
#include "gpuq/live/host.h"

#include <fmt/format.h>
#include <sched.h>
#include <unistd.h>

#include <charconv>
#include <fstream>
#include <sstream>

namespace gpuq {

std::vector<int> usable_cores() {
  std::vector<int> out;
  cpu_set_t set;
  CPU_ZERO(&set);
  if (sched_getaffinity(0, sizeof set, &set) == 0) {
    for (int c = 0; c < CPU_SETSIZE; ++c)
      if (CPU_ISSET(c, &set)) out.push_back(c);
  }
  if (out.empty()) {
    long n = sysconf(_SC_NPROCESSORS_ONLN);
    for (int c = 0; c < std::max(1L, n); ++c) out.push_back(c);
  }
  return out;
}

double machine_mem_gib() {
  std::ifstream in("/proc/meminfo");
  std::string key, unit;
  long long kib = 0;
  while (in >> key >> kib) {
    std::getline(in, unit);
    if (key == "MemTotal:") return static_cast<double>(kib) / (1024.0 * 1024.0);
  }
  return 0;
}

std::string core_list_text(const std::vector<int>& cores) {
  std::string out;
  for (size_t i = 0; i < cores.size();) {
    size_t k = i;
    while (k + 1 < cores.size() && cores[k + 1] == cores[k] + 1) ++k;
    out += (out.empty() ? "" : ",") + (k == i ? std::to_string(cores[i]) : fmt::format("{}-{}", cores[i], cores[k]));
    i = k + 1;
  }
  return out;
}

std::vector<int> parse_core_list(const std::string& text) {
  std::vector<int> out;
  std::stringstream in(text);
  for (std::string part; std::getline(in, part, ',');) {
    while (!part.empty() && (part.back() == '\n' || part.back() == ' ')) part.pop_back();
    if (part.empty()) continue;
    int a = 0, b = 0;
    size_t dash = part.find('-');
    std::string_view first(part.data(), dash == std::string::npos ? part.size() : dash);
    if (std::from_chars(first.data(), first.data() + first.size(), a).ec != std::errc()) return {};
    b = a;
    if (dash != std::string::npos &&
        std::from_chars(part.data() + dash + 1, part.data() + part.size(), b).ec != std::errc())
      return {};
    if (b < a || b - a > 65536) return {};
    for (int c = a; c <= b; ++c) out.push_back(c);
  }
  return out;
}

}  // namespace gpuq
