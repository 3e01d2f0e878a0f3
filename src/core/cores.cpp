#include "gpuq/core/cores.h"

#include <algorithm>
#include <map>

namespace gpuq {

std::vector<int> choose_cores(const std::vector<int>& node, const std::vector<std::vector<int>>& held, int n) {
  std::vector<int> cores = node;
  std::sort(cores.begin(), cores.end());
  cores.erase(std::unique(cores.begin(), cores.end()), cores.end());
  n = std::min<int>(n, static_cast<int>(cores.size()));
  if (n <= 0) return {};
  std::map<int, int> use;
  for (const std::vector<int>& job : held)
    for (int c : job) ++use[c];
  auto used = [&](int c) {
    auto it = use.find(c);
    return it == use.end() ? 0 : it->second;
  };
  // A run of n free cores, numbered one after the other (siblings of one socket, as a rule).
  for (size_t i = 0; i + static_cast<size_t>(n) <= cores.size(); ++i) {
    bool run = true;
    for (size_t k = i; k < i + static_cast<size_t>(n) && run; ++k)
      run = used(cores[k]) == 0 && (k == i || cores[k] == cores[k - 1] + 1);
    if (run) return {cores.begin() + static_cast<long>(i), cores.begin() + static_cast<long>(i) + n};
  }
  std::stable_sort(cores.begin(), cores.end(), [&](int a, int b) { return used(a) < used(b); });
  std::vector<int> out(cores.begin(), cores.begin() + n);
  std::sort(out.begin(), out.end());
  return out;
}

}  // namespace gpuq
