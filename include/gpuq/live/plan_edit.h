// Changes to a plan from another shell while `run` goes on: `gpuq pause` / `gpuq resume`
// (the file PLAN.paused, gpuq's own) and `gpuq add` (one job appended to the plan file).
#pragma once

#if defined(GPUQ_CORE) || defined(GPUQ_VIEWS)
#error "a live header (the OS behind ports) in the core or the views: pass data in instead"
#endif

#include <optional>
#include <string>
#include <vector>

#include "gpuq/live/store.h"

namespace gpuq {

/// Since when the plan is paused (the time in PLAN.paused), or nullopt when it is not.
/// A file that cannot be read as one counts as paused since its modification time.
std::optional<double> paused_since(const PlanPaths& paths);

/// `gpuq pause` (on) or `gpuq resume` (off) at `now`, under the state's lock, with a
/// pause/resume event in the event log. Returns the line to print; throws StoreError.
std::string set_paused(const PlanPaths& paths, bool on, double now);

/// Replaces the file at `path` with `text`: a temporary file beside it (the old file's
/// mode kept), fsynced, renamed over it, the folder fsynced. Throws StoreError.
void replace_file_durably(const std::string& path, const std::string& text);

}  // namespace gpuq
