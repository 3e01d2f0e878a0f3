// The plan and its settings as a command takes them (setup.h): where each setting comes from
// (flag > env > run > plan > default), the plan's files, the workdir, the run options, the
// plan loaded and checked.
#include "gpuq/live/setup.h"

#include <fmt/format.h>

#include <cstdlib>
#include <filesystem>
#include <pwd.h>
#include <sys/stat.h>
#include <unistd.h>

#include "gpuq/core/hint.h"
#include "gpuq/live/hooks.h"
#include "gpuq/live/host.h"
#include "gpuq/live/proc.h"
#include "gpuq/live/run_info.h"

namespace gpuq {

namespace fs = std::filesystem;

namespace {

// The values the command would take without the run (the plan's, else the default), as they
// take effect, to be compared with the run's: an unset pairs is the command's default, the
// workdir an absolute folder (the run records its own so).
Settings without_run(const PlanSetup& s, const char* pairs_default) {
  Settings out;
  const size_t wd = setting_index(*find_setting("workdir"));
  for (const SettingSpec& spec : settings_table())
    if (s.plan_settings.given[setting_index(spec)]) copy_setting(spec, s.plan_settings.values, out);
  if (out.pairs.empty()) out.pairs = pairs_default;
  PlanSetup at = s;
  at.workdir = out.workdir;
  at.from[wd] = s.plan_settings.given[wd] ? SettingSource::Plan : SettingSource::Default;
  Workdir w = workdir_of(at, std::nullopt);
  std::error_code ec;
  out.workdir = w.path.empty() ? fs::current_path(ec).string() : w.path;
  return out;
}

}  // namespace

void take_env(PlanSetup& s) {
  for (const SettingSpec& spec : settings_table()) {
    size_t i = setting_index(spec);
    if (spec.env.empty() || s.from[i] != SettingSource::Default) continue;
    const char* env = std::getenv(std::string(spec.env).c_str());
    if (env && *env && set_setting_text(spec, env, s).empty()) s.from[i] = SettingSource::Env;
  }
}

void take_settings(PlanSetup& s, const GivenSettings& plan) {
  if (s.settings_taken) return;
  s.settings_taken = true;
  s.plan_settings = plan;
  for (const SettingSpec& spec : settings_table()) {
    size_t i = setting_index(spec);
    if (plan.given[i] && s.from[i] < SettingSource::Plan) {
      copy_setting(spec, plan.values, s);
      s.from[i] = SettingSource::Plan;
    }
  }
  if (s.source_of("state_dir") == SettingSource::Plan) {
    fs::path dir = expand_path(s.state_dir);
    if (dir.is_relative()) s.state_dir = (fs::path(s.plan).parent_path() / dir).string();
  }
  if (s.reads_run_settings) {
    PlanPaths paths = paths_for(s.plan, s.state_dir);
    RunPresence run = run_presence(paths);
    if (run.running && run.info) {
      s.run_settings = run.info->settings;
      s.run_info_file = paths.run_info;
      for (const SettingSpec& spec : settings_table()) {
        size_t i = setting_index(spec);
        if (spec.from_run && s.run_settings.given[i] && s.from[i] < SettingSource::Run) {
          copy_setting(spec, s.run_settings.values, s);
          s.from[i] = SettingSource::Run;
        }
      }
      if (s.source_of("gpus") == SettingSource::Run)
        s.gpus_source = fmt::format("the running `gpuq run` (pid {}) --gpus", run.info->pid);
    }
  }
  if (s.source_of("gpus") == SettingSource::Plan) s.gpus_source = "the plan's \"settings\" \"gpus\"";
}

ChooseGpus choose_gpus(PlanSetup& s) {
  return [&s](const GivenSettings& plan) {
    take_settings(s, plan);
    std::string err;
    // Every source was checked as it was read; a bad --gpus was said before the load.
    return parse_gpu_list(s.gpus, &err).value_or(std::vector<int>{});
  };
}

std::optional<std::vector<int>> gpu_ids(const PlanSetup& s, std::string* err) { return parse_gpu_list(s.gpus, err); }

std::string with_gpus_source(std::string error, const std::string& source) {
  if (auto at = error.find("--gpus gives"); at != std::string::npos && source != "--gpus") error.replace(at, 6, source);
  return error;
}

PlanReport load_plan_report(PlanSetup& s) {
  PlanReport r;
  if (!gpu_ids(s, &r.bad_gpus)) return r;  // a bad --gpus: said before the plan is read
  // A path that is no plan file at all: one line, before any talk of problems in a plan.
  if (r.not_a_plan = plan_file_problem(s.plan); !r.not_a_plan.empty()) return r;
  PlanLoad load = load_plan_choosing_gpus(s.plan, choose_gpus(s));
  take_settings(s, {});  // a plan that is not JSON gave none: the others still count
  for (std::string& e : settings_problems(s)) load.errors.insert(load.errors.begin(), std::move(e));
  for (std::string& e : load.errors) r.errors.push_back(with_gpus_source(std::move(e), s.gpus_source));
  r.warnings = std::move(load.warnings);
  r.unknown_fields = std::move(load.unknown_fields);
  if (!load.plan || !r.errors.empty()) return r;
  std::optional<std::vector<int>> gpus = gpu_ids(s, &r.bad_gpus);  // as the settings give them
  if (!gpus) return r;
  r.gpus = std::move(*gpus);
  r.plan = std::move(load.plan);
  return r;
}

std::vector<std::string> settings_problems(const PlanSetup& s) {
  std::vector<std::string> out;
  if (s.source_of("on_event") != SettingSource::Plan) return out;
  for (const std::string& hook : s.on_event) {
    std::string problem;
    if (!parse_hook(hook, &problem)) {
      if (problem.rfind("--on-event ", 0) == 0) problem.erase(0, 11);  // the setting is named already
      out.push_back(fmt::format("{}: \"settings\": \"on_event\": {}", s.plan, problem));
    }
  }
  return out;
}

std::vector<std::string> take_plan_settings_only(PlanSetup& s, std::string* note) {
  std::vector<std::string> errors;
  std::optional<GivenSettings> given = load_plan_settings(s.plan, errors);
  if (!given) {
    std::error_code ec;
    if (note && fs::exists(s.plan, ec))
      *note = fmt::format("the plan's \"settings\" are not read: {}", errors.empty() ? "?" : errors.front());
    take_settings(s, {});
    return {};
  }
  take_settings(s, *given);
  for (std::string& e : settings_problems(s)) errors.push_back(std::move(e));
  return errors;
}

std::vector<std::string> settings_notes(const PlanSetup& s, const char* pairs_default) {
  std::vector<std::string> lines;
  if (s.run_info_file.empty()) return lines;
  std::string file = fs::path(s.run_info_file).filename().string();
  Settings base = without_run(s, pairs_default);
  std::string taken, plan_says;
  for (const SettingSpec& spec : settings_table()) {
    size_t i = setting_index(spec);
    if (!spec.predicts) continue;
    SettingSource from = s.from[i];
    std::string value = setting_text(spec, s);
    bool run_differs = s.run_settings.given[i] && !same_setting(spec, s, s.run_settings.values);
    if (from == SettingSource::Flag && run_differs)
      lines.push_back(fmt::format("{} {} given here; the run uses {}", spec.flag, value,
                                  setting_text(spec, s.run_settings.values)));
    else if (from == SettingSource::Env && run_differs)
      lines.push_back(fmt::format("${}={} here; the run uses {}", spec.env, value,
                                  setting_text(spec, s.run_settings.values)));
    else if (from == SettingSource::Run && !same_setting(spec, s, base)) {
      taken += fmt::format("{}{} {}", taken.empty() ? "" : ", ", spec.flag, value);
      if (s.plan_settings.given[i])
        plan_says += fmt::format("{}{} {}", plan_says.empty() ? "" : ", ", spec.name, setting_text(spec, base));
    }
  }
  if (!taken.empty()) lines.insert(lines.begin(), fmt::format("predicting with the run's {} ({})", taken, file));
  if (!plan_says.empty())
    lines.push_back(fmt::format("the plan's \"settings\" say {}: the run keeps the settings it started with until "
                                "it is restarted",
                                plan_says));
  return lines;
}

nlohmann::ordered_json settings_sources_json(const PlanSetup& s) {
  nlohmann::ordered_json out = nlohmann::ordered_json::object();
  for (const SettingSpec& spec : settings_table()) {
    size_t i = setting_index(spec);
    nlohmann::ordered_json one = nlohmann::ordered_json::object();
    one["value"] = nlohmann::ordered_json(setting_json(spec, s));
    one["from"] = source_name(s.from[i]);
    one["flag"] = spec.flag;
    if (!s.run_info_file.empty() && s.run_settings.given[i] && !same_setting(spec, s, s.run_settings.values))
      one["run"] = nlohmann::ordered_json(setting_json(spec, s.run_settings.values));
    if (s.plan_settings.given[i] && !same_setting(spec, s, s.plan_settings.values))
      one["plan"] = nlohmann::ordered_json(setting_json(spec, s.plan_settings.values));
    out[std::string(spec.name)] = std::move(one);
  }
  return out;
}

PlanPaths plan_paths(const PlanSetup& s) {
  if (!s.state_dir.empty()) {
    std::error_code ec;
    fs::create_directories(s.state_dir, ec);  // a failure is reported where a file is made in it
  }
  return paths_for(s.plan, s.state_dir);
}

std::string absolute_workdir(const Workdir& wd) {
  std::error_code ec;
  return wd.path.empty() ? fs::current_path(ec).string() : wd.path;
}

Workdir workdir_of(const PlanSetup& s, const std::optional<std::string>& plan_workdir) {
  std::error_code ec;
  auto absolute = [&](const fs::path& p) {
    fs::path a = fs::absolute(p, ec).lexically_normal();
    std::string out = a.string();
    while (out.size() > 1 && out.back() == '/') out.pop_back();
    return out;
  };
  SettingSource from = s.source_of("workdir");
  if (!s.workdir.empty() && (from == SettingSource::Flag || from == SettingSource::Run)) {
    std::string p = absolute(expand_path(s.workdir));
    return {p, p + (from == SettingSource::Flag ? " (--workdir)" : " (the running `gpuq run`'s workdir)")};
  }
  std::optional<std::string> in_plan = plan_workdir;
  if (!in_plan && from == SettingSource::Plan) in_plan = s.workdir;
  if (in_plan) {
    fs::path w = expand_path(*in_plan);
    std::string p = absolute(w.is_absolute() ? w : fs::path(s.plan).parent_path() / w);
    return {p, fmt::format("{} (the plan's \"workdir\" {})", p, *in_plan)};
  }
  return {"", absolute(fs::current_path(ec)) + " (the current folder)"};
}

RunOptions run_options(const PlanSetup& s, const std::vector<int>& gpus) {
  RunOptions opt;
  opt.settings = s;
  opt.node_gpus = gpus;
  opt.poll = s.poll;
  opt.backfill_max_hours = s.backfill_max_hours;
  opt.max_retries = s.max_retries;
  opt.retry_after = s.retry_after;
  opt.gpu_mem_gib = s.gpu_mem_gib;
  opt.gpu_mem_headroom = s.gpu_mem_headroom;
  opt.max_used_mib = s.max_used_mib;
  opt.kill_grace = s.kill_grace;
  opt.time_limit_factor = s.time_limit_factor;
  opt.quiet_minutes = s.quiet_minutes;
  opt.on_event = s.on_event;
  opt.hook_timeout = s.hook_timeout;
  opt.events_max_mb = s.events_max_mb;
  opt.progress_from_log = s.progress_from_log;
  opt.eta_slip_percent = s.eta_slip_percent;
  opt.eta_slip_minutes = s.eta_slip_minutes;
  opt.snapshot = s.snapshot;
  const char* env = std::getenv("GPUQ_NVIDIA_SMI");
  opt.nvidia_smi = !s.nvidia_smi.empty() ? s.nvidia_smi : env && *env ? env : "nvidia-smi";
  opt.gpu_probe = s.gpu_probe;
  opt.ignore_process = s.ignore_process;
  opt.node_dir = s.node_dir;
  opt.preemptible_default = s.preemptible == "true";
  opt.preempt_min_minutes = s.preempt_min_minutes;
  opt.preempt_grace = s.preempt_grace;
  opt.mem_margin_percent = s.mem_margin_percent;
  opt.mem_cgroup = s.mem_cgroup != "off";
  // Cores and host memory: as given, else this machine's less the system's reserve (counted only
  // where a job of the plan gives cpus or mem_gib).
  std::vector<int> usable = usable_cores();
  opt.node_cpus_asked = s.node_cpus;
  opt.node_cpus = s.node_cpus > 0 ? s.node_cpus
                                  : std::max(1.0, static_cast<double>(usable.size()) - double(s.reserve_cpus));
  // The cores jobs are pinned to: this process's, less the lowest reserve_cpus (the system's
  // interrupts and daemons favour them) where that leaves some, at most node_cpus of them.
  opt.node_cores = usable;
  if (s.reserve_cpus > 0 && usable.size() > static_cast<size_t>(s.reserve_cpus))
    opt.node_cores.erase(opt.node_cores.begin(), opt.node_cores.begin() + s.reserve_cpus);
  // Admission and pinning agree (issue 50): jobs never use more cores at once than they can be
  // pinned to, each to cores of its own. A node_cpus past them is lowered to them, and said.
  if (!opt.node_cores.empty() && opt.node_cpus > static_cast<double>(opt.node_cores.size())) {
    size_t kept = usable.size() - opt.node_cores.size();
    opt.host_note = fmt::format(
        "node_cpus {:g} is more than the {} core{} gpuq may pin jobs to ({}{}): jobs may use {} at once{}", opt.node_cpus,
        opt.node_cores.size(), opt.node_cores.size() == 1 ? "" : "s", core_list_text(opt.node_cores),
        kept ? fmt::format("; reserve_cpus {} keeps {} for the system", s.reserve_cpus,
                           core_list_text(std::vector<int>(usable.begin(), usable.begin() + static_cast<long>(kept))))
             : std::string(" of this machine's"),
        opt.node_cores.size(),
        kept ? "; a lower reserve_cpus gives jobs more" : "");
    opt.node_cpus = static_cast<double>(opt.node_cores.size());
  }
  if (size_t most = static_cast<size_t>(std::ceil(opt.node_cpus)); most > 0 && opt.node_cores.size() > most)
    opt.node_cores.resize(most);
  double machine = machine_mem_gib();
  opt.node_mem_gib = s.node_mem_gib > 0 ? s.node_mem_gib : machine > 0 ? std::max(machine / 2, machine - s.reserve_mem_gib) : 0;
  return opt;
}

NodeHost node_host(const PlanSetup& s) {
  RunOptions opt = run_options(s, {});
  NodeHost h;
  h.usable = usable_cores();
  h.cores = opt.node_cores;
  h.cpus = opt.node_cpus;
  h.machine_gib = machine_mem_gib();
  h.mem_gib = opt.node_mem_gib;
  h.note = opt.host_note;
  h.cgroups = opt.mem_cgroup ? look_at_cgroups(false) : Cgroups{Cgroups::Kind::None, "", "--mem-cgroup off"};
  return h;
}

std::optional<Placement> placement_of(const PlanSetup& s, const char* dflt, const std::vector<int>& gpus,
                                      std::string* problem) {
  std::string text = s.pairs.empty() ? dflt : s.pairs;
  std::optional<Placement> p = parse_pairs(text, problem);
  if (!p || gpus.empty()) return p;
  GpuMask node = mask_of(gpus);
  std::vector<int> outside;
  for (auto [a, b] : p->pairs)
    for (int g : {a, b})
      if (!(node >> g & 1)) outside.push_back(g);
  if (outside.empty()) return p;
  *problem = fmt::format("--pairs {}: {} {} {} of this node (it has {}); a pair of GPUs it does not have "
                         "would never be used: name pairs of its GPUs",
                         text, outside.size() == 1 ? "GPU" : "GPUs", py_list(outside).substr(1, py_list(outside).size() - 2),
                         outside.size() == 1 ? "is not a GPU" : "are not GPUs", py_list(gpus));
  return std::nullopt;
}

std::string plan_in_reach(const std::string& given) {
  if (!given.empty()) return given;
  if (const char* env = std::getenv("GPUQ_PLAN"); env && *env) return env;
  struct stat st;
  if (::stat("plan.json", &st) == 0 && !S_ISDIR(st.st_mode)) return "plan.json";
  return "";
}

std::string hint_flags_for(const PlanSetup& s) {
  const char* env = std::getenv("GPUQ_PLAN");
  std::string dflt = env && *env ? env : "plan.json";
  std::error_code ec1, ec2;
  fs::path given = fs::weakly_canonical(s.plan, ec1), taken = fs::weakly_canonical(dflt, ec2);
  bool same = s.plan == dflt || (!ec1 && !ec2 && given == taken);
  std::string out = same ? "" : "--plan " + shell_word(s.plan);
  if (s.source_of("state_dir") == SettingSource::Flag && !s.state_dir.empty())
    out += (out.empty() ? "" : " ") + std::string("--state-dir ") + shell_word(s.state_dir);
  return out;
}

std::string others_plan_problem(const std::string& plan, const std::string& action) {
  struct stat st {};
  std::string state = paths_for(plan, "").state;
  if (geteuid() == 0 || stat(state.c_str(), &st) != 0 || st.st_uid == geteuid()) return "";
  struct passwd* pw = getpwuid(st.st_uid);
  std::string owner = pw ? pw->pw_name : fmt::format("uid {}", st.st_uid);
  return fmt::format("the plan {} is {}'s (its state {} is theirs): only {} may {} its jobs; {} shows them", plan,
                     owner, state, owner, action, hint("status"));
}

bool readable_file(const std::string& path) {
  struct stat st;
  return ::access(path.c_str(), R_OK) == 0 && ::stat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode);
}

}  // namespace gpuq
