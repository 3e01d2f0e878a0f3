// A cache of parsed plans, for `status` and `simulate` on long plans.
//
// Reading and checking a plan of 100,000 jobs (14 MB of JSON) takes 100 ms or
// more; users type `status` again and again on the same plan. Once a plan of at
// least kPlanCacheBytes has loaded without errors, its parsed form is kept in
// the cache folder (GPUQ_CACHE_DIR, else $XDG_CACHE_HOME/gpuq, else
// ~/.cache/gpuq), one file per plan path. It is used only when the plan's text
// hashes to what it was made from, with the same --gpus, by this format version,
// and its own checksum holds; anything else (a stale, damaged or foreign file)
// is ignored and the plan is parsed as usual. Only `status` and `simulate` use
// it: `run`, `validate` and the control commands always read the plan itself.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "gpuq/plan.h"

namespace gpuq {

/// Plans shorter than this are parsed each time (it takes under 20 ms).
inline constexpr size_t kPlanCacheBytes = size_t{2} << 20;

/// A 64-bit hash of `text` (for telling texts apart, not against an adversary).
uint64_t text_hash(std::string_view text);

/// What a cache file knows of the plan text it was made from.
struct TextId {
  uint64_t size = 0;
  uint64_t hash = 0;  ///< text_hash
  bool operator==(const TextId&) const = default;
};
inline TextId text_id(std::string_view text) { return {text.size(), text_hash(text)}; }

/// The cache file's contents for a plan that loaded (`load.plan` set) from a text with `gpus`.
std::string encode_plan_cache(const PlanLoad& load, TextId text, const std::vector<int>& gpus);
inline std::string encode_plan_cache(const PlanLoad& load, std::string_view text, const std::vector<int>& gpus) {
  return encode_plan_cache(load, text_id(text), gpus);
}

/// The load that `encode_plan_cache` recorded, or nullopt when `blob` is not a
/// cache of exactly this text and these GPUs (or is damaged in any way).
std::optional<PlanLoad> decode_plan_cache(std::string_view blob, TextId text, const std::vector<int>& gpus);
inline std::optional<PlanLoad> decode_plan_cache(std::string_view blob, std::string_view text,
                                                 const std::vector<int>& gpus) {
  return decode_plan_cache(blob, text_id(text), gpus);
}

/// Where the cache of the plan at `plan_path` lives, or "" when there is no cache folder.
std::string plan_cache_path(const std::string& plan_path);

/// load_plan, through the cache: reads a valid cache, else parses and (for a long
/// plan that loads) writes one. Failures of the cache are silent: it is only a cache.
PlanLoad load_plan_cached(const std::string& path, const std::vector<int>& node_gpus);

}  // namespace gpuq
