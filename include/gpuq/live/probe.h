// The GPU probe of this machine: memory in use per GPU, from nvidia-smi.
#pragma once

#if defined(GPUQ_CORE) || defined(GPUQ_VIEWS)
#error "a live header (the OS behind ports) in the core or the views: pass data in instead"
#endif

#include <map>
#include <optional>
#include <string>

#include "gpuq/live/ports.h"

namespace gpuq {

/// Runs `COMMAND --query-gpu=index,memory.used,utilization.gpu
/// --format=csv,noheader,nounits` (COMMAND found on PATH) and parses its lines
/// (parse_gpu_csv). No command, a non-zero exit, a timeout or a line it cannot
/// read gives no reading, with the problem said.
GpuReading probe_gpus(const std::string& command, double timeout_s);

/// Parses nvidia-smi's CSV: "index, MiB" or "index, MiB, percent" lines (an
/// older nvidia-smi, or a fake one, prints two columns; a GPU that cannot say
/// its utilization prints "[N/A]" or "[Not Supported]": it has no
/// utilization). A reading without `problem`, or with it set on anything else.
GpuReading parse_gpu_csv(const std::string& csv);

/// The GpuProbe that asks nvidia-smi (probe_gpus).
class NvidiaSmiProbe : public GpuProbe {
 public:
  NvidiaSmiProbe(std::string command, double timeout_s) : command_(std::move(command)), timeout_s_(timeout_s) {}
  GpuReading read() override { return probe_gpus(command_, timeout_s_); }

 private:
  std::string command_;
  double timeout_s_;
};

}  // namespace gpuq
