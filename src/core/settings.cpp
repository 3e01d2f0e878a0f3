#include "gpuq/core/settings.h"

#include <fmt/format.h>

#include <cmath>
#include <cstdlib>
#include <cstring>

#include "gpuq/core/gpus.h"
#include "gpuq/core/suggest.h"
#include "gpuq/core/topology.h"

namespace gpuq {

namespace {

using K = SettingKind;

// The table. Each flag keeps the name and default it had before settings could live in
// the plan; the defaults of the original's flags are the original's.
constexpr std::array<SettingSpec, kSettingCount> kTable{{
    {.name = "gpus", .flag = "--gpus", .kind = K::Gpus, .default_json = R"("0,1,2,3,4,5,6,7")",
     .doc = "GPU ids of this node: \"0-3\", \"0,2,4\" or [0, 1, 2, 3]", .member = &Settings::gpus},
    {.name = "max_used_mib", .flag = "--max-used-mib", .kind = K::Whole, .default_json = "1024",
     .doc = "a GPU with more memory in use than this (MiB) is not given to a new job",
     .member = &Settings::max_used_mib},
    {.name = "ignore_process", .flag = "--ignore-process", .kind = K::Names, .default_json = "[]",
     .doc = "process names whose GPU processes never make a GPU busy", .member = &Settings::ignore_process},
    {.name = "gpu_probe", .flag = "--gpu-probe", .kind = K::Choice, .default_json = R"("auto")",
     .doc = "where GPU readings come from: auto (NVML, else nvidia-smi), nvml, nvidia-smi, none",
     .member = &Settings::gpu_probe, .choices = "auto|nvml|nvidia-smi|none"},
    {.name = "nvidia_smi", .flag = "--nvidia-smi", .kind = K::Text, .default_json = R"("")",
     .doc = "the nvidia-smi command to probe GPUs with", .member = &Settings::nvidia_smi,
     .env = "GPUQ_NVIDIA_SMI", .unset = "nvidia-smi"},
    {.name = "pairs", .flag = "--pairs", .kind = K::Pairs, .default_json = R"("")",
     .doc = "how multi-GPU jobs are placed: auto (topology), original (0-1, 2-3, ...) or pairs such as \"0-2,1-3\"",
     .member = &Settings::pairs, .unset = "auto (simulate: original)"},
    {.name = "gpu_mem_gib", .flag = "--gpu-mem-gib", .kind = K::Positive, .default_json = "80",
     .doc = "GiB of memory of each GPU where the GPU probe gives none (simulate; a node without a reading); jobs "
            "with gpu_mem_gib share GPUs within it",
     .member = &Settings::gpu_mem_gib},
    {.name = "gpu_mem_headroom", .flag = "--gpu-mem-headroom", .kind = K::Number, .default_json = "5",
     .doc = "percent of each GPU's memory that jobs sharing it by gpu_mem_gib leave free",
     .member = &Settings::gpu_mem_headroom},
    {.name = "backfill_max_hours", .flag = "--backfill-max-hours", .kind = K::Number, .default_json = "0.5",
     .doc = "while a higher-priority job waits for GPUs, only jobs this short (hours) may start",
     .member = &Settings::backfill_max_hours},
    {.name = "max_retries", .flag = "--max-retries", .kind = K::Count, .default_json = "2",
     .doc = "automatic retries of a failed job", .member = &Settings::max_retries},
    {.name = "retry_after", .flag = "--retry-after", .kind = K::Number, .default_json = "300",
     .doc = "seconds between a failure and its automatic retry", .member = &Settings::retry_after},
    {.name = "time_limit_factor", .flag = "--time-limit-factor", .kind = K::Number, .default_json = "0",
     .doc = "a job without time_limit_hours gets a limit of this x est_hours (0: none)",
     .member = &Settings::time_limit_factor},
    {.name = "quiet_minutes", .flag = "--quiet-minutes", .kind = K::Number, .default_json = "0",
     .doc = "hang watchdog for every job without quiet_minutes (0: off)", .member = &Settings::quiet_minutes},
    {.name = "poll", .flag = "--poll", .kind = K::Positive, .default_json = "20",
     .doc = "longest sleep of `run` between two looks at the queue, in seconds (run --slurm: 30)",
     .member = &Settings::poll},
    {.name = "kill_grace", .flag = "--kill-grace", .kind = K::Number, .default_json = "30",
     .doc = "seconds a killed job may take to exit after SIGTERM before SIGKILL", .member = &Settings::kill_grace,
     .predicts = false},
    {.name = "workdir", .flag = "--workdir", .kind = K::Folder, .default_json = R"("")",
     .doc = "where jobs run and relative script and file: paths are taken from (the plan's top-level "
            "\"workdir\" too)",
     .member = &Settings::workdir, .unset = "the current folder"},
    {.name = "state_dir", .flag = "--state-dir", .kind = K::Folder, .default_json = R"("")",
     .doc = "keep the state, locks and logs/ in this folder instead of beside the plan",
     .member = &Settings::state_dir, .predicts = false, .from_run = false, .env = "GPUQ_STATE_DIR",
     .unset = "beside the plan"},
    {.name = "on_event", .flag = "--on-event", .kind = K::Names, .default_json = "[]",
     .doc = "hooks: a command (or \"kind,kind:command\") run for each event of the event log",
     .member = &Settings::on_event, .predicts = false},
    {.name = "hook_timeout", .flag = "--hook-timeout", .kind = K::Positive, .default_json = "60",
     .doc = "seconds an on_event command may run before it is stopped", .member = &Settings::hook_timeout,
     .predicts = false},
    {.name = "events_max_mb", .flag = "--events-max-mb", .kind = K::Number, .default_json = "64",
     .doc = "start a new event log past this size (MB; 0: never)", .member = &Settings::events_max_mb,
     .predicts = false},
    {.name = "progress_from_log", .flag = "--progress-from-log", .kind = K::Choice, .default_json = R"("true")",
     .doc = "false: `run` reads a job's progress only from its GPUQ_PROGRESS file, not from a progress bar in its "
            "log (a job's own progress_from_log wins)",
     .member = &Settings::progress_from_log, .predicts = false, .choices = "true|false"},
    {.name = "eta_slip_percent", .flag = "--eta-slip-percent", .kind = K::Number, .default_json = "10",
     .doc = "an `eta` event when the plan's predicted finish moves by more than this percent of the time left "
            "(and eta_slip_minutes)",
     .member = &Settings::eta_slip_percent, .predicts = false},
    {.name = "eta_slip_minutes", .flag = "--eta-slip-minutes", .kind = K::Number, .default_json = "10",
     .doc = "... and by more than this many minutes", .member = &Settings::eta_slip_minutes, .predicts = false},
    {.name = "snapshot", .flag = "--snapshot", .kind = K::Choice, .default_json = R"("off")",
     .doc = "off, or git: run each job from a read-only checkout of a git snapshot of the workdir, taken when "
            "the job is loaded (a job's own snapshot field comes first; see Snapshots in doc/plan-file.md)",
     .member = &Settings::snapshot, .predicts = false, .choices = "off|git"},
    {.name = "preemptible", .flag = "--preemptible", .kind = K::Choice, .default_json = R"("false")",
     .doc = "true: every job without its own preemptible field may be stopped to give its GPUs to more urgent work, "
            "and is run again (see Preemption in doc/plan-file.md)",
     .member = &Settings::preemptible, .choices = "false|true"},
    {.name = "preempt_grace", .flag = "--preempt-grace", .kind = K::Number, .default_json = "120",
     .doc = "seconds a preempted job may take to checkpoint and exit after its signal, before SIGKILL of its group",
     .member = &Settings::preempt_grace},
    {.name = "preempt_min_minutes", .flag = "--preempt-min-minutes", .kind = K::Number, .default_json = "30",
     .doc = "a job runs at least this long after its (re)start before it may be preempted (0: at once)",
     .member = &Settings::preempt_min_minutes},
    {.name = "node_cpus", .flag = "--node-cpus", .kind = K::Number, .default_json = "0",
     .doc = "cores jobs may use at once, counted where a job gives cpus or mem_gib (0: this machine's less "
            "reserve_cpus)",
     .member = &Settings::node_cpus},
    {.name = "node_mem_gib", .flag = "--node-mem-gib", .kind = K::Number, .default_json = "0",
     .doc = "GiB of host memory jobs may use at once, counted where a job gives cpus or mem_gib (0: this "
            "machine's less reserve_mem_gib, at least half of it)",
     .member = &Settings::node_mem_gib},
    {.name = "reserve_cpus", .flag = "--reserve-cpus", .kind = K::Count, .default_json = "1",
     .doc = "cores kept for the system where node_cpus is read from the machine (jobs are pinned to the others)",
     .member = &Settings::reserve_cpus},
    {.name = "reserve_mem_gib", .flag = "--reserve-mem-gib", .kind = K::Number, .default_json = "4",
     .doc = "GiB of host memory kept for the system where node_mem_gib is read from the machine",
     .member = &Settings::reserve_mem_gib},
    {.name = "mem_margin_percent", .flag = "--mem-margin-percent", .kind = K::Number, .default_json = "10",
     .doc = "run stops a job whose process tree's resident memory is over its mem_gib by more than this percent "
            "(outcome \"over memory\"); jobs without mem_gib are never stopped for memory",
     .member = &Settings::mem_margin_percent},
    {.name = "mem_cgroup", .flag = "--mem-cgroup", .kind = K::Choice, .default_json = R"("auto")",
     .doc = "auto: each job with mem_gib runs in a cgroup of its own whose memory limit (mem_gib plus "
            "mem_margin_percent) the kernel holds, where the node lets gpuq make one (`gpuq settings` says); off: "
            "never. Its resident memory is sampled either way",
     .member = &Settings::mem_cgroup, .choices = "auto|off"},
}};

// "a string", "a list", ...: as the plan loader names a JSON value's kind.
const char* kind_of(const nlohmann::json& v) {
  switch (v.type()) {
    case nlohmann::json::value_t::null: return "null";
    case nlohmann::json::value_t::boolean: return "a boolean";
    case nlohmann::json::value_t::string: return "a string";
    case nlohmann::json::value_t::array: return "a list";
    case nlohmann::json::value_t::object: return "an object";
    case nlohmann::json::value_t::number_float: return "a fractional number";
    default: return "a number";
  }
}

// A value as messages quote it: compact, cut at 40 characters.
std::string shown(const nlohmann::json& v) {
  std::string s = v.dump();
  return s.size() > 40 ? s.substr(0, 37) + "..." : s;
}

std::string not_a(const char* what, const nlohmann::json& v) {
  return fmt::format("must be {}, not {} ({})", what, kind_of(v), shown(v));
}

std::string read_number(const SettingSpec& spec, const nlohmann::json& v, double& out) {
  if (!v.is_number()) return not_a("a number", v);
  double x = v.get<double>();
  if (!std::isfinite(x)) return not_a("a finite number", v);
  if (spec.kind == K::Positive && x <= 0) return fmt::format("must be more than 0 (got {})", shown(v));
  if (x < 0) return fmt::format("must not be negative (got {})", shown(v));
  out = x;
  return "";
}

std::string read_whole(const SettingSpec& spec, const nlohmann::json& v, long long& out) {
  if (!v.is_number_integer()) return not_a("a whole number", v);
  if (v.is_number_unsigned() && v.get<unsigned long long>() > static_cast<unsigned long long>(INT64_MAX))
    return fmt::format("is too large (got {})", shown(v));
  long long x = v.get<long long>();
  if (spec.kind == K::Count && x < 0) return fmt::format("must not be negative (got {})", shown(v));
  out = x;
  return "";
}

std::string read_text(const SettingSpec& spec, const nlohmann::json& v, std::string& out) {
  switch (spec.kind) {
    case K::Gpus: {
      std::string text;
      if (v.is_array()) {
        for (const auto& g : v) {
          if (!g.is_number_integer()) return fmt::format("GPU {} is not a GPU id", shown(g));
          text += (text.empty() ? "" : ",") + g.dump();
        }
        if (text.empty()) return "must name at least one GPU";
      } else if (v.is_string()) {
        text = v.get<std::string>();
      } else {
        return not_a("GPU ids (\"0-3\", \"0,1,2,3\" or [0, 1, 2, 3])", v);
      }
      std::string err;
      if (!parse_gpu_list(text, &err)) {  // its words name --gpus: here the setting is named already
        for (auto [from, to] : {std::pair{"in --gpus '", "in '"}, std::pair{" in --gpus is", " is"}})
          if (size_t at = err.find(from); at != std::string::npos) err.replace(at, std::strlen(from), to);
        return err;
      }
      out = text;
      return "";
    }
    case K::Choice: {
      if (v.is_boolean() && (spec.choices == "true|false" || spec.choices == "false|true")) {  // a switch, as JSON has it
        out = v.get<bool>() ? "true" : "false";
        return "";
      }
      if (!v.is_string()) return not_a("a string", v);
      std::string s = v.get<std::string>();
      std::string_view rest = spec.choices;
      std::vector<std::string_view> names;
      while (!rest.empty()) {
        size_t bar = rest.find('|');
        names.push_back(rest.substr(0, bar));
        rest = bar == std::string_view::npos ? std::string_view() : rest.substr(bar + 1);
      }
      for (std::string_view n : names)
        if (n == s) {
          out = s;
          return "";
        }
      std::string list;
      for (std::string_view n : names) list += fmt::format("{}{}", list.empty() ? "" : ", ", n);
      return fmt::format("must be one of {}, not {}{}", list, shown(v), did_you_mean(s, names));
    }
    case K::Pairs: {
      if (!v.is_string()) return not_a("a string (auto, original, or pairs such as \"0-2,1-3\")", v);
      std::string err;
      if (!parse_pairs(v.get<std::string>(), &err)) return err;
      out = v.get<std::string>();
      return "";
    }
    default:
      if (!v.is_string()) return not_a(spec.kind == K::Folder ? "a folder's path (a string)" : "a string", v);
      if (v.get<std::string>().empty()) return "must not be empty";
      out = v.get<std::string>();
      return "";
  }
}

std::string read_names(const nlohmann::json& v, std::vector<std::string>& out) {
  if (v.is_string()) {
    if (v.get<std::string>().empty()) return "must not be empty";
    out = {v.get<std::string>()};
    return "";
  }
  if (!v.is_array()) return not_a("a list of strings", v);
  std::vector<std::string> names;
  for (const auto& x : v) {
    if (!x.is_string() || x.get<std::string>().empty())
      return fmt::format("must be a list of non-empty strings; {} is not one", shown(x));
    names.push_back(x.get<std::string>());
  }
  out = std::move(names);
  return "";
}

Settings table_defaults() {
  Settings s{std::monostate{}};
  for (const SettingSpec& spec : kTable) {
    nlohmann::json d = nlohmann::json::parse(spec.default_json);
    if (d == "") continue;  // unset (a plan cannot give ""): the member stays empty
    if (!read_setting(spec, d, s).empty()) std::abort();  // the table's own default: settings_test reads each
  }
  return s;
}

}  // namespace

Settings::Settings() {
  static const Settings defaults = table_defaults();
  *this = defaults;
}

Settings::Settings(std::monostate)
    : poll(0), gpu_mem_gib(0), gpu_mem_headroom(0), backfill_max_hours(0), max_retries(0), retry_after(0), max_used_mib(0), time_limit_factor(0),
      quiet_minutes(0), kill_grace(0), hook_timeout(0), events_max_mb(0), eta_slip_percent(0), eta_slip_minutes(0),
      preempt_grace(0), preempt_min_minutes(0), node_cpus(0), node_mem_gib(0), reserve_cpus(0), reserve_mem_gib(0),
      mem_margin_percent(0) {}

std::span<const SettingSpec, kSettingCount> settings_table() { return kTable; }

const SettingSpec* find_setting(std::string_view name) {
  for (const SettingSpec& spec : kTable)
    if (spec.name == name) return &spec;
  return nullptr;
}

size_t setting_index(const SettingSpec& spec) { return static_cast<size_t>(&spec - kTable.data()); }

const char* source_name(SettingSource s) {
  switch (s) {
    case SettingSource::Default: return "default";
    case SettingSource::Plan: return "plan";
    case SettingSource::Run: return "run";
    case SettingSource::Env: return "env";
    case SettingSource::Flag: return "flag";
  }
  return "?";
}

bool GivenSettings::any() const {
  for (bool g : given)
    if (g) return true;
  return false;
}

std::string read_setting(const SettingSpec& spec, const nlohmann::json& value, Settings& into) {
  return std::visit(
      [&](auto member) -> std::string {
        using T = std::remove_reference_t<decltype(into.*member)>;
        if constexpr (std::is_same_v<T, double>) return read_number(spec, value, into.*member);
        if constexpr (std::is_same_v<T, long long>) return read_whole(spec, value, into.*member);
        if constexpr (std::is_same_v<T, std::string>) return read_text(spec, value, into.*member);
        if constexpr (std::is_same_v<T, std::vector<std::string>>) return read_names(value, into.*member);
      },
      spec.member);
}

std::string read_named_setting(std::string_view name, const nlohmann::json& value, GivenSettings& into) {
  const SettingSpec* spec = find_setting(name);
  if (!spec) {
    std::vector<std::string_view> names;
    for (const SettingSpec& s : kTable) names.push_back(s.name);
    std::string near = did_you_mean(name, names);
    return fmt::format("\"{}\" is not a setting{}", name, near.empty() ? " (`gpuq settings` lists them)" : near);
  }
  if (std::string why = read_setting(*spec, value, into.values); !why.empty())
    return fmt::format("\"{}\": {}", name, why);
  into.given[setting_index(*spec)] = true;
  return "";
}

std::vector<std::string> read_settings(const nlohmann::json& object, GivenSettings& into) {
  if (!object.is_object()) return {not_a("an object of settings (\"gpus\", \"max_retries\", ...)", object)};
  std::vector<std::string> problems;
  for (const auto& [key, value] : object.items())
    if (std::string problem = read_named_setting(key, value, into); !problem.empty()) problems.push_back(problem);
  return problems;
}

nlohmann::json setting_json(const SettingSpec& spec, const Settings& s) {
  return std::visit([&](auto member) { return nlohmann::json(s.*member); }, spec.member);
}

nlohmann::ordered_json settings_json(const Settings& s) {
  nlohmann::ordered_json out = nlohmann::ordered_json::object();
  for (const SettingSpec& spec : kTable) out[std::string(spec.name)] = nlohmann::ordered_json(setting_json(spec, s));
  return out;
}

std::string setting_text(const SettingSpec& spec, const Settings& s) {
  return std::visit(
      [&](auto member) -> std::string {
        const auto& v = s.*member;
        using T = std::remove_cvref_t<decltype(v)>;
        if constexpr (std::is_same_v<T, double>) return fmt::format("{:g}", v);
        if constexpr (std::is_same_v<T, long long>) return fmt::format("{}", v);
        if constexpr (std::is_same_v<T, std::string>) return v.empty() ? std::string(spec.unset) : v;
        if constexpr (std::is_same_v<T, std::vector<std::string>>) {
          std::string out;
          for (const std::string& x : v) out += (out.empty() ? "" : ", ") + x;
          return out.empty() ? std::string("none") : out;
        }
      },
      spec.member);
}

bool same_setting(const SettingSpec& spec, const Settings& a, const Settings& b) {
  if (spec.kind == K::Gpus) {  // "0-3" and "0,1,2,3" are the same GPUs
    std::string err;
    auto x = parse_gpu_list(a.gpus, &err), y = parse_gpu_list(b.gpus, &err);
    if (x && y) return *x == *y;
  }
  return std::visit([&](auto member) { return a.*member == b.*member; }, spec.member);
}

void copy_setting(const SettingSpec& spec, const Settings& from, Settings& to) {
  std::visit([&](auto member) { to.*member = from.*member; }, spec.member);
}

std::string set_setting_text(const SettingSpec& spec, std::string_view text, Settings& into) {
  nlohmann::json v = std::string(text);
  if (spec.kind == K::Number || spec.kind == K::Positive || spec.kind == K::Count || spec.kind == K::Whole) {
    std::string s(text);
    char* end = nullptr;
    double x = std::strtod(s.c_str(), &end);
    if (s.empty() || *end) return fmt::format("must be a number, not \"{}\"", s);
    bool whole = s.find_first_of(".eE") == std::string::npos;
    v = whole && (spec.kind == K::Count || spec.kind == K::Whole) ? nlohmann::json(std::strtoll(s.c_str(), nullptr, 10))
                                                                    : nlohmann::json(x);
  }
  return read_setting(spec, v, into);
}

}  // namespace gpuq
