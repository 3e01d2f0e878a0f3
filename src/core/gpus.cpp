#include "gpuq/core/gpus.h"

#include <bit>
#include <charconv>

namespace gpuq {

GpuMask mask_of(const std::vector<int>& ids) {
  GpuMask m = 0;
  for (int g : ids) m |= GpuMask{1} << g;
  return m;
}

std::vector<int> ids_of(GpuMask mask) {
  std::vector<int> out;
  while (mask) {
    int g = std::countr_zero(mask);
    out.push_back(g);
    mask &= mask - 1;
  }
  return out;
}

std::optional<std::vector<int>> parse_gpu_list(std::string_view text, std::string* err) {
  std::vector<int> ids;
  GpuMask seen = 0;
  size_t pos = 0;
  // One id, or nullopt with the problem said.
  auto id_of = [&](std::string_view item) -> std::optional<int> {
    while (!item.empty() && item.front() == ' ') item.remove_prefix(1);
    while (!item.empty() && item.back() == ' ') item.remove_suffix(1);
    int g = -1;
    auto [p, ec] = std::from_chars(item.data(), item.data() + item.size(), g);
    if (item.empty() || ec != std::errc() || p != item.data() + item.size()) {
      *err = "'" + std::string(item) + "' in --gpus '" + std::string(text) +
             "' is not a GPU id (expected ids and ranges, e.g. 0,1,2,3 or 0-3 or 0,2-4)";
      return std::nullopt;
    }
    if (g < 0 || g > kMaxGpuId) {
      *err = "GPU id " + std::to_string(g) + " in --gpus is outside 0.." + std::to_string(kMaxGpuId);
      return std::nullopt;
    }
    return g;
  };
  while (true) {
    size_t comma = text.find(',', pos);
    std::string_view item = text.substr(pos, comma == std::string_view::npos ? std::string_view::npos : comma - pos);
    // "A-B": every id from A to B (a range, as nvidia-smi and taskset write them).
    size_t dash = item.find('-');
    std::optional<int> lo = id_of(dash == std::string_view::npos ? item : item.substr(0, dash));
    if (!lo) return std::nullopt;
    std::optional<int> hi = lo;
    if (dash != std::string_view::npos) {
      hi = id_of(item.substr(dash + 1));
      if (!hi) return std::nullopt;
      if (*hi < *lo) {
        *err = "the range '" + std::string(item) + "' in --gpus '" + std::string(text) + "' runs backwards";
        return std::nullopt;
      }
    }
    for (int g = *lo; g <= *hi; ++g) {
      if (seen & (GpuMask{1} << g)) {
        *err = "GPU id " + std::to_string(g) + " appears twice in --gpus '" + std::string(text) + "'";
        return std::nullopt;
      }
      seen |= GpuMask{1} << g;
      ids.push_back(g);
    }
    if (comma == std::string_view::npos) break;
    pos = comma + 1;
  }
  return ids;
}

std::optional<std::vector<int>> pick_gpus(int n, GpuMask free) {
  if (n == 0) return std::vector<int>{};
  if (n == 2) {
    for (int a = 0; a < 8; a += 2) {
      GpuMask pair = (GpuMask{1} << a) | (GpuMask{1} << (a + 1));
      if ((free & pair) == pair) return std::vector<int>{a, a + 1};
    }
  }
  if (count(free) < n) return std::nullopt;
  std::vector<int> out;
  out.reserve(n);
  while (static_cast<int>(out.size()) < n) {
    int g = std::countr_zero(free);
    out.push_back(g);
    free &= free - 1;
  }
  return out;
}

std::string py_list(const std::vector<int>& ids) {
  std::string s = "[";
  for (size_t i = 0; i < ids.size(); ++i) {
    if (i) s += ", ";
    s += std::to_string(ids[i]);
  }
  return s + "]";
}

}  // namespace gpuq
