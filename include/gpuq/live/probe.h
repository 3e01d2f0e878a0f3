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

/// Runs `COMMAND --query-gpu=index,memory.used --format=csv,noheader,nounits`
/// (COMMAND found on PATH) and parses "index, MiB" lines. No command, a
/// non-zero exit, a timeout or any line that is not two integers gives no
/// reading, with the problem said.
GpuReading probe_gpus(const std::string& command, double timeout_s);

/// Parses nvidia-smi's CSV; nullopt with `problem` set on anything unexpected.
std::optional<std::map<int, long long>> parse_gpu_memory(const std::string& csv, std::string* problem);

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
