// The plan: jobs and reservations, read from PLAN.json and checked whole.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "gpuq/core/gpus.h"
#include "gpuq/core/id_index.h"
#include "gpuq/core/settings.h"

namespace gpuq {

/// One entry of a job's `deps`.
struct Dep {
  enum class Kind {
    Done,   ///< "ID": the job must be done.
    After,  ///< "after:ID": the job must be finished, whatever its outcome.
    File,   ///< "file:PATH": the path must exist (~ and $VARS expanded at run time).
  };
  Kind kind;
  std::string target;  ///< the job id, or the unexpanded path
  size_t job = 0;      ///< index of the job named (Done, After)
};

/// The seconds before the limit at which `run` sends the warning signal, and which.
/// Parsed from "USR1@90", "SIGUSR1@90" or "10@90"; "B:USR1@90" (Slurm's --signal form) sends it
/// to the job's shell (the script's bash) only, the plain form to every process of the job.
struct WarnSpec {
  std::string name;  ///< canonical, without SIG ("USR1"); empty when given by number
  int number = 0;    ///< the signal's number when given by number (1-64)
  double seconds = 0;
  bool shell_only = false;  ///< "B:": to the script's bash only, not its children

  /// "USR1@90" (or "10@90"), as messages show it.
  std::string text() const;
};

/// A signal as a plan names it ("USR1", "SIGTERM", "10"; "B:USR1": to the script's bash only),
/// in three bytes (every job carries one): `preempt_signal`.
struct SignalSpec {
  uint8_t name = 0;         ///< 1 + its place among the signal names (limits.cpp); 0: given by number, or none
  uint8_t number = 0;       ///< the signal's number when given by number (1-64)
  bool shell_only = false;  ///< "B:": to the script's bash only
  bool given() const { return name || number; }
  /// As the launcher sends a warning (no seconds): name or number, and shell_only.
  WarnSpec warn() const;
  /// "USR1", "B:USR1", "10".
  std::string text() const;
};

/// A job's "on_oom": after an attempt that ran out of memory (outcomes "over memory", "oom (GPU)",
/// "oom (host)"), up to `retries` attempts more, at once and not counted against max_retries, each
/// with mem_gib times `mem_factor`, gpu_mem_gib times `gpu_mem_factor` and `env` changed: "half" or "double" scales the variable's
/// number (the job's env's, then the previous attempt's), any other text sets it.
struct OnOom {
  long long retries = 1;
  double mem_factor = 1;
  double gpu_mem_factor = 1;  ///< gpu_mem_gib times this (a job that packs)
  std::vector<std::pair<std::string, std::string>> env;
  bool operator==(const OnOom&) const = default;
};

/// A field few jobs give, held apart: 8 bytes in every Job where its value would take more (the
/// prediction walks 100k jobs: a std::optional<OnOom> made each 56 bytes larger, simulate's
/// 100k-job plan 5.6 MB). Copied and compared by value, read as a std::optional is.
template <class T>
class Rare {
 public:
  Rare() = default;
  Rare(const Rare& o) : p_(o.p_ ? std::make_unique<T>(*o.p_) : nullptr) {}
  Rare(Rare&&) noexcept = default;
  Rare& operator=(const Rare& o) {
    if (this != &o) p_ = o.p_ ? std::make_unique<T>(*o.p_) : nullptr;
    return *this;
  }
  Rare& operator=(Rare&&) noexcept = default;
  Rare& operator=(T v) {
    p_ = std::make_unique<T>(std::move(v));
    return *this;
  }
  explicit operator bool() const { return p_ != nullptr; }
  bool has_value() const { return p_ != nullptr; }
  const T& operator*() const { return *p_; }
  const T* operator->() const { return p_.get(); }
  bool operator==(const Rare& o) const { return p_ && o.p_ ? *p_ == *o.p_ : !p_ && !o.p_; }

