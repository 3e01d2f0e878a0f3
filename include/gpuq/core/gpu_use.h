// What a GPU probe reads of the node (memory, utilization, compute processes, lost GPUs)
// and the rules on it: which GPUs another user holds, and how that is said. Pure: the
// probes (live/probe.h, live/nvml.h) fill a GpuReading; run, status and gpus read it here.
#pragma once

#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "gpuq/core/gpus.h"
#include "gpuq/core/state.h"
#include "gpuq/core/topology.h"

namespace gpuq {

/// A compute process on a GPU, as the probe saw it (NVML's process list).
struct GpuProcess {
  long long pid = 0;
  long long used_mib = -1;         ///< its memory on that GPU; -1 when not given
  std::string name;                ///< its command's name (/proc comm), "" when not readable
  std::string command;             ///< its command line, shortened, "" when not readable
  std::vector<long long> lineage;  ///< its pid, process group, session and ancestors, read when it was seen
  std::string user;                ///< the user it runs as, "" when not readable
};

/// A reading of the GPUs, or why there is none.
struct GpuReading {
  std::optional<std::map<int, long long>> used_mib;  ///< GPU index -> MiB in use
  std::string problem;                               ///< why there is no reading
  std::map<int, int> util_pct;                       ///< GPU index -> utilization in percent, for the GPUs
                                                     ///< that gave one (none from an older nvidia-smi)
  std::string source;                                ///< "nvml", "nvidia-smi" ("" for a fake)
  std::string source_note;                           ///< how the source was chosen: "NVML: ...; nvidia-smi from now on"
  /// GPU index -> its compute processes; only from a source that lists them (NVML).
  std::optional<std::map<int, std::vector<GpuProcess>>> processes;
  std::map<int, std::string> lost;     ///< GPU index -> why it gives no reading ("GPU is lost")
  std::map<int, std::string> names;    ///< GPU index -> its product name (NVML)
  std::map<int, long long> total_mib;  ///< GPU index -> its memory (NVML)
  /// GPU index -> its energy counter, mJ since the driver loaded (NVML, Volta and later; none from nvidia-smi)
  std::map<int, unsigned long long> energy_mj;
  std::optional<double> taken;         ///< when it was read (unix s), for a reading kept from before
  // Faults (gpu_health.h): what this source can read of them is in `faults_seen`.
  std::map<int, std::vector<unsigned>> xids;          ///< GPU index -> Xid events since the last reading (NVML)
  std::map<int, unsigned long long> ecc_uncorrected;  ///< GPU index -> uncorrectable ECC errors since the driver loaded
  std::map<int, std::string> pending;  ///< GPU index -> "page retirement pending", "row remap pending" (NVML)
  std::string faults_seen;             ///< which faults the source can read ("": none)
};

/// The rules on a reading: --max-used-mib and --ignore-process.
struct GpuRules {
  long long max_used_mib = 1024;
  std::vector<std::string> ignore;  ///< process names (comm) that never make a GPU busy
};

/// The processes on each GPU that belong to no gpuq job: none of their lineage is the pid
/// of a running entry of the state (or of a killed one in its grace time), and their name is
/// not in `rules.ignore`. Empty without a process list.
std::map<int, std::vector<GpuProcess>> foreign_processes(const GpuReading& r, const State& state,
                                                         const GpuRules& rules);

/// Several jobs on one GPU (a job's gpu_mem_gib): what the reading says of the memory of the GPUs
/// packed jobs may share.
struct MemoryUse {
  /// Per GPU id: GiB in use beyond what the running packed jobs of the plan declared there (the
  /// engine's Tick::mem_other): processes of no job, a packed job's use over its declared GiB, a
  /// stopped packed job's GiB not yet let go; +inf on a GPU lost, or held by an entry that takes
  /// its GPUs whole (a job of no plan, a killed whole job still dying).
  std::vector<double> other = std::vector<double>(kMaxGpuId + 1, 0.0);
  /// A running packed job that uses more than it declared on a GPU.
  struct Over {
    std::string id;
    int gpu;
    double used_gib, declared_gib;
  };
  std::vector<Over> over;
  /// Per running job id: the most GiB its processes use on one of its GPUs now (NVML's process
  /// list; none without one): `run` keeps each attempt's peak.
  std::map<std::string, double> used_gib;
};

/// Each GPU's memory in GiB as the reading gives it (NVML), by GPU id (Policy::gpu_mem_total);
/// empty when it gives none.
std::vector<double> gpu_totals_gib(const GpuReading& r);

/// The memory use of a reading. `declared(id)` is the GiB the job of that id packs with (its
/// gpu_mem_gib), 0 for a job that takes its GPUs whole or is no job of the plan. With a process
/// list (NVML) each job's use is its processes'; without one (nvidia-smi), a GPU's reading beyond
/// its packed jobs' declared GiB counts as other use.
MemoryUse memory_use(const GpuReading& r, const State& state, const GpuRules& rules,
                     const std::function<double(const std::string&)>& declared);

struct Policy;

/// The GiB job `j` packs with on each of its GPUs at the attempt its entry `s` records (null: no
/// entry yet): its gpu_mem_gib where it packs (Policy::packed_gib), as an on_oom retry resized it
/// (host_mem.h's oom_values); 0 for a job that takes its GPUs whole. What run's tick and every
/// look take a packed job's declared memory to be (memory_use's `declared`).
double packed_gib_now(const Policy& p, const Job& j, const JobState* s);

/// The GPUs at one instant, as `run`'s tick decides on them and every look at the node predicts
/// from (live/look.h: status, gpus, simulate --from-state, add --dry-run): the one read of a
/// reading against a state. Free are the node's GPUs that no running job, no killed one still
/// dying and nothing the reading holds (memory, a process of no job, a lost GPU) keeps (drained
/// GPUs, read from the node directory, are taken off after: gpu_health.h); with them, why each GPU someone else holds is busy and, where jobs pack (`declared`
/// given, as memory_use takes it), the memory use.
struct ReadingSeen {
  GpuMask free = 0;                   ///< the node's GPUs less busy_in_state and `busy`
  /// The GPUs the reading makes busy: memory over max_used_mib, a foreign process, lost (0
  /// without a memory reading).
  GpuMask busy = 0;
  /// Why each GPU that no entry of the state holds is busy by the reading, GPU -> text: "GPU 5
  /// busy: process 4242 `python train.py` (20000 MiB) is no gpuq job's", "GPU 1 busy: 20000 MiB
  /// in use by another process", "GPU 3 busy: lost (GPU is lost)" (none without a memory reading).
  std::map<int, std::string> others;
  std::map<int, std::vector<GpuProcess>> foreign;  ///< foreign_processes (found once for all three)
  std::optional<MemoryUse> memory;    ///< memory_use, when `declared` was given
};
/// What the GPUs `node` are to `state` with reading `r` (an empty reading: only the state holds
/// GPUs).
ReadingSeen see_reading(const GpuReading& r, const State& state, const GpuRules& rules, GpuMask node,
                        const std::function<double(const std::string&)>* declared = nullptr);

struct Plan;

/// Each job's packed size now (packed_gib_now), by id, as memory_use's `declared` takes it: 0 for
/// an id the plan does not have. The function keeps `plan`, `p` and `state` by reference.
std::function<double(const std::string&)> packed_sizes(const Plan& plan, const Policy& p, const State& state);

/// The one read of the GPUs, for run's tick and every look (live/look.h): each GPU's memory taken
/// into `p` where the reading gives it (gpu_mem_total: the room jobs pack into), then see_reading
/// over the node's GPUs `node`, with the memory use worked out where `memory` (the plan packs; the
/// tick also where the reading lists processes: each job's peak), each packed job at its
/// attempt's size (packed_sizes).
ReadingSeen read_gpus(const GpuReading& r, const State& state, const Plan& plan, Policy& p, const GpuRules& rules,
                      GpuMask node, bool memory);

/// GPUs that a job stopped by gpuq (killed, timed out, requeued) still holds while its process
/// group ends (--kill-grace): run frees them as soon as the group is gone.
GpuMask ending_gpus(const State& state);

/// The ending_gpus, as ReadingSeen::others words a GPU: "GPU 1 busy: a is ending (...)". Added to
/// `others` where it names no other holder of the GPU.
void name_ending_holders(const State& state, std::map<int, std::string>& others);

/// Energy per job (issue 53): each GPU's counter rise from `before` to `after` (mJ, two readings'
/// energy_mj) shared among the entries of `state` running on it, as joules added to their
/// energy_j. A job that holds the GPU whole takes its rise; jobs that share it (packed) take it
/// in proportion to the GiB each declared (`declared`: 0 for a whole-GPU job). A GPU missing
/// from either reading, or whose counter fell (the driver reloaded), gives nothing. A running
/// entry on a GPU read in both gets an energy_j (0 where nothing rose): known, not absent.
void share_energy(const std::map<int, unsigned long long>& before, const std::map<int, unsigned long long>& after,
                  State& state, const std::function<double(const std::string&)>& declared);

/// A process of no gpuq job holding GPU memory on a GPU that sits idle (issue 53: a notebook left
/// open, a debugger stopped): reported, never killed.
struct IdleHolder {
  int gpu = 0;
  long long pid = 0;
  std::string user, name, command;
  long long used_mib = -1;  ///< its memory on that GPU (-1: not given)
  double since = 0;         ///< the first of an unbroken run of readings with it there and the GPU idle
  bool operator==(const IdleHolder&) const = default;
};

/// The idle holders after a reading at `now`: each foreign process (foreign_processes) with memory
/// on a GPU whose utilization is at or below `idle_pct` is kept, with its `since` from `seen` where
/// it was there already (same GPU and pid), else now; every other is dropped (the GPU at work, the
/// process gone, or no utilization read).
std::vector<IdleHolder> note_idle_holders(const std::vector<IdleHolder>& seen,
                                          const std::map<int, std::vector<GpuProcess>>& foreign,
                                          const std::map<int, int>& util_pct, double idle_pct, double now);

/// Several runs' idle holders as one list: a process seen by more than one run once, with the
/// earliest `since`; by GPU, then pid.
std::vector<IdleHolder> merge_idle_holders(const std::vector<std::vector<IdleHolder>>& lists);

/// The probe a reading came from, said once: "nvidia-smi (NVML is not available here: ...)"
/// where its note already begins with the source, else "SOURCE (NOTE)", "SOURCE", or "none".
std::string probe_source_text(const GpuReading& r);


}  // namespace gpuq
