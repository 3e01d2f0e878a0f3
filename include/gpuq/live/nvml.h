// The GPU probe that reads NVML (libnvidia-ml.so.1) directly, opened at run time with
// dlopen: no build dependency on CUDA. The few functions and structs used are declared
// in nvml.cpp after NVIDIA's nvml.h (the ABI of these symbols is stable).
#pragma once

#if defined(GPUQ_CORE) || defined(GPUQ_VIEWS)
#error "a live header (the OS behind ports) in the core or the views: pass data in instead"
#endif

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "gpuq/live/ports.h"

namespace gpuq {

/// The library gpuq opens: $GPUQ_NVML_LIB (a path), else "libnvidia-ml.so.1" (found as the
/// loader finds it: LD_LIBRARY_PATH, then the system's folders).
std::string nvml_library();

/// NVML, initialized once with a handle kept per GPU. GPU index k is the k-th device in PCI
/// bus id order (as CUDA numbers them with CUDA_DEVICE_ORDER=PCI_BUS_ID, and nvidia-smi).
class NvmlProbe : public GpuProbe {
 public:
  /// Opens `library` and calls nvmlInit_v2; ok() says whether that worked, problem() why not.
  explicit NvmlProbe(const std::string& library);
  ~NvmlProbe() override;  ///< nvmlShutdown, dlclose
  NvmlProbe(const NvmlProbe&) = delete;
  NvmlProbe& operator=(const NvmlProbe&) = delete;

  bool ok() const { return ok_; }
  const std::string& problem() const { return problem_; }
  /// "libnvidia-ml.so.1, 8 GPUs".
  std::string describe() const;

  /// Memory, utilization, compute processes (with their /proc lineage) and names of every
  /// GPU. A GPU that NVML calls lost is in `lost`; any other NVML error gives no reading,
  /// with the call and NVML's words in `problem`.
  GpuReading read() override;
  /// NVLink lanes between each pair of GPUs (through NVSwitch too), else their common
  /// ancestor in the PCIe tree.
  std::optional<Topology> topology() override;

 private:
  struct Api;
  std::unique_ptr<Api> api_;
  void* lib_ = nullptr;
  bool ok_ = false;
  bool initialized_ = false;
  std::string library_, problem_;
  struct Device;
  std::vector<Device> devices_;
  void* events_ = nullptr;  ///< the Xid event set (nvmlEventSet_t), where NVML gives one
  std::string xid_note_;  ///< "Xid events", or which of the GPUs give them

  void bind(const std::string& library);  ///< each function of the library (problem_: the first missing)
  void open_devices();                    ///< nvmlInit, then the GPUs in PCI order (ok_)
  void listen_for_xids();                 ///< the Xid event set, for the GPUs that give events
  /// The kinds of fault that at least one GPU can say (the others say Not Supported).
  struct FaultKinds {
    bool ecc = false, retire = false, remap = false;
  };
  /// GPU g's uncorrectable ECC errors and pending retirements or remaps, into `r`.
  void read_faults(const Device& d, int g, GpuReading& r, FaultKinds& kinds) const;
  /// The compute processes on GPU g, into `list`; NVML's return code.
  int read_processes(const Device& d, std::vector<GpuProcess>& list) const;
};

}  // namespace gpuq