 private:
  std::unique_ptr<T> p_;
};

/// What `run` does with a job whose GPUs sit idle (watchdog.h): the job's "on_idle", else the
/// `on_idle` setting's.
enum class IdleAction : uint8_t {
  Setting,  ///< the job gives none: the setting says
  Warn,     ///< say so, once
  Requeue,  ///< stop it as a preemption does: it runs again later
  Kill,     ///< stop it as failed, outcome "idle"
};

/// A job of the plan, with the original's defaults filled in. How the plan names and
/// gives each field: job_fields.h (a new field needs a row there).
struct Job {
  // (Fields ordered so that little is padding: `status` and the prediction walk 100k jobs.)
  std::string id;
  std::string script;
  int gpus = 1;
  bool est_given = false;  ///< `est_hours` was in the plan (status prints 0.0 otherwise)
  bool retry_on_timeout = false;  ///< a timed-out job is retried automatically (limits.h)
  bool kill_on_quiet = false;     ///< "on_quiet": "kill": a hung job is stopped as at its limit (watchdog.h)
  bool idle_ok = false;           ///< "idle_ok": its GPUs may sit idle: the idle watch never flags it (watchdog.h)
  IdleAction on_idle = IdleAction::Setting;  ///< "on_idle": what run does when it is idle (watchdog.h)
  /// "preemptible": gpuq may stop it to give its GPUs to more urgent work, and runs it again
  /// (preempt.h); none: as the `preemptible` setting says.
  std::optional<bool> preemptible;
  SignalSpec preempt_signal;      ///< "preempt_signal": sent when it is preempted (none: SIGTERM to its group)
  /// "snapshot": true for "git" (it runs from a git snapshot of the workdir, snapshot.h), false for
  /// "off" (from the workdir); none: as the `snapshot` setting says.
  std::optional<bool> snapshot;
  double priority = 50;
  double est_hours = 1.0;
  std::vector<Dep> deps;
  std::optional<size_t> produced_by;  ///< job whose run produces this job's file: deps
  double produced_at_frac = 1.0;
  std::optional<double> first_look_frac;
  // gpuq's own fields (limits.h):
  std::optional<double> time_limit_hours;  ///< wall-clock limit, from the recorded start
  std::optional<WarnSpec> warn_signal;     ///< signal to the group this long before the limit
  std::optional<long long> max_retries;    ///< its own automatic retries (else the run's --max-retries)
  /// GiB it needs on each of its GPUs: it may share them with other jobs that give one (packing);
  /// none: it takes its GPUs whole.
  std::optional<double> gpu_mem_gib;
  // The hang watchdog (watchdog.h):
  std::optional<double> quiet_minutes;     ///< log silent (and GPUs idle) this long: hung?
  std::optional<bool> progress_from_log;   ///< run reads its log's progress bar (else the setting says)
  // The rest of the box (issue 45), in what would be padding: a plan where no job gives either
  // counts neither (Policy::counts_host).
  uint16_t cpus = 0;    ///< "cpus": cores it needs (0: not given; a share of the node's, Policy::cpus_of)
  float mem_gib = 0;    ///< "mem_gib": GiB of host memory it needs (0: not given, not counted)
  std::vector<std::string> args;           ///< passed to the script after its path (a sweep's {KEY} filled in)
  std::vector<std::pair<std::string, std::string>> env;  ///< set in the job's environment (a sweep's values too)
  /// "on_oom": an attempt that ran out of memory (host_mem.h) is run again at once, bounded and
  /// resized; none: such an attempt is a failure like any other.
  Rare<OnOom> on_oom;

  bool has_file_dep() const;
};

/// GPUs closed to every job a reservation does not list while any job it lists is unfinished.
struct Reservation {
  GpuMask gpus = 0;
  std::vector<int> gpu_list;   ///< as written in the plan
  std::vector<size_t> jobs;    ///< indices into Plan::jobs
  std::string queue_reservation;  ///< gpuq's own "slurm_reservation": the batch queue's reservation `run --slurm` submits its jobs to
};

/// A job with a "matrix": one job per point, at positions [first, first + count) of the plan.
struct Sweep {
  std::string id;  ///< the id written in the plan; a dep on it means every point
  size_t first = 0, count = 0;
};

/// A number no other Plan object made in this process has (copies keep it).
uint64_t new_plan_serial();

/// A loaded, checked plan. Jobs keep the plan's order (the scheduler's tie-break).
struct Plan {
  uint64_t serial = new_plan_serial();  ///< tells plans apart for State's job slots
  std::vector<Job> jobs;
  std::vector<Reservation> reservations;
  IdIndex index;  ///< id -> position (of the jobs with a good, first-seen id)
  /// For each job, the reservations that list it.
  std::vector<std::vector<size_t>> reservations_of;
  /// Ready order (priority, then position): by_rank[r] is the job of rank r, rank_of its inverse.
  std::vector<uint32_t> by_rank, rank_of;
  std::vector<Sweep> sweeps;           ///< the jobs written with a "matrix", expanded
  std::optional<std::string> workdir;  ///< gpuq's own plan-level "workdir", as written (none: the current folder)
  GivenSettings settings;  ///< gpuq's own "settings" (settings.h); a plan-level "workdir" counts as given there

