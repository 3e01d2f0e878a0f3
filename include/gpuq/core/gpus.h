// GPU sets and the original's GPU choice (NVLink pairs, then lowest ids).
#pragma once

#include <bit>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace gpuq {

/// A set of GPU ids, bit g set for GPU g. Ids are limited to 0..63.
using GpuMask = std::uint64_t;

/// The largest GPU id gpuq accepts.
inline constexpr int kMaxGpuId = 63;

/// The mask holding exactly the given ids (each must be 0..kMaxGpuId).
GpuMask mask_of(const std::vector<int>& ids);

/// The ids in the mask, ascending.
std::vector<int> ids_of(GpuMask mask);

/// Number of GPUs in the mask.
inline int count(GpuMask m) { return std::popcount(m); }

/// Parses a `--gpus` value such as "0,1,2,3", "0-3" or "0,2-4": ids in the order given.
/// Returns nullopt and fills `err` on an empty list, a non-number, an id
/// outside 0..63, a range that runs backwards or a repeated id.
std::optional<std::vector<int>> parse_gpu_list(std::string_view text, std::string* err);

/// The original's choice of GPUs for a job needing `n` among `free`:
/// none for n == 0; for n == 2 the first free pair of (0,1) (2,3) (4,5) (6,7);
/// otherwise the n lowest free ids. nullopt when they do not fit.
std::optional<std::vector<int>> pick_gpus(int n, GpuMask free);

/// Python's repr of a list of ints: "[0, 1]", "[]".
std::string py_list(const std::vector<int>& ids);

}  // namespace gpuq
