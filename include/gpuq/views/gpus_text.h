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

/// What `gpus` shows: the probe's reading of `gpus`, the placement (its topology and the line
/// saying which pairs are used), and the processes of no gpuq job on each GPU.
struct GpusSeen {
  GpuReading reading;
  Placement placement;
  std::vector<int> gpus;
  std::map<int, std::vector<GpuProcess>> foreign;
  std::string placement_line;
};

/// A row per GPU (memory, utilization, foreign processes), the connections, the pairs.
std::string gpus_text(const GpusSeen& n);

/// The same as one JSON object: {"source", "source_note", "problem", "gpus", "links", "pairs", "placement"}.
std::string gpus_json(const GpusSeen& n);

}  // namespace gpuq
