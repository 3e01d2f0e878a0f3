// The live queue's options: the rules' (rules.h's Policy) and `run`'s own. `run`'s loop is in
// run_loop.h, the control commands and refresh in control.h. It includes only what the options
// are made of: every header of a command includes it (through setup.h), and what it included
// once (control.h, and the ports and processes behind it) came with it into each.
#pragma once

#if defined(GPUQ_CORE) || defined(GPUQ_VIEWS)
#error "a live header (the OS behind ports) in the core or the views: pass data in instead"
#endif

#include <cstdio>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "gpuq/core/rules.h"

namespace gpuq {

/// What a batch queue says of the plan's jobs in it: a text for `status` (after the outlook),
/// and the queue's reason for each job it has not started. Empty on this machine.
struct QueueView {
  std::string text;
  std::map<std::string, std::string> reasons;  ///< job id -> the queue's pending reason
};

/// `run`'s flags, with the original's defaults (the rules' among them).
struct RunOptions : Policy {
  long long max_used_mib = 1024;
  std::vector<std::string> ignore_process;  ///< --ignore-process: names whose GPU processes never make a GPU busy
  std::string gpu_probe = "auto";           ///< --gpu-probe: auto, nvml, nvidia-smi, none
  double kill_grace = 30;
  std::vector<int> node_cores;  ///< the cores jobs are pinned to, where the plan counts cpus (the machine's less reserve_cpus)
  /// Where node_cpus asked for more cores than jobs may be pinned to (it is lowered to them): what
  /// settings, validate, simulate and run say of it. "": none.
  std::string host_note;
  /// node_cpus as the settings give it, not lowered (0: the machine's): what `simulate` and
  /// `validate` plan a node with, where they may be run on another machine than the node.
  double node_cpus_asked = 0;
  double preempt_grace = 120;  ///< --preempt-grace: seconds from a preemption's signal to SIGKILL of the group
  bool mem_cgroup = true;           ///< --mem-cgroup auto: a job with mem_gib gets a cgroup where the node allows
  double mem_margin_percent = 10;  ///< --mem-margin-percent: a job over its mem_gib by more is stopped (host_mem.h)
  std::string nvidia_smi = "nvidia-smi";
  double nvidia_smi_timeout = 30;
  std::string workdir;  ///< where jobs run, and relative scripts and file: deps are taken from ("": the current folder)
  std::vector<std::string> on_event;  ///< --on-event: hooks (hooks.h)
  double hook_timeout = 60;           ///< --hook-timeout, seconds
  double events_max_mb = 64;          ///< --events-max-mb: rotate the event log past this size (0: never)
  std::string progress_from_log = "true";  ///< --progress-from-log: look for progress bars in jobs' logs
  double eta_slip_percent = 10;       ///< --eta-slip-percent: an eta event past this share of the time left ...
  double eta_slip_minutes = 10;       ///< --eta-slip-minutes: ... and this many minutes
  std::string snapshot = "off";       ///< --snapshot: "git" runs jobs from a snapshot of the workdir (snapshots.h)
  std::vector<std::string> snapshot_changed;  ///< jobs changed since the last run loaded the plan: a new snapshot each
  std::string node_dir;  ///< --node-dir as given ("": $GPUQ_NODE_DIR, else /var/lib/gpuq when usable; "off": alone)
};

}  // namespace gpuq
