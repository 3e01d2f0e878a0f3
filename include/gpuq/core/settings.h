// The settings: what a user may keep in the plan's top-level "settings" object instead of
// repeating flags on every command line. One table (settings_table) names each setting, its
// flag, kind, default, doc and member; it drives the plan's "settings" reader, the record a
// `gpuq run` leaves in PLAN.run.json, where each value came from, `gpuq settings` and the
// doc/settings.md's list (a test holds it to the table).
#pragma once

#include <nlohmann/json.hpp>

#include <array>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

namespace gpuq {

/// Every setting's value. A default-made one holds the table's defaults.
struct Settings {
  std::string gpus;
  double poll{};
  double gpu_mem_gib{};       ///< each GPU's memory (GiB) where the probe gives none
  double gpu_mem_headroom{};  ///< percent of a GPU's memory that packed jobs leave free
  double backfill_max_hours{};
  long long max_retries{};
  double retry_after{};
  long long max_used_mib{};
  std::vector<std::string> ignore_process;
  std::string gpu_probe;
  std::string nvidia_smi;  ///< "": $GPUQ_NVIDIA_SMI, else nvidia-smi
  std::string pairs;       ///< "": the command's default (auto; simulate: original)
  double time_limit_factor{};
  double quiet_minutes{};
  double kill_grace{};
  std::string workdir;    ///< "": the current folder; from a plan: relative to the plan's folder
  std::string state_dir;  ///< "": beside the plan; from a plan: relative to the plan's folder
  std::vector<std::string> on_event;
  double hook_timeout{};
  double events_max_mb{};
  std::string progress_from_log;  ///< "true" or "false": run reads progress bars in jobs' logs
  double eta_slip_percent{};        ///< an eta event when the predicted finish moves this much of the time left
  double eta_slip_minutes{};        ///< ... and at least this many minutes
  std::string snapshot;  ///< "off" or "git": jobs run from a git snapshot of the workdir (snapshot.h)
  std::string preemptible;    ///< "true" or "false": every job without its own "preemptible" may be preempted
  double preempt_grace{};       ///< seconds from a preemption's signal to SIGKILL of the job's group
  double preempt_min_minutes{}; ///< a job runs at least this long (since its last start) before it may be preempted
  double node_cpus{};           ///< cores jobs may use at once (0: the machine's less reserve_cpus)
  double node_mem_gib{};        ///< GiB of host memory jobs may use at once (0: the machine's less reserve_mem_gib)
  long long reserve_cpus{};     ///< cores kept for the system where node_cpus is the machine's
  double reserve_mem_gib{};     ///< GiB kept for the system where node_mem_gib is the machine's
  double mem_margin_percent{};  ///< run stops a job over its mem_gib by more than this percent (host_mem.h)
  std::string mem_cgroup;     ///< "auto" or "off": a job with mem_gib gets a cgroup where the node allows (cgroup.h)
  double idle_util_percent{};  ///< a GPU at or below this utilization (percent) is idle (watchdog.h)
  double idle_minutes{};       ///< a job whose GPUs are all idle this long is idle (0: never)
  std::string on_idle;         ///< "warn", "requeue" or "kill": what run does with an idle job
  double energy_factor{};      ///< history: a column of kWh x this (kg CO2, a currency; 0: none)
  std::string energy_unit;     ///< ... named so ("kg CO2e", "EUR")
  std::string xid_drain;       ///< Xid codes that drain a GPU beyond the table's (gpu_health.h): "48,79"
  std::string xid_ignore;      ///< Xid codes that drain nothing, the table's or xid_drain's

