// Starting a job: posix_spawn in a new session, output appended to its log,
// the exit code left in logs/ID.exit by write-then-rename.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "gpuq/store.h"

namespace gpuq {

/// A job spawned but held at its start line until release(): if gpuq dies
/// before the state that records it is saved, the job never runs (it leaves
/// logs/ID.aborted instead), so no job runs twice.
struct Launch {
  long long pid = 0;                      ///< the wrapper's pid, also the job's process group
  std::optional<unsigned long long> pid_start;
  int go_fd = -1;                         ///< write end of the start-line pipe
};

/// What to start.
struct LaunchSpec {
  std::string id;
  std::string script;        ///< as written in the plan; ~ and $VARS are expanded here
  std::vector<int> gpus;
  long long attempt = 1;     ///< GPUQ_ATTEMPT: 1 for the first run
};

/// The argument that makes the gpuq binary act as a job's wrapper.
inline constexpr const char* kJobWrapperArg = "__job";

/// The wrapper, run as `gpuq __job SCRIPT EXITFILE ABORTEDFILE` with the start
/// line on fd 3: waits for "go" (else leaves ABORTEDFILE and exits), runs
/// `bash SCRIPT`, and renames its exit code into EXITFILE. Returns the status.
int job_wrapper(int argc, char** argv);

/// Spawns the wrapper (gpuq itself) for SCRIPT in a new session with stdin from
/// /dev/null and stdout+stderr appended to logs/ID.log. The environment gets
/// CUDA_VISIBLE_DEVICES, TDPRM_GPU0, CUDA_DEVICE_ORDER=PCI_BUS_ID (unless set),
/// GPUQ_JOB_ID and GPUQ_ATTEMPT. Removes a stale exit file first. Throws
/// std::runtime_error naming the call and path on failure.
Launch launch(const PlanPaths& paths, const LaunchSpec& spec);

/// Lets a launched job run (after its state was saved). Closes go_fd.
void release(Launch& l);

/// Abandons a launched job before it runs (its state could not be saved). Closes go_fd.
void abandon(Launch& l);

}  // namespace gpuq
