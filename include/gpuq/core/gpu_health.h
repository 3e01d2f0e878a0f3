// GPU health (issue 53, part 2): the faults a probe reads of each GPU (Xid events, uncorrectable
// ECC errors, a pending page retirement or row remap, a GPU lost), which of them drain the GPU,
// and the node's drain records: a drained GPU gets no new job in any user's run until someone
// undrains it. Pure: the probes fill GpuReading (gpu_use.h), the node files carry the records
// (node.h), and `run`, `drain`, `status` and `simulate` ask here.
#pragma once

#include <map>
#include <optional>
#include <set>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "gpuq/core/gpu_use.h"
#include "gpuq/core/gpus.h"

namespace gpuq {

/// One row of the Xid table: the code, whether it is the GPU's fault (drains it) or the
/// application's (drains nothing), and what NVIDIA says it means.
struct XidRow {
  unsigned code;
  bool drains;
  std::string_view meaning;
};

/// The Xid table, the one place it is kept. Source: NVIDIA, "XID Errors" (docs.nvidia.com/deploy/
/// xid-errors, r555, the "Xid catalog" and its "Immediate action" column): 13, 31, 43 and 45 are
/// the application's (a bad kernel, a bad address, a stopped or cleaned-up context); 48, 63, 64,
/// 74, 79, 92, 94, 95, 119 and 120 need the GPU reset, drained or replaced. An Xid not in it
/// drains nothing and is said (xid_drain adds it).
std::span<const XidRow> xid_table();

/// The row of `code`, or nullptr.
const XidRow* find_xid(unsigned code);

/// The settings xid_drain and xid_ignore, read: the codes each adds to the table's drains and
/// takes from them (ignore wins).
struct XidRules {
  std::set<unsigned> drain, ignore;
  bool drains(unsigned code) const;
};

/// A list of Xid codes as a setting gives them ("79, 48" or "79,48"; "" is none), or nullopt with
/// `problem` ("\"7x\" is not an Xid code").
std::optional<std::set<unsigned>> parse_xid_list(std::string_view text, std::string* problem);

/// The rules from the settings' two lists (each already checked by parse_xid_list).
XidRules xid_rules(std::string_view drain, std::string_view ignore);

/// A fault the probe read on one GPU, and whether it drains the GPU.
struct GpuFault {
  int gpu = 0;
  bool drains = false;
  std::string what;             ///< "Xid 79 (GPU has fallen off the bus)", "2 uncorrectable ECC errors", ...
};

/// What a run remembers of faults between readings, so that only a new one counts: an ECC count
/// drains when it rises, a pending retirement or a lost GPU when it appears, an Xid each time.
struct FaultWatch {
  std::map<int, unsigned long long> ecc;   ///< the count last seen (or accepted)
  std::map<int, std::string> pending;      ///< pending retirements/remaps seen (or accepted)
  std::set<int> lost;                      ///< lost GPUs seen (or accepted)
  GpuMask listed = 0;                      ///< GPUs a reading listed (a GPU that leaves the list is lost)
  std::optional<double> last_taken;        ///< the reading last looked at (a reading given twice: its Xids once)
};

/// The faults in reading `r` of the GPUs of `node`, new since `w` (which is updated). On the GPUs
/// of `accept` the conditions now (an ECC count, a pending retirement, a lost GPU) are taken as
/// they are, not as faults: a run's first reading of a GPU someone undrained, and any reading just
/// after an undrain. Xid events are always new.
std::vector<GpuFault> find_faults(const GpuReading& r, FaultWatch& w, const XidRules& rules, GpuMask node,
                                  GpuMask accept);

/// A drain record: GPU `gpu` drained (or undrained) at `at` by `by` (a user), `why`. A record by a
/// fault (`fault`) is what a run read (`why` says it: "Xid 79 (GPU has fallen off the bus)"); by
/// hand, `gpuq drain --why`. Each user keeps their newest record per GPU in their node file; the
/// newest record of any user is the GPU's.
struct GpuDrain {
  int gpu = 0;
  bool drained = true;
  double at = 0;
  std::string why;
  std::string by;
  bool fault = false;
  bool operator==(const GpuDrain&) const = default;
};

/// The GPUs drained now, from every user's records (each GPU's newest record, by time, then by
/// user order as given): GPU -> its drain record. `undrains`, when given: the GPUs whose newest
/// record is an undrain, with it.
std::map<int, GpuDrain> drained_gpus(const std::vector<std::vector<GpuDrain>>& records,
                                     std::map<int, GpuDrain>* undrains = nullptr);

/// The mask of `drained`.
GpuMask drained_mask(const std::map<int, GpuDrain>& drained);

/// Sets `gpu`'s record in one user's list (their newest replaces the one before).
void set_drain_record(std::vector<GpuDrain>& mine, GpuDrain record);

/// "GPU 3 drained: Xid 79 (GPU has fallen off the bus), seen by ana's run at 14:02" and
/// "GPU 3 drained by ana at 14:02: fan noise" (`when`: the time as the caller words it).
std::string drain_text(const GpuDrain& d, std::string_view when);

/// The line a prediction says when GPUs are drained: "GPUs 3, 5 are drained (gpuq gpus says why;
/// gpuq undrain gives them back): predicted on the 6 GPUs left"; "" when none of `node` is.
std::string drained_prediction_note(GpuMask drained, GpuMask node);

/// How long before a fault was read a failure on its GPU still counts as caused by it (the
/// probe is read at most a tick before, and a job often fails just before its Xid is read).
inline constexpr double kFaultWindowSeconds = 120;

/// Whether an attempt on `gpus` that ended (failed) at `end` ended by the fault drain `d`: it ran
/// on the drained GPU, and `d` came by a fault read while it ran, or at most kFaultWindowSeconds
/// (or `poll` x 2) after it ended.
bool ended_by_fault(const GpuDrain& d, const std::vector<int>& gpus, std::optional<double> start, double end,
                    double poll);

/// What `gpus` shows (views/gpus_text.h): the probe's reading of `gpus`, the placement (its
/// topology and the line saying which pairs are used), and the processes of no gpuq job on each GPU.
struct GpusSeen {
  GpuReading reading;
  Placement placement;
  std::vector<int> gpus;
  std::map<int, std::vector<GpuProcess>> foreign;
  std::string placement_line;
  std::vector<IdleHolder> idle;  ///< processes of no gpuq job the node's runs saw idle on GPUs (merged)
  double idle_after = 1800;      ///< seconds an idle holder must have been idle to be named (idle_minutes)
  double idle_pct = 5;           ///< idle_util_percent, for the words
  std::string idle_note;         ///< where the idle holders come from, or why none can be known
  double now = 0;                ///< when it was read
  std::map<int, GpuDrain> drained;  ///< the node's drained GPUs (gpu_health.h), as its directory says
  std::string drain_note;           ///< why no drain can be known ("": the node directory was read)
};

}  // namespace gpuq