  Settings();
  /// Every number 0, every text and list empty: a start for reading the table's defaults.
  explicit Settings(std::monostate) {}
};

/// What a setting's value is, and so how it is read and checked.
enum class SettingKind {
  Gpus,      ///< GPU ids: "0-3", "0,1,2,3" or [0, 1, 2, 3]
  Number,    ///< a number >= 0
  Positive,  ///< a number > 0
  Percent,   ///< a number from 0 to below 100 (a share kept back)
  Count,     ///< a whole number >= 0
  Whole,     ///< a whole number
  Choice,    ///< one of `choices`
  Pairs,     ///< auto, original, or pairs such as "0-2,1-3"
  Text,      ///< a non-empty string (a command)
  Folder,    ///< a folder's path; in a plan, relative to the plan's folder
  Names,     ///< a list of non-empty strings (or one string)
  Codes,     ///< Xid codes: [48, 79] or "48,79" (none: [] or "")
};

/// The commands a setting's flag is for (SettingSpec::lists): `settings` takes run's.
namespace SettingCommand {
inline constexpr uint8_t kRun = 1, kStatus = 2, kSimulate = 4, kValidate = 8, kGpus = 16, kPreempt = 32,
                         kRequeue = 64, kAny = 127;
}

/// Where a setting's member is in Settings.
using SettingMember = std::variant<std::string Settings::*, double Settings::*, long long Settings::*,
                                   std::vector<std::string> Settings::*>;

/// One row of the table.
struct SettingSpec {
  std::string_view name;          ///< as the plan's "settings" and PLAN.run.json spell it
  std::string_view flag;          ///< the command-line flag that gives it
  SettingKind kind;
  std::string_view default_json;  ///< the default, as JSON
  std::string_view doc;           ///< one line
  SettingMember member;
  bool predicts = true;           ///< status and simulate --from-state predict with it (say when it is the run's)
  bool from_run = true;           ///< taken from a running `gpuq run` (not state_dir: PLAN.run.json is found through it)
  std::string_view env = {};      ///< an environment variable that gives it (between the flag and the rest)
  std::string_view choices = {};  ///< Choice: the values, "|" between
  std::string_view unset = {};    ///< what an empty value means, for people
  uint8_t lists = 0;              ///< the commands (SettingCommand) that take its flag and list it in --help
  bool every = false;             ///< taken, unlisted, by every command that reads the plan (as the original took it)
  bool hidden = false;            ///< taken where `lists` says, listed by none (run --help fits a screen)
  std::string_view value_name = {};  ///< the flag's value in --help ("S", "GIB")
};

// The table. Each flag keeps the name and default it had before settings could live in the plan;
// the defaults of the original's flags are the original's. A new setting is a member of Settings
// and a row here: its flag, `settings`' line, doc/settings.md's and PLAN.run.json's all follow.
// The table. Each flag keeps the name and default it had before settings could live in
// the plan; the defaults of the original's flags are the original's.
inline constexpr auto kSettingTable = std::to_array<SettingSpec>({
    {.name = "gpus", .flag = "--gpus", .kind = SettingKind::Gpus, .default_json = R"("0,1,2,3,4,5,6,7")",
     .doc = "GPU ids of this node: \"0-3\", \"0,2,4\" or [0, 1, 2, 3]", .member = &Settings::gpus, .lists = SettingCommand::kRun | SettingCommand::kStatus | SettingCommand::kSimulate | SettingCommand::kValidate | SettingCommand::kGpus, .every = true, .value_name = "IDS"},
    {.name = "max_used_mib", .flag = "--max-used-mib", .kind = SettingKind::Whole, .default_json = "1024",
     .doc = "a GPU with more memory in use than this (MiB) is not given to a new job",
     .member = &Settings::max_used_mib, .lists = SettingCommand::kRun | SettingCommand::kStatus | SettingCommand::kGpus, .every = true, .value_name = "MIB"},
    {.name = "ignore_process", .flag = "--ignore-process", .kind = SettingKind::Names, .default_json = "[]",
     .doc = "process names whose GPU processes never make a GPU busy", .member = &Settings::ignore_process, .lists = SettingCommand::kRun | SettingCommand::kStatus | SettingCommand::kSimulate | SettingCommand::kGpus, .value_name = "NAME"},
    {.name = "gpu_probe", .flag = "--gpu-probe", .kind = SettingKind::Choice, .default_json = R"("auto")",
     .doc = "where GPU readings come from: auto (NVML, else nvidia-smi), nvml, nvidia-smi, none",
     .member = &Settings::gpu_probe, .choices = "auto|nvml|nvidia-smi|none", .lists = SettingCommand::kRun | SettingCommand::kStatus | SettingCommand::kSimulate | SettingCommand::kGpus, .value_name = "KIND"},
    {.name = "nvidia_smi", .flag = "--nvidia-smi", .kind = SettingKind::Text, .default_json = R"("")",
     .doc = "the nvidia-smi command to probe GPUs with", .member = &Settings::nvidia_smi,
     .env = "GPUQ_NVIDIA_SMI", .unset = "nvidia-smi", .lists = SettingCommand::kRun | SettingCommand::kStatus | SettingCommand::kGpus, .value_name = "COMMAND"},
    {.name = "pairs", .flag = "--pairs", .kind = SettingKind::Pairs, .default_json = R"("")",
     .doc = "how multi-GPU jobs are placed: auto (topology), original (0-1, 2-3, ...) or pairs such as \"0-2,1-3\"",
     .member = &Settings::pairs, .unset = "auto (simulate: original)", .lists = SettingCommand::kRun | SettingCommand::kStatus | SettingCommand::kSimulate | SettingCommand::kGpus, .value_name = "PAIRS"},
    {.name = "gpu_mem_gib", .flag = "--gpu-mem-gib", .kind = SettingKind::Positive, .default_json = "80",
     .doc = "GiB of memory of each GPU where the GPU probe gives none (simulate; a node without a reading); jobs "
            "with gpu_mem_gib share GPUs within it",
     .member = &Settings::gpu_mem_gib, .lists = SettingCommand::kRun | SettingCommand::kStatus | SettingCommand::kSimulate | SettingCommand::kValidate, .value_name = "GIB"},
    {.name = "gpu_mem_headroom", .flag = "--gpu-mem-headroom", .kind = SettingKind::Percent, .default_json = "5",
     .doc = "percent of each GPU's memory that jobs sharing it by gpu_mem_gib leave free",
     .member = &Settings::gpu_mem_headroom, .lists = SettingCommand::kRun | SettingCommand::kStatus | SettingCommand::kSimulate | SettingCommand::kValidate, .value_name = "PCT"},
    {.name = "backfill_max_hours", .flag = "--backfill-max-hours", .kind = SettingKind::Number, .default_json = "0.5",
     .doc = "while a higher-priority job waits for GPUs, only jobs this short (hours) may start",
     .member = &Settings::backfill_max_hours, .lists = SettingCommand::kRun | SettingCommand::kStatus | SettingCommand::kSimulate | SettingCommand::kValidate, .every = true, .value_name = "H"},
    {.name = "max_retries", .flag = "--max-retries", .kind = SettingKind::Count, .default_json = "2",
     .doc = "automatic retries of a failed job", .member = &Settings::max_retries, .lists = SettingCommand::kRun | SettingCommand::kStatus | SettingCommand::kSimulate, .every = true, .value_name = "N"},
    {.name = "retry_after", .flag = "--retry-after", .kind = SettingKind::Number, .default_json = "300",
     .doc = "seconds between a failure and its automatic retry", .member = &Settings::retry_after, .lists = SettingCommand::kRun | SettingCommand::kStatus | SettingCommand::kSimulate, .every = true, .value_name = "S"},
    {.name = "time_limit_factor", .flag = "--time-limit-factor", .kind = SettingKind::Number, .default_json = "0",
     .doc = "a job without time_limit_hours gets a limit of this x est_hours (0: none)",
     .member = &Settings::time_limit_factor, .lists = SettingCommand::kRun | SettingCommand::kStatus | SettingCommand::kSimulate, .value_name = "F"},
    {.name = "quiet_minutes", .flag = "--quiet-minutes", .kind = SettingKind::Number, .default_json = "0",
     .doc = "hang watchdog for every job without quiet_minutes (0: off)", .member = &Settings::quiet_minutes, .lists = SettingCommand::kRun | SettingCommand::kStatus, .value_name = "M"},
    {.name = "poll", .flag = "--poll", .kind = SettingKind::Positive, .default_json = "20",
     .doc = "longest sleep of `run` between two looks at the queue, in seconds (run --slurm: 30)",
     .member = &Settings::poll, .lists = SettingCommand::kRun | SettingCommand::kStatus, .every = true, .value_name = "S"},
    {.name = "kill_grace", .flag = "--kill-grace", .kind = SettingKind::Number, .default_json = "30",
     .doc = "seconds a killed job may take to exit after SIGTERM before SIGKILL", .member = &Settings::kill_grace,
     .predicts = false, .lists = SettingCommand::kRun | SettingCommand::kRequeue, .value_name = "S"},
    {.name = "workdir", .flag = "--workdir", .kind = SettingKind::Folder, .default_json = R"("")",
     .doc = "where jobs run and relative script and file: paths are taken from (the plan's top-level "
            "\"workdir\" too)",
     .member = &Settings::workdir, .unset = "the current folder", .lists = SettingCommand::kAny, .every = true, .value_name = "DIR"},
    {.name = "state_dir", .flag = "--state-dir", .kind = SettingKind::Folder, .default_json = R"("")",
     .doc = "keep the state, locks and logs/ in this folder instead of beside the plan",
     .member = &Settings::state_dir, .predicts = false, .from_run = false, .env = "GPUQ_STATE_DIR",
     .unset = "beside the plan", .lists = SettingCommand::kAny, .every = true, .value_name = "DIR"},
    {.name = "on_event", .flag = "--on-event", .kind = SettingKind::Names, .default_json = "[]",
     .doc = "hooks: a bash command run for each event of the event log (PLAN.events.jsonl), with the event in "
            "GPUQ_EVENT, GPUQ_JOB_ID, GPUQ_ATTEMPT, GPUQ_OUTCOME, GPUQ_EXIT, GPUQ_LOG, ... and as JSON on stdin; "
            "\"failed,timeout:CMD\" runs it for those kinds only (start, end, retry, requeue, kill, hold, timeout, "
            "preempt, reload, pause, resume, eta, idle, drain, undrain; end outcomes: done, failed, killed, lost, hung, idle, preempted)",
     .member = &Settings::on_event, .predicts = false, .lists = SettingCommand::kRun, .value_name = "CMD"},
    {.name = "hook_timeout", .flag = "--hook-timeout", .kind = SettingKind::Positive, .default_json = "60",
     .doc = "seconds an on_event command may run before it is stopped", .member = &Settings::hook_timeout,
     .predicts = false, .lists = SettingCommand::kRun, .value_name = "S"},
    {.name = "events_max_mb", .flag = "--events-max-mb", .kind = SettingKind::Number, .default_json = "64",
     .doc = "start a new event log past this size (MB; 0: never)", .member = &Settings::events_max_mb,
     .predicts = false, .lists = SettingCommand::kRun, .value_name = "MB"},
    {.name = "progress_from_log", .flag = "--progress-from-log", .kind = SettingKind::Choice, .default_json = R"("true")",
     .doc = "false: `run` reads a job's progress only from its GPUQ_PROGRESS file, not from a progress bar in its "
            "log (a job's own progress_from_log wins)",
     .member = &Settings::progress_from_log, .predicts = false, .choices = "true|false", .lists = SettingCommand::kRun, .value_name = "B"},
    {.name = "eta_slip_percent", .flag = "--eta-slip-percent", .kind = SettingKind::Number, .default_json = "10",
     .doc = "an `eta` event when the plan's predicted finish moves by more than this percent of the time left "
            "(and eta_slip_minutes)",
     .member = &Settings::eta_slip_percent, .predicts = false, .lists = SettingCommand::kRun, .value_name = "PCT"},
    {.name = "eta_slip_minutes", .flag = "--eta-slip-minutes", .kind = SettingKind::Number, .default_json = "10",
     .doc = "... and by more than this many minutes", .member = &Settings::eta_slip_minutes, .predicts = false, .lists = SettingCommand::kRun, .value_name = "M"},
    {.name = "snapshot", .flag = "--snapshot", .kind = SettingKind::Choice, .default_json = R"("off")",
     .doc = "off, or git: run each job from a read-only checkout of a git snapshot of the workdir, taken when "
            "the job is loaded (a job's own snapshot field comes first; see Snapshots in doc/plan-file.md)",
     .member = &Settings::snapshot, .predicts = false, .choices = "off|git", .lists = SettingCommand::kRun, .value_name = "off|git"},
    {.name = "preemptible", .flag = "--preemptible", .kind = SettingKind::Choice, .default_json = R"("false")",
     .doc = "true: every job without its own preemptible field may be stopped to give its GPUs to more urgent work, "
            "and is run again (see Preemption in doc/plan-file.md)",
     .member = &Settings::preemptible, .choices = "false|true", .lists = SettingCommand::kRun | SettingCommand::kStatus | SettingCommand::kSimulate | SettingCommand::kPreempt, .value_name = "BOOL"},
    {.name = "preempt_grace", .flag = "--preempt-grace", .kind = SettingKind::Number, .default_json = "120",
     .doc = "seconds a preempted job may take to checkpoint and exit after its signal, before SIGKILL of its group",
     .member = &Settings::preempt_grace, .lists = SettingCommand::kRun | SettingCommand::kStatus | SettingCommand::kSimulate | SettingCommand::kPreempt, .value_name = "S"},
    {.name = "preempt_min_minutes", .flag = "--preempt-min-minutes", .kind = SettingKind::Number, .default_json = "30",
     .doc = "a job runs at least this long after its (re)start before it may be preempted (0: at once)",
     .member = &Settings::preempt_min_minutes, .lists = SettingCommand::kRun | SettingCommand::kStatus | SettingCommand::kSimulate | SettingCommand::kPreempt, .value_name = "M"},
    {.name = "node_cpus", .flag = "--node-cpus", .kind = SettingKind::Number, .default_json = "0",
     .doc = "cores jobs may use at once, counted where a job gives cpus or mem_gib (0: this machine's less "
            "reserve_cpus)",
     .member = &Settings::node_cpus, .lists = SettingCommand::kRun | SettingCommand::kStatus | SettingCommand::kSimulate, .value_name = "N"},
    {.name = "node_mem_gib", .flag = "--node-mem-gib", .kind = SettingKind::Number, .default_json = "0",
     .doc = "GiB of host memory jobs may use at once, counted where a job gives cpus or mem_gib (0: this "
            "machine's less reserve_mem_gib, at least half of it)",
     .member = &Settings::node_mem_gib, .lists = SettingCommand::kRun | SettingCommand::kStatus | SettingCommand::kSimulate, .value_name = "GIB"},
    {.name = "reserve_cpus", .flag = "--reserve-cpus", .kind = SettingKind::Count, .default_json = "1",
     .doc = "cores kept for the system where node_cpus is read from the machine (jobs are pinned to the others)",
     .member = &Settings::reserve_cpus, .lists = SettingCommand::kRun | SettingCommand::kStatus | SettingCommand::kSimulate, .hidden = true, .value_name = "N"},
    {.name = "reserve_mem_gib", .flag = "--reserve-mem-gib", .kind = SettingKind::Number, .default_json = "4",
     .doc = "GiB of host memory kept for the system where node_mem_gib is read from the machine",
     .member = &Settings::reserve_mem_gib, .lists = SettingCommand::kRun | SettingCommand::kStatus | SettingCommand::kSimulate, .hidden = true, .value_name = "GIB"},
    {.name = "mem_margin_percent", .flag = "--mem-margin-percent", .kind = SettingKind::Number, .default_json = "10",
     .doc = "run stops a job whose process tree's resident memory is over its mem_gib by more than this percent "
            "(outcome \"over memory\"); jobs without mem_gib are never stopped for memory",
     .member = &Settings::mem_margin_percent, .lists = SettingCommand::kRun | SettingCommand::kStatus | SettingCommand::kSimulate, .hidden = true, .value_name = "PCT"},
    {.name = "mem_cgroup", .flag = "--mem-cgroup", .kind = SettingKind::Choice, .default_json = R"("auto")",
     .doc = "auto: each job with mem_gib runs in a cgroup of its own whose memory limit (mem_gib plus "
            "mem_margin_percent) the kernel holds, where the node lets gpuq make one (`gpuq settings` says); off: "
            "never. Its resident memory is sampled either way",
     .member = &Settings::mem_cgroup, .choices = "auto|off", .lists = SettingCommand::kRun | SettingCommand::kStatus | SettingCommand::kSimulate, .hidden = true, .value_name = "WHEN"},
    {.name = "idle_util_percent", .flag = "--idle-util-percent", .kind = SettingKind::Percent, .default_json = "5",
     .doc = "a GPU at or below this utilization (percent) is idle, to the idle watch and the hang watchdog",
     .member = &Settings::idle_util_percent, .lists = SettingCommand::kRun | SettingCommand::kStatus, .hidden = true, .value_name = "PCT"},
    {.name = "idle_minutes", .flag = "--idle-minutes", .kind = SettingKind::Number, .default_json = "30",
     .doc = "a running job whose GPUs have all been idle (or held none of its processes) this long is idle "
            "(0: never; a job's own idle_ok: true is never)",
     .member = &Settings::idle_minutes, .lists = SettingCommand::kRun | SettingCommand::kStatus, .value_name = "M"},
    {.name = "on_idle", .flag = "--on-idle", .kind = SettingKind::Choice, .default_json = R"("warn")",
     .doc = "what `run` does with an idle job: warn (say so, once), requeue (stop it as a preemption does; it runs "
            "again later) or kill (stop it as failed, outcome \"idle\"); a job's own on_idle comes first",
     .member = &Settings::on_idle, .choices = "warn|requeue|kill", .lists = SettingCommand::kRun, .value_name = "WHAT"},
    {.name = "energy_factor", .flag = "--energy-factor", .kind = SettingKind::Number, .default_json = "0",
     .doc = "history: each job's and the plan's GPU energy also times this, per kWh (kg CO2e, a currency; 0: not shown)",
     .member = &Settings::energy_factor, .predicts = false, .lists = SettingCommand::kRun, .hidden = true, .value_name = "X"},
    {.name = "energy_unit", .flag = "--energy-unit", .kind = SettingKind::Text, .default_json = R"("")",
     .doc = "history: what energy_factor gives, e.g. \"kg CO2e\" or \"EUR\"", .member = &Settings::energy_unit,
     .predicts = false, .unset = "none", .lists = SettingCommand::kRun, .hidden = true, .value_name = "TEXT"},
    {.name = "xid_drain", .flag = "--xid-drain", .kind = SettingKind::Codes, .default_json = R"("")",
     .doc = "Xid codes that drain a GPU besides those doc/gpu-health.md lists (48, 63, 64, 74, 79, 92, 94, 95, "
            "119, 120): [154] or \"154\"",
     .member = &Settings::xid_drain, .predicts = false, .unset = "none", .lists = SettingCommand::kRun, .hidden = true, .value_name = "CODES"},
    {.name = "xid_ignore", .flag = "--xid-ignore", .kind = SettingKind::Codes, .default_json = R"("")",
     .doc = "Xid codes that never drain a GPU, even those the table or xid_drain drain (said, not acted on)",
     .member = &Settings::xid_ignore, .predicts = false, .unset = "none", .lists = SettingCommand::kRun, .hidden = true, .value_name = "CODES"},
});

/// The number of settings.
inline constexpr size_t kSettingCount = kSettingTable.size();

/// The table (kSettingTable), in the order `gpuq settings` and doc/settings.md list it.
std::span<const SettingSpec, kSettingCount> settings_table();

/// The row of the setting named `name`, or nullptr.
const SettingSpec* find_setting(std::string_view name);

/// The row's position in settings_table().
size_t setting_index(const SettingSpec& spec);

/// Where a setting's value came from, weakest first: the precedence is flag > env > run > plan > default.
enum class SettingSource : uint8_t { Default, Plan, Run, Env, Flag };

/// "default", "plan", "run", "env", "flag".
const char* source_name(SettingSource s);

/// Some settings, as one source (the plan's "settings", PLAN.run.json) gives them.
struct GivenSettings {
  Settings values;
  std::array<bool, kSettingCount> given{};
  bool any() const;
};

/// Reads one setting's JSON value into `into`; the problem ("must be ...") or "".
std::string read_setting(const SettingSpec& spec, const nlohmann::json& value, Settings& into);

/// Reads the member `name` of a "settings" object into `into` (marked given). The problem,
/// "\"NAME\": problem" (a name that is no setting with "did you mean" when one is near), or "".
std::string read_named_setting(std::string_view name, const nlohmann::json& value, GivenSettings& into);

/// Reads a "settings" object: each member as read_named_setting. The problems.
std::vector<std::string> read_settings(const nlohmann::json& object, GivenSettings& into);

/// A setting's value as JSON, as read_setting reads it back.
nlohmann::json setting_json(const SettingSpec& spec, const Settings& s);

/// Every setting's value, in the table's order (PLAN.run.json's "settings").
nlohmann::ordered_json settings_json(const Settings& s);

/// A setting's value for people: "0-3", "20", "a, b", and `unset` (or "none") for an empty one.
std::string setting_text(const SettingSpec& spec, const Settings& s);

/// Whether two settings hold the same value of the row's setting.
bool same_setting(const SettingSpec& spec, const Settings& a, const Settings& b);

/// Copies the row's setting from `from` to `to`.
void copy_setting(const SettingSpec& spec, const Settings& from, Settings& to);

/// Sets the row's setting from text (a flag's or an environment variable's value; for Names, one
/// name). The problem, or "".
std::string set_setting_text(const SettingSpec& spec, std::string_view text, Settings& into);

}  // namespace gpuq