  const Job* find(std::string_view id) const;
};

/// Outcome of loading a plan: the plan, or every problem found.
struct PlanLoad {
  std::optional<Plan> plan;
  std::vector<std::string> errors;    ///< each "FILE: where: problem"
  std::vector<std::string> warnings;  ///< same form; the plan is usable
  /// When the plan is not valid: its jobs as far as they could be read (ids, scripts and
  /// deps of the jobs whose fields were good), so that validate checks their files too.
  std::optional<Plan> partial;
  /// Fields gpuq does not read and that are no typo of one (plans may carry notes):
  /// "FILE: "NAME" in N job(s) (a, b, ...) is not a field gpuq reads; it is ignored".
  /// Every command that loads the plan says them on stderr; `validate` as its findings
  /// (an error with --strict).
  std::vector<std::string> unknown_fields;
};

/// The fields of a job, as the plan spells them: the names of job_fields() (job_fields.h),
/// in its order.
extern const std::vector<std::string_view> kJobFieldNames;

/// Fills plan.by_rank and plan.rank_of from the jobs (parse_plan does it).
void rank_jobs(Plan& plan);

/// Parses and checks plan text. `file` names it in messages; `node_gpus` are
/// the ids of `--gpus`. Rejects JSON syntax errors (line and column), wrong
/// types, missing, duplicate or unsafe ids, unknown deps, cycles, negative
/// numbers, reservations naming unknown jobs or GPU ids that cannot exist,
/// `produced_by` naming an unknown job, and jobs wider than the node.
/// Reservation GPUs outside `node_gpus` are a warning (a plan written for the
/// whole node, simulated on part of it) and are ignored. Members of a job or of
/// the plan that gpuq does not read are ignored; a repeated member keeps its
/// last value. A job with a "matrix" is expanded into one job per point (Sweep);
/// a dep or reservation naming its id names every point. The JSON is read as Python's json and nlohmann/json read it (a
/// byte order mark is skipped; an integer past 64 bits is a fractional number).
PlanLoad parse_plan(std::string_view text, const std::string& file, const std::vector<int>& node_gpus);

/// Chooses the node's GPU ids once the plan's "settings" are read (a bad setting is not
/// among them), before its jobs and reservations are checked against them.
using ChooseGpus = std::function<std::vector<int>(const GivenSettings& plan_settings)>;

/// parse_plan, with the node's GPUs chosen by `choose`.
PlanLoad parse_plan_choosing_gpus(std::string_view text, const std::string& file, const ChooseGpus& choose);

/// The largest plan file load_plan reads (a million jobs take about 150 MB).
inline constexpr uintmax_t kMaxPlanBytes = uintmax_t{1} << 30;

/// Why `path` cannot be a plan file ("is a folder, not a plan file", a FIFO, a
/// device, missing, over kMaxPlanBytes), or "" when it is a regular file to read.
std::string plan_file_problem(const std::string& path);

/// Reads `path` and calls parse_plan; an unreadable file, a folder, a FIFO, a device
/// or a file over kMaxPlanBytes is one error naming the file.
PlanLoad load_plan(const std::string& path, const std::vector<int>& node_gpus);

/// load_plan, with the node's GPUs chosen by `choose`.
PlanLoad load_plan_choosing_gpus(const std::string& path, const ChooseGpus& choose);

/// Only the plan's "settings" (and its top-level "workdir"): for commands that need no
/// more of the plan. `errors` gets the problems with them, "FILE: where: problem"; nullopt
/// (with the reason in `errors`) when the file cannot be read as JSON.
std::optional<GivenSettings> load_plan_settings(const std::string& path, std::vector<std::string>& errors);

/// True when `id` can be a file name: letters, digits, '.', '_', '-', '=' (a sweep's
/// points), not starting with '.', at most 200 characters.
bool valid_job_id(std::string_view id);

}  // namespace gpuq
