// The state file PLAN.state.json as text: read with simdjson, written in the
// original's layout (json.dumps(state, indent=1)).
#pragma once

#if defined(GPUQ_CORE) || defined(GPUQ_VIEWS)
#error "a live header (the OS behind ports) in the core or the views: pass data in instead"
#endif

#include <optional>
#include <string>
#include <string_view>

#include "gpuq/core/state.h"

namespace gpuq {

/// Outcome of decoding a state file.
struct StateLoad {
  std::optional<State> state;
  std::string error;  ///< "FILE: where: problem" when state is empty
};

/// Decodes state text. `file` names it in messages. Empty text is an error
/// (a missing file is not: the caller treats that as an empty state). A
/// repeated entry or field keeps its last value, where it first appeared (as
/// the original's dicts do); unknown fields go to `extra`.
StateLoad parse_state(std::string_view text, const std::string& file);

/// Encodes the state as the original does (json.dumps(state, indent=1)).
std::string dump_state(const State& state);

}  // namespace gpuq
