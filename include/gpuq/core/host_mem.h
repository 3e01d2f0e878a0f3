// Host memory of running jobs (issue 45): a job over its mem_gib (run samples the resident memory
// of its process tree and stops it as at a time limit), and an attempt that ran out of memory told
// apart from other failures (a CUDA out-of-memory in its log's last lines, the kernel's OOM killer).
// Pure: `run` reads /proc, the log and the kernel log (live/proc.h) and asks here.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "gpuq/core/life.h"
#include "gpuq/core/plan.h"

namespace gpuq {

/// The state's gpuq field "outcome" for a job `run` stopped above its mem_gib.
inline constexpr const char* kOverMemoryOutcome = "over memory";
/// ... for an attempt that failed with a GPU out-of-memory in its log's last lines.
inline constexpr const char* kOomGpuOutcome = "oom (GPU)";
/// ... for an attempt the kernel's OOM killer ended (SIGKILL not sent by gpuq, its kill in the kernel log).
inline constexpr const char* kOomHostOutcome = "oom (host)";

/// How much of a failed job's log is read for a GPU out-of-memory (its last bytes).
inline constexpr size_t kOomLogTail = 64 * 1024;

/// True when `resident_gib` is over an attempt's `mem_gib` (the job's, after on_oom retries
/// oom_values' mem_gib) plus `margin_percent` of it: run stops it. Never without a mem_gib.
bool over_memory(double mem_gib, double resident_gib, double margin_percent);
/// "2.31 GiB resident, its mem_gib is 2 (+10%)": why run stopped it.
std::string over_memory_text(double mem_gib, double resident_gib, double margin_percent);

/// True when `tail` (a log's last lines) says a GPU ran out of memory: PyTorch's "CUDA out of
/// memory" and OutOfMemoryError, cuBLAS's CUBLAS_STATUS_ALLOC_FAILED, XLA/TensorFlow's
/// RESOURCE_EXHAUSTED.
bool gpu_oom_in_log(std::string_view tail);

/// True when `kernel_log` (dmesg's or /dev/kmsg's lines) records the OOM killer killing one of
/// `pids` ("Out of memory: Killed process 123 (python3)", "oom-kill:...,pid=123,...").
bool oom_kill_in_kernel_log(std::string_view kernel_log, const std::vector<long long>& pids);

/// An attempt that ran out of memory: "over memory", "oom (GPU)" or "oom (host)".
bool is_oom(Outcome o);

/// What a job's attempt runs with after `n` on_oom retries (plan.h's OnOom): its mem_gib times
/// mem_factor^n, its gpu_mem_gib times gpu_mem_factor^n, and each on_oom env variable changed n times ("half", "double": of its number in
/// the job's env, a whole number kept whole and at least 1; a variable with no number there is
/// left as it is; any other text: set). n = 0: the job's own values, no variable changed.
struct OomValues {
  double mem_gib = 0;
  double gpu_mem_gib = 0;  ///< 0: the job gives none
  std::vector<std::pair<std::string, std::string>> env;  ///< the variables on_oom changed, to set
  /// "mem_gib 0.375, BATCH_SIZE=32" ("" for n = 0): how history and run name the attempt's values.
  std::string text;
};
OomValues oom_values(const Job& job, long long n);

}  // namespace gpuq
