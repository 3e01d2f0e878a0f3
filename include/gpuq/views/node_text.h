// `gpuq status --node`: every user's running and waiting jobs on a shared node, as text.
#pragma once

#ifdef GPUQ_CORE
#error "the core does not include views: it returns data, views print it"
#endif

#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "gpuq/core/node.h"

namespace gpuq {

/// The node's table: one row per running job (its GPUs, since when), then one per waiting job
/// in the node's fair order (the GPUs the next decision gives it, or when the node's wants
/// played forward start it (predict_node) and after whose job, and its place in line), then
/// each user's decayed GPU-hours. `notes` (files refused, claims reaped) come first.
std::string node_text(const std::string& dir, const std::vector<NodeUser>& users, const std::vector<std::string>& notes,
                      GpuMask node, double now, const NodeConfig& config, double backfill_max_hours,
                      const NodeRoom& room = {}, const HostRoom& host = kHostUncounted);

/// The same as one JSON object (status --node --json): {"dir", "now", "notes", "gpus_held", "users":
/// [{"name", "usage_gpu_hours", "runs": [{"plan", "pid", "ended", "holds": [{"id", "gpus", "start",
/// "est_hours", "mem_gib", "preemptible", "preempting", "cpus", "host_mem_gib"}], "wants": [{"id", "gpus",
/// "priority", "cpus", "host_mem_gib",
/// "est_hours", "mem_gib", "place", "why", "start"}]}]}]}; a want's "start" is null unless known.
std::string node_json(const std::string& dir, const std::vector<NodeUser>& users, const std::vector<std::string>& notes,
                      GpuMask node, double now, const NodeConfig& config, double backfill_max_hours,
                      const NodeRoom& room = {}, const HostRoom& host = kHostUncounted);

/// Why a want waits on the node, in words ("at ana's cap of 4 GPUs (4 held)", "starts ~14:30
/// after bo's train, 3 in the node's fair order"): status --node's "when", and plain status's
/// reason for a job the node keeps waiting.
std::string node_why_text(const NodeWhy& why, double now);

}  // namespace gpuq
