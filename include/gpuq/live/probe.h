// The GPU probes of this machine: nvidia-smi's (here), NVML's (nvml.h), the choice between
// them (--gpu-probe), and the background reader that keeps the probe off `run`'s dispatch path.
#pragma once

#if defined(GPUQ_CORE) || defined(GPUQ_VIEWS)
#error "a live header (the OS behind ports) in the core or the views: pass data in instead"
#endif

#include <condition_variable>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>

#include "gpuq/live/ports.h"

namespace gpuq {

/// Runs `COMMAND --query-gpu=index,memory.used,utilization.gpu,ecc.errors.uncorrected.volatile.total
/// --format=csv,noheader,nounits` (COMMAND found on PATH) and parses its lines
/// (parse_gpu_csv). No command, a non-zero exit, a timeout or a line it cannot
/// read gives no reading, with the problem said.
GpuReading probe_gpus(const std::string& command, double timeout_s);

/// Parses nvidia-smi's CSV: "index, MiB", "index, MiB, percent" or "index, MiB, percent,
/// uncorrectable ECC errors" lines (an older nvidia-smi, or a fake one, prints fewer columns;
/// a GPU that cannot say its utilization or ECC count prints "[N/A]" or "[Not Supported]"). A reading without `problem`, or with it set on anything else.
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

/// Runs `COMMAND topo -m` and parses its matrix (parse_topo_matrix); nullopt with `problem`
/// filled when it cannot be run or read.
std::optional<Topology> probe_topology_smi(const std::string& command, double timeout_s, std::string* problem);

/// What --pairs auto makes of the topology, for a line at the start of `run` and in `gpus`:
/// "--pairs auto: 2-GPU jobs take [0, 2] [1, 3] first (the topology)", or that it keeps the
/// original's pairs for want of one.
std::string placement_line(const Placement& p, GpuMask node);

/// --gpu-probe: where readings come from.
enum class ProbeKind {
  Auto,       ///< NVML, and nvidia-smi from the first NVML failure on
  Nvml,       ///< NVML only
  NvidiaSmi,  ///< nvidia-smi only
  None,       ///< no reading: every GPU no job holds is free
};

/// "auto", "nvml", "nvidia-smi", "none"; nullopt for anything else.
std::optional<ProbeKind> parse_probe_kind(const std::string& text);

/// The probe --gpu-probe names. Auto opens NVML (nvml_library()); where it cannot, or at its
/// first failed reading, it uses nvidia-smi (`nvidia_smi`) from then on, and every reading
/// says in source_note why. Readings say their source ("nvml", "nvidia-smi").
std::unique_ptr<GpuProbe> make_probe(ProbeKind kind, const std::string& nvidia_smi, double timeout_s);

/// A probe read on a thread of its own, so that a tick never waits for it: read() returns the
/// latest reading at once (only the first read() waits for one) and asks for a fresh one,
/// which the thread takes when at least `min_period_s` has passed since the last. A reading
/// is thus at most one tick old, plus the time it takes; `taken` says when it was taken.
class BackgroundProbe : public GpuProbe {
 public:
  BackgroundProbe(std::unique_ptr<GpuProbe> inner, double min_period_s);
  ~BackgroundProbe() override;  ///< tells the thread to end, without waiting for it
  GpuReading read() override;
  std::optional<Topology> topology() override;

  struct Shared;  ///< what the thread and this object share (kept alive by both)

 private:
  std::shared_ptr<Shared> shared_;
};

}  // namespace gpuq
