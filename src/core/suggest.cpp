#include "gpuq/core/suggest.h"

#include <algorithm>
#include <cctype>

namespace gpuq {

size_t edit_distance(std::string_view a, std::string_view b) {
  auto low = [](char c) { return static_cast<char>(std::tolower(static_cast<unsigned char>(c))); };
  size_t n = a.size(), m = b.size();
  // Three rows of the optimal-string-alignment table.
  std::vector<size_t> prev2(m + 1), prev(m + 1), cur(m + 1);
  for (size_t j = 0; j <= m; ++j) prev[j] = j;
  for (size_t i = 1; i <= n; ++i) {
    cur[0] = i;
    for (size_t j = 1; j <= m; ++j) {
      size_t cost = low(a[i - 1]) == low(b[j - 1]) ? 0 : 1;
      cur[j] = std::min({prev[j] + 1, cur[j - 1] + 1, prev[j - 1] + cost});
      if (i > 1 && j > 1 && low(a[i - 1]) == low(b[j - 2]) && low(a[i - 2]) == low(b[j - 1]))
        cur[j] = std::min(cur[j], prev2[j - 2] + 1);
    }
    prev2.swap(prev);
    prev.swap(cur);
  }
  return prev[m];
}

size_t typo_distance(std::string_view word) { return word.size() <= 4 ? 1 : 2; }

std::optional<std::string> nearest_name(std::string_view word, const std::vector<std::string_view>& candidates) {
  size_t limit = typo_distance(word), best = limit + 1;
  std::optional<std::string> found;
  for (std::string_view c : candidates) {
    if (c == word) continue;
    // A length difference past the limit cannot be within it: skip the table.
    size_t gap = c.size() > word.size() ? c.size() - word.size() : word.size() - c.size();
    if (gap > limit) continue;
    size_t d = edit_distance(word, c);
    if (d < best) {
      best = d;
      found = std::string(c);
    }
  }
  return found;
}

std::string did_you_mean(std::string_view word, const std::vector<std::string_view>& candidates) {
  auto n = nearest_name(word, candidates);
  return n ? "; did you mean \"" + *n + "\"?" : "";
}

}  // namespace gpuq
