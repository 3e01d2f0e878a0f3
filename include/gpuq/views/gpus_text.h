// `gpuq gpus` as text and as JSON.
#pragma once

#ifdef GPUQ_CORE
#error "the core does not include views: it returns data, views print it"
#endif

#include <map>
#include <string>
#include <vector>

#include "gpuq/core/gpu_health.h"
#include "gpuq/core/gpu_use.h"
#include "gpuq/core/topology.h"

namespace gpuq {

/// A row per GPU (memory, utilization, foreign processes), the connections, the pairs.
std::string gpus_text(const GpusSeen& n);

/// The processes of no gpuq job that have sat on an idle GPU for `after` seconds or more: a
/// heading and a line each ("GPU 5: ana's process 4242 `python nb.py`, 20000 MiB, at or below 5%
/// for 3.2 h (since 11:02)"); "" when there is none.
std::string idle_holders_text(const std::vector<IdleHolder>& idle, double now, double after, double idle_pct);

/// The same as one JSON object: {"source", "source_note", "problem", "gpus", "links", "pairs",
/// "placement", "idle_processes"}.
std::string gpus_json(const GpusSeen& n);

}  // namespace gpuq
