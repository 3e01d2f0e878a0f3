// `gpuq gpus` as text and as JSON.
#pragma once

#ifdef GPUQ_CORE
#error "the core does not include views: it returns data, views print it"
#endif

#include <map>
#include <string>
#include <vector>

#include "gpuq/core/gpu_use.h"
#include "gpuq/core/topology.h"

namespace gpuq {

/// A row per GPU (memory, utilization, foreign processes), the connections, the pairs.
std::string gpus_text(const GpusSeen& n);

/// The same as one JSON object: {"source", "source_note", "problem", "gpus", "links", "pairs", "placement"}.
std::string gpus_json(const GpusSeen& n);

}  // namespace gpuq
