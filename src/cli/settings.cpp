// Where each setting comes from (flag > env > run > plan > default), and `gpuq settings`.
#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>

#include "gpuq/core/settings.h"
#include "gpuq/core/cores.h"
#include "gpuq/live/setup.h"

#include "cli.h"

namespace gpuq::cli {

CLI::Option* setting_flag(Flags& f, CLI::Option* o, std::string_view name) {
  std::string flag = "--" + o->get_lnames().front();
  for (const SettingSpec& spec : settings_table())
    if (name.empty() ? spec.flag == flag : spec.name == name) f.setting_options.push_back({setting_index(spec), o});
  return o;
}

CLI::Option* add_setting_flag(CLI::App* sub, Flags& f, const SettingSpec& spec, bool listed) {
  std::string help(spec.doc);
  std::string unset = spec.unset.empty() ? "" : std::string(spec.unset);
  if (!spec.env.empty())
    help += fmt::format(" (default: ${}{})", spec.env, unset.empty() ? "" : ", else " + unset);
  else if (!unset.empty())
    help += fmt::format(" (default: {})", unset);
  if (spec.kind == SettingKind::Names) help += "; repeatable";
  CLI::Option* o =
      std::visit([&](auto member) { return sub->add_option(std::string(spec.flag), f.*member, help); }, spec.member);
  if (spec.kind == SettingKind::Names) o->allow_extra_args(false);
  if (unset.empty() && spec.env.empty() && spec.kind != SettingKind::Names) o->capture_default_str();
  // A value is checked as the plan's "settings" check it, with the same words.
  switch (spec.kind) {
    case SettingKind::Number:
    case SettingKind::Percent:
    case SettingKind::Positive:
    case SettingKind::Count:
    case SettingKind::Whole:
    case SettingKind::Choice:
    case SettingKind::Codes:
      o->check(CLI::Validator(
          [&spec](std::string& v) {
            Settings scratch;
            return set_setting_text(spec, v, scratch);
          },
          ""));
      break;
    default: break;
  }
  if (!spec.value_name.empty()) o->type_name(std::string(spec.value_name));
  o->group(listed ? "Options" : "");
  f.setting_options.push_back({setting_index(spec), o});
  return o;
}

CLI::Option* add_setting_flag(CLI::App* sub, Flags& f, std::string_view name) {
  return add_setting_flag(sub, f, *find_setting(name), true);
}

void take_flags_and_env(Flags& f) {
  for (auto [i, o] : f.setting_options)
    if (o->count() > 0) f.from[i] = SettingSource::Flag;
  take_env(f);
}

namespace {

const char* cgroup_kind(const Cgroups& cg) {
  switch (cg.kind) {
    case Cgroups::Kind::V1: return "v1";
    case Cgroups::Kind::V2: return "v2";
    default: return "none";
  }
}

// The rest of the box as run would take it (node_cpus and node_mem_gib 0 are the machine's, less a
// reserve: their values here), and what would hold a job's memory.
void print_node_host(const Flags& f, const NodeHost& h) {
  std::string cpus = f.node_cpus > 0 ? fmt::format("node_cpus {:g}", f.node_cpus)
                                     : fmt::format("node_cpus 0: the machine's less reserve_cpus {}", f.reserve_cpus);
  std::string mem = f.node_mem_gib > 0 ? fmt::format("node_mem_gib {:g}", f.node_mem_gib)
                                       : fmt::format("node_mem_gib 0: the machine's less reserve_mem_gib {:g}, at "
                                                     "least half",
                                                     f.reserve_mem_gib);
  fmt::print("\nthis machine, for jobs that give cpus or mem_gib:\n");
  fmt::print("  cores        {} ({}); jobs may use {:g} at once, pinned to {} ({})\n", h.usable.size(),
             core_list_text(h.usable), h.cpus, core_list_text(h.cores), cpus);
  fmt::print("  host memory  {}; jobs may use {:.1f} GiB at once ({})\n",
             h.machine_gib > 0 ? fmt::format("{:.1f} GiB", h.machine_gib) : std::string("unread"), h.mem_gib, mem);
  if (!h.note.empty()) fmt::print("  note         {}\n", h.note);
  fmt::print("  memory held  sampled (each job's resident memory, every 5 s at most), on every node; {}{}\n",
             h.cgroups.kind == Cgroups::Kind::None ? "no cgroup: " : "", h.cgroups.why);
}

}  // namespace

int cmd_settings(Flags& f) {
  if (!take_plan_settings_only(f, "settings")) return kExitBadInput;
  if (std::string err; f.source_of("gpus") == SettingSource::Flag && !parse_gpu_list(f.gpus, &err)) {
    fmt::print(stderr, "gpuq: {}\n", err);
    return kExitBadInput;
  }
  if (f.json) {
    nlohmann::ordered_json out = nlohmann::ordered_json::object();
    out["plan"] = f.plan;
    out["run_info"] = f.run_info_file.empty() ? nlohmann::ordered_json(nullptr) : nlohmann::ordered_json(f.run_info_file);
    out["settings"] = settings_sources_json(f);
    NodeHost h = node_host(f);
    out["machine"] = {{"cores", core_list_text(h.usable)},  {"pinned_to", core_list_text(h.cores)},
                      {"node_cpus", h.cpus},                {"mem_gib", h.machine_gib},
                      {"node_mem_gib", h.mem_gib},          {"cgroup", cgroup_kind(h.cgroups)},
                      {"cgroup_note", h.cgroups.why}};
    fmt::print("{}\n", out.dump(1));
    return 0;
  }
  fmt::print("settings of {}{}\n", f.plan,
             f.run_info_file.empty() ? ""
                                     : fmt::format(" (a `gpuq run` is running it: its settings, in {}, come before "
                                                   "the plan's)",
                                                   f.run_info_file));
  fmt::print("{:<20} {:<26} {:<8} {:<21} {}\n", "setting", "value", "from", "flag", "note");
  for (const SettingSpec& spec : settings_table()) {
    size_t i = setting_index(spec);
    std::string note;
    if (f.from[i] == SettingSource::Env) note = fmt::format("${}", spec.env);
    if (!f.run_info_file.empty() && f.run_settings.given[i] && !same_setting(spec, f, f.run_settings.values))
      note += fmt::format("{}the run uses {}", note.empty() ? "" : "; ", setting_text(spec, f.run_settings.values));
    if (f.plan_settings.given[i] && !same_setting(spec, f, f.plan_settings.values))
      note += fmt::format("{}the plan says {}", note.empty() ? "" : "; ", setting_text(spec, f.plan_settings.values));
    std::string value = setting_text(spec, f);
    fmt::print("{:<20} {:<26} {:<8} {:<21} {}\n", spec.name, value, source_name(f.from[i]), spec.flag, note);
  }
  print_node_host(f, node_host(f));
  std::fflush(stdout);
  return 0;
}

void add_settings_command(CLI::App& app, Flags& f, Action& action) {
  // The flags `run --help` hides are taken here too, named in one line (the help fits a screen).
  std::string hidden;
  for (const SettingSpec& spec : settings_table())
    if (spec.hidden) hidden += fmt::format("{}{} {}", hidden.empty() ? "" : ", ", spec.flag, spec.value_name);
  auto* sub = app.add_subcommand(
      "settings", fmt::format("print each setting's value and where it came from: a flag, $GPUQ_*, the running `gpuq "
                              "run`, the plan's \"settings\", or the default.\nAlso taken: {} (doc/settings.md)",
                              hidden));
  add_flags(sub, f, SettingCommand::kAny);
  sub->add_flag("--json", f.json, "print one JSON object: each setting's value, source and flag");
  sub->callback([&] {
    f.reads_run_settings = true;
    action = [&] { return cmd_settings(f); };
  });
}

}  // namespace gpuq::cli
