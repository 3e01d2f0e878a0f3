// A control group per job with mem_gib (issue 45), where the kernel lets gpuq make one: its
// memory limit held by the kernel, its whole process tree killed through it, its peak and its OOM
// kills read from it. Sampling the resident memory (run_host.cpp) works on every node; this is the
// enforcement some nodes add. Both hierarchies: cgroup v2 (memory.max, memory.peak, memory.events,
// cgroup.kill) and the v1 memory controller (memory.limit_in_bytes, memory.max_usage_in_bytes,
// memory.oom_control, cgroup.procs).
#pragma once

#if defined(GPUQ_CORE) || defined(GPUQ_VIEWS)
#error "a live header (the OS behind ports) in the core or the views: pass data in instead"
#endif

#include <optional>
#include <string>

namespace gpuq {

/// What this node lets gpuq do with cgroups.
struct Cgroups {
  enum class Kind { None, V1, V2 } kind = Kind::None;
  std::string parent;  ///< the folder the jobs' groups are made in: ROOT/memory/gpuq (v1), ROOT/gpuq (v2)
  std::string why;     ///< None: why not, in a user's words; else what is used
};

/// Looks at ROOT (/sys/fs/cgroup): a cgroup2 mount with the memory controller (v2), else a v1
/// memory controller at ROOT/memory. With `make`, makes the parent folder (and, v2, enables the
/// memory controller for its children) and says None where that fails; without, only says whether
/// it could (a read-only look: `gpuq settings`).
Cgroups look_at_cgroups(bool make, const std::string& root = "/sys/fs/cgroup");

/// Makes the group NAME under `cg.parent` with a memory limit of `limit_bytes` and puts process
/// `pid` in it (its children follow). Returns the group's path; throws std::runtime_error naming
/// the file and the error (the group removed again) where a step fails.
std::string make_job_cgroup(const Cgroups& cg, const std::string& name, long long limit_bytes, long long pid);

/// How many processes of the group the kernel's OOM killer killed (memory.events' or
/// memory.oom_control's oom_kill); nullopt where it cannot be read.
std::optional<long long> cgroup_oom_kills(const std::string& group);

/// The most memory the group used (memory.peak, v2 since Linux 5.19; memory.max_usage_in_bytes,
/// v1), page cache included; nullopt where it cannot be read.
std::optional<long long> cgroup_peak_bytes(const std::string& group);

/// SIGKILL to every process of the group (cgroup.kill where the kernel has it, else each pid of
/// cgroup.procs): what left the job's process group goes too. False where the group is gone.
bool kill_cgroup(const std::string& group);

/// Kills what is left in the group and removes it: true once it is gone (or was, or cannot be
/// removed at all: EACCES, EROFS), false while processes still die in it (EBUSY: tried again later).
bool remove_cgroup(const std::string& group);

}  // namespace gpuq
