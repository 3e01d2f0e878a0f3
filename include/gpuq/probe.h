// The GPU probe: memory in use per GPU, from nvidia-smi.
#pragma once

#include <map>
#include <optional>
#include <string>

namespace gpuq {

/// A reading of nvidia-smi, or why there is none.
struct GpuReading {
  std::optional<std::map<int, long long>> used_mib;  ///< GPU index -> MiB in use
  std::string problem;                               ///< why there is no reading
};

/// Runs `COMMAND --query-gpu=index,memory.used --format=csv,noheader,nounits`
/// (COMMAND found on PATH) and parses "index, MiB" lines. No command, a
/// non-zero exit, a timeout or any line that is not two integers gives no
/// reading, with the problem said.
GpuReading probe_gpus(const std::string& command, double timeout_s);

/// Parses nvidia-smi's CSV; nullopt with `problem` set on anything unexpected.
std::optional<std::map<int, long long>> parse_gpu_memory(const std::string& csv, std::string* problem);

}  // namespace gpuq
