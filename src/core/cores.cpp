#include "gpuq/core/cores.h"

#include <fmt/format.h>

#include <algorithm>
#include <charconv>
#include <map>
#include <sstream>
#include <string_view>

namespace gpuq {

namespace {

// `n` of `cores` (sorted, each once, n <= their number) by the rule without a preference: the
// first run of n free consecutive cores, else the least used, lowest first. Sorted.
std::vector<int> pick(std::vector<int> cores, const std::map<int, int>& use, int n) {
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

}  // namespace

std::vector<int> choose_cores(const std::vector<int>& node, const std::vector<std::vector<int>>& held, int n,
                              const std::vector<int>& near) {
  std::vector<int> cores = node;
  std::sort(cores.begin(), cores.end());
  cores.erase(std::unique(cores.begin(), cores.end()), cores.end());
  n = std::min<int>(n, static_cast<int>(cores.size()));
  if (n <= 0) return {};
  std::map<int, int> use;
  for (const std::vector<int>& job : held)
    for (int c : job) ++use[c];
  // The free cores near the job's GPUs come first; the rest, the old rule's (all of it without them).
  std::vector<int> mine, rest;
  for (int c : cores)
    (!use.count(c) && std::find(near.begin(), near.end(), c) != near.end() ? mine : rest).push_back(c);
  if (static_cast<int>(mine.size()) >= n) return pick(mine, use, n);
  std::vector<int> more = pick(rest, use, n - static_cast<int>(mine.size()));
  mine.insert(mine.end(), more.begin(), more.end());
  std::sort(mine.begin(), mine.end());
  return mine;
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
    if (a < 0 || b < a || b > kMaxCoreId) return {};  // a list from another user's node file too
    for (int c = a; c <= b; ++c) out.push_back(c);
  }
  return out;
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

}  // namespace gpuq
