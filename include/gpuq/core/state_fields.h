// The fields of a state entry (PLAN.state.json), declared once: one row per field,
// with the member of JobState it fills, its kind and its line of doc. The state codec
// (live/state_codec.h) reads and writes an entry by walking this table, and the
// doc/files.md's table of the state's fields is checked against it
// (tests/state_fields_test.cpp).
//
// Adding a field to the state: a member of JobState (state.h), a row here, and the
// row's line in doc/files.md's table.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "gpuq/core/state.h"

namespace gpuq {

/// What a state field holds, which says how the codec checks, reads and writes it.
enum class StateKind {
  Status,       ///< the job's status ("pending", ...): every entry has it, written first
  GpuList,      ///< a list of GPU ids (0-63)
  Integer,      ///< a whole number (64-bit)
  Bytes,        ///< a whole number of bytes, not negative
  Unsigned,     ///< a whole number, not negative, up to 2^64-1
  UnixSeconds,  ///< a time: a number of unix seconds
  Text,         ///< a string
  Fraction,     ///< a number from 0 to 1
  Flag,         ///< true or false
};

/// The member of JobState a field fills; its type goes with the field's kind
/// (state_member_fits checks it at compile time).
using StateMember =
    std::variant<Status JobState::*, std::optional<std::vector<int>> JobState::*, std::optional<long long> JobState::*,
                 std::optional<unsigned long long> JobState::*, std::optional<double> JobState::*,
                 std::optional<std::string> JobState::*, std::optional<bool> JobState::*>;

/// One field of a state entry.
struct StateField {
  std::string_view name;  ///< as the file spells it
  StateKind kind;
  StateMember member;
  std::string_view doc;  ///< one line, doc/files.md's (Markdown)
};

/// Every field of an entry, in the order the codec writes them (the order gpuq has
/// always written them: the original's fields first, the newer ones after).
/// Unknown fields are kept after them (JobState::extra).
inline constexpr StateField kStateFields[] = {
    {"status", StateKind::Status, &JobState::status, "`pending`, `running`, `done`, `failed`, `blocked` or `held`"},
    {"gpus", StateKind::GpuList, &JobState::gpus, "the GPUs the job was started on"},
    {"pid", StateKind::Integer, &JobState::pid, "the job's process group"},
    {"start", StateKind::UnixSeconds, &JobState::start, "when the job started"},
    {"end", StateKind::UnixSeconds, &JobState::end,
     "when it ended: for an attempt that exited, when its script ended (the time its exit file was written), not "
     "when `run` noticed it (a run stopped, killed or slow to look records the true end); else when `run` saw it end"},
    {"exit", StateKind::Integer, &JobState::exit,
     "its exit code; -1 when the process vanished without one, -15 when killed"},
    {"attempts", StateKind::Integer, &JobState::attempts, "automatic retries so far"},
    {"pid_start", StateKind::Unsigned, &JobState::pid_start,
     "gpuq's own: the process's start time from `/proc`, so that a recycled pid is never taken for the job"},
    {"kill_sent", StateKind::UnixSeconds, &JobState::kill_sent,
     "gpuq's own: when `kill` sent SIGTERM (`run` sends SIGKILL after `--kill-grace`)"},
    {"warn_sent", StateKind::UnixSeconds, &JobState::warn_sent,
     "gpuq's own: when `run` sent the job's `warn_signal` (sent once)"},
    {"requeue", StateKind::UnixSeconds, &JobState::requeue,
     "gpuq's own: when `requeue` stopped the job (pending again once its process group is gone)"},
    {"preempt", StateKind::UnixSeconds, &JobState::preempt,
     "gpuq's own: when a preemption sent the job its `preempt_signal` (SIGKILL of its group after `preempt_grace`)"},
    {"preempt_for", StateKind::Text, &JobState::preempt_for,
     "gpuq's own: the job a preemption stopped it for (`\"\"`: `gpuq preempt` by hand)"},
    {"preemptions", StateKind::Integer, &JobState::preemptions,
     "gpuq's own: how many times the job was preempted so far (`GPUQ_PREEMPTIONS`), across its attempts"},
    {"cores", StateKind::Text, &JobState::cores,
     "gpuq's own: the cores `run` pinned the job to (`\"0-3,8\"`, as `Cpus_allowed_list` writes them), where its plan "
     "counts `cpus`"},
    {"cgroup", StateKind::Text, &JobState::cgroup,
     "gpuq's own: the cgroup `run` put the attempt in (jobs with `mem_gib`, where the node lets gpuq make one); "
     "removed, and the field with it, once the job has ended"},
    {"removed", StateKind::UnixSeconds, &JobState::removed,
     "gpuq's own: when a reload of the plan dropped the job (never started again)"},
    {"outcome", StateKind::Text, &JobState::outcome,
     "gpuq's own: `timeout` (stopped at its time limit), `hung` (stopped by the hang watchdog), `idle` (stopped by "
     "the idle watch, `on_idle` \"kill\"), `unstartable`, "
     "`over memory` (stopped above its `mem_gib`), `oom (GPU)` (a GPU out-of-memory in its log) or `oom (host)` "
     "(the kernel's OOM killer)"},
    {"reason", StateKind::Text, &JobState::reason, "gpuq's own: why the job could not be started (`unstartable`)"},
    {"log_size", StateKind::Bytes, &JobState::log_size,
     "gpuq's own, for the hang watchdog: bytes of the job's log at `run`'s last look"},
    {"log_grew", StateKind::UnixSeconds, &JobState::log_grew,
     "gpuq's own, for the hang watchdog: when `run` last saw the log grow"},
    {"gpus_busy", StateKind::UnixSeconds, &JobState::gpus_busy,
     "gpuq's own, for the hang watchdog: when a reading last showed one of the job's GPUs busy"},
    {"gpus_read", StateKind::UnixSeconds, &JobState::gpus_read,
     "gpuq's own, for the hang watchdog: when `run` last read the utilization of all the job's GPUs"},
    {"hung_noted", StateKind::UnixSeconds, &JobState::hung_noted,
     "gpuq's own, for the hang watchdog: when `run` said the job looks hung (said once, until the log grows)"},
    {"idle_since", StateKind::UnixSeconds, &JobState::idle_since,
     "gpuq's own, for the idle watch: since when every reading has shown all of the job's GPUs at or below "
     "`idle_util_percent`"},
    {"unused_since", StateKind::UnixSeconds, &JobState::unused_since,
     "gpuq's own, for the idle watch: since when every process list (NVML) has shown none of the job's processes "
     "on its GPUs"},
    {"energy_j", StateKind::Bytes, &JobState::energy_j,
     "gpuq's own: the GPU energy the attempt used so far, joules, from NVML's energy counter read each tick (a "
     "GPU shared by packed jobs is split by their `gpu_mem_gib`); absent where no counter could be read"},
    {"slurm_id", StateKind::Integer, &JobState::queue_id,
     "gpuq's own: the Slurm job id of a job `run --slurm` submitted (its `pid` holds the same number)"},
    {"gpu_mem_peak_mib", StateKind::Bytes, &JobState::gpu_mem_peak_mib,
     "gpuq's own: the most GPU memory (MiB) the attempt's processes used on one of its GPUs, as NVML's "
     "process list showed `run`"},
    {"mem_peak_mib", StateKind::Bytes, &JobState::mem_peak_mib,
     "gpuq's own: the most resident host memory (MiB) the attempt's process tree used, as `run` sampled it "
     "(jobs with `mem_gib` only)"},
    {"cpu_seconds", StateKind::Bytes, &JobState::cpu_seconds,
     "gpuq's own: the CPU time (user + system, seconds) the attempt's processes used, those its script waited "
     "for, as its wrapper read it when it ended"},
    {"mem_cgroup_peak_mib", StateKind::Bytes, &JobState::mem_cgroup_peak_mib,
     "gpuq's own: the most memory (MiB) the attempt's cgroup used, page cache included, read when it ended"},
    {"oom_retries", StateKind::Integer, &JobState::oom_retries,
     "gpuq's own: the `on_oom` retries used before this attempt (each at once after an out-of-memory, not counted "
     "in `attempts`)"},
    {"oom_values", StateKind::Text, &JobState::oom_values,
     "gpuq's own: what this attempt runs with after its `on_oom` retries (`mem_gib 0.375, BATCH_SIZE=32`)"},
    {"attempt", StateKind::Integer, &JobState::attempt,
     "gpuq's own: the number of this attempt (`GPUQ_ATTEMPT`), where it is not `attempts` + 1: numbers go on "
     "after a `requeue` or a `retry` by hand"},
    {"progress_first", StateKind::Fraction, &JobState::progress_first,
     "gpuq's own: the first progress `run` read of the running attempt (its `GPUQ_PROGRESS` file or its log's "
     "progress bar), or where its bar started over"},
    {"progress_first_at", StateKind::UnixSeconds, &JobState::progress_first_at,
     "gpuq's own: when the job wrote `progress_first`"},
    {"progress", StateKind::Fraction, &JobState::progress,
     "gpuq's own: the latest progress `run` read of the running attempt"},
    {"progress_at", StateKind::UnixSeconds, &JobState::progress_at,
     "gpuq's own: when the job wrote `progress` (its remaining time is the rate from `progress_first` to it)"},
    {"snapshot", StateKind::Text, &JobState::snapshot,
     "gpuq's own: the commit of the git snapshot the job runs (the `snapshot` setting), kept across its attempts"},
    {"snapshot_at", StateKind::UnixSeconds, &JobState::snapshot_at, "gpuq's own: when that snapshot was taken"},
    {"snapshot_dirty", StateKind::Flag, &JobState::snapshot_dirty,
     "gpuq's own: the snapshot holds changes that were not committed"},
    {"snapshot_repo", StateKind::Text, &JobState::snapshot_repo,
     "gpuq's own: the git repository the snapshot is a commit of"},
};

/// doc/files.md's words for a kind (its table's "type" column).
constexpr std::string_view state_kind_text(StateKind kind) {
  switch (kind) {
    case StateKind::Status: return "string";
    case StateKind::GpuList: return "list of GPU ids";
    case StateKind::Integer: return "whole number";
    case StateKind::Bytes: return "whole number ≥ 0";
    case StateKind::Unsigned: return "whole number ≥ 0";
    case StateKind::UnixSeconds: return "unix seconds";
    case StateKind::Text: return "string";
    case StateKind::Fraction: return "number 0-1";
    case StateKind::Flag: return "true or false";
  }
  return "";
}

/// True when the field's member has the type its kind reads and writes.
constexpr bool state_member_fits(const StateField& f) {
  switch (f.kind) {
    case StateKind::Status: return std::holds_alternative<Status JobState::*>(f.member);
    case StateKind::GpuList: return std::holds_alternative<std::optional<std::vector<int>> JobState::*>(f.member);
    case StateKind::Integer:
    case StateKind::Bytes: return std::holds_alternative<std::optional<long long> JobState::*>(f.member);
    case StateKind::Unsigned: return std::holds_alternative<std::optional<unsigned long long> JobState::*>(f.member);
    case StateKind::UnixSeconds:
    case StateKind::Fraction: return std::holds_alternative<std::optional<double> JobState::*>(f.member);
    case StateKind::Text: return std::holds_alternative<std::optional<std::string> JobState::*>(f.member);
    case StateKind::Flag: return std::holds_alternative<std::optional<bool> JobState::*>(f.member);
  }
  return false;
}

namespace state_fields_check {
constexpr bool all_fit() {
  for (const StateField& f : kStateFields)
    if (!state_member_fits(f)) return false;
  return kStateFields[0].kind == StateKind::Status;  // the status is written first
}
static_assert(all_fit(), "a row of kStateFields names a member of another type than its kind");
}  // namespace state_fields_check

/// The field's member, a pointer to a T: the type its kind reads (the caller has
/// switched on f.kind; the static_assert above holds each row to it).
template <typename T>
T JobState::* state_member(const StateField& f) {
  return *std::get_if<T JobState::*>(&f.member);
}

/// The row named `name`, or null.
constexpr const StateField* find_state_field(std::string_view name) {
  for (const StateField& f : kStateFields)
    if (f.name == name) return &f;
  return nullptr;
}

}  // namespace gpuq
