// `gpuq gpus`: the node as gpuq sees it (the probe's reading, the topology, the pairs).
#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include <cstdio>
#include <cstdlib>

#include "gpuq/live/commands.h"
#include "gpuq/live/look.h"
#include "gpuq/views/gpus_text.h"

#include "cli.h"

namespace gpuq::cli {

int cmd_gpus(Flags& f) {
  // A plan (--plan or $GPUQ_PLAN; gpus needs none) gives its settings.
  if (f.plan.empty())
    if (const char* env = std::getenv("GPUQ_PLAN"); env && *env) f.plan = env;
  if (!f.plan.empty() && !take_plan_settings_only(f, "gpus")) return kExitBadInput;
  if (!node_gpus(f)) return kExitBadInput;
  std::string problem;
  std::optional<GpusLook> n = look_at_gpus(f, &problem);
  if (!n) {
    fmt::print(stderr, "gpuq gpus: {}\n", problem);
    return kExitBadInput;
  }
  if (!n->state_problem.empty()) fmt::print(stderr, "gpuq gpus: {} (processes are judged without it)\n", n->state_problem);
  std::string out = f.json ? gpus_json(n->seen) : gpus_text(n->seen);
  std::fwrite(out.data(), 1, out.size(), stdout);
  return n->seen.reading.used_mib ? 0 : kExitFailure;
}

// `gpuq drain GPU --why TEXT`, `gpuq undrain GPU` (commands.h: drain_gpu).
int cmd_drain(Flags& f, bool drain) {
  if (f.plan.empty())
    if (const char* env = std::getenv("GPUQ_PLAN"); env && *env) f.plan = env;
  if (!f.plan.empty() && !take_plan_settings_only(f, drain ? "drain" : "undrain")) return kExitBadInput;
  return drain_gpu(f, f.drain_gpu, drain, f.drain_why, [](const std::string& line) { fmt::print("{}\n", line); },
                   [](const std::string& line) { fmt::print(stderr, "{}\n", line); });
}

void add_gpus_command(CLI::App& app, Flags& f, Action& action) {
  auto* gpus = app.add_subcommand("gpus", "show the GPUs as gpuq sees them: memory, utilization, processes of no "
                                          "gpuq job, connections, the pairs it uses, and the probe");
  add_flags(gpus, f, SettingCommand::kGpus);
  gpus->add_flag("--json", f.json, "print one JSON object instead of text");
  gpus->add_option("--node-dir", f.node_dir,
                   "the node directory whose drains and idle GPU memory it shows (default: $GPUQ_NODE_DIR, "
                   "/var/lib/gpuq, else your own)")
      ->type_name("DIR");
  gpus->callback([&] { action = [&] { return cmd_gpus(f); }; });
  for (bool drain : {true, false}) {
    auto* sub = app.add_subcommand(drain ? "drain" : "undrain",
                                   drain ? "keep every user's new jobs off a GPU (a bad fan, an Xid gpuq does not drain "
                                           "by itself), until `gpuq undrain`; its jobs running go on"
                                         : "give a drained GPU back to every user's runs (a drain by hand, or one a "
                                           "run made for a fault: Xid, ECC, lost)");
    sub->add_option("GPU", f.drain_gpu, "the GPU's id")->required()->check(CLI::Range(0, kMaxGpuId));
    if (drain) sub->add_option("--why", f.drain_why, "what every user sees as its reason")->required();
    add_setting_flag(sub, f, "gpus");
    sub->add_option("--plan", f.plan, "a plan whose settings give the node's GPUs and node directory")->type_name(kPlanType);
    sub->add_option("--node-dir", f.node_dir, "the node directory (default: $GPUQ_NODE_DIR, /var/lib/gpuq, else your own)")
        ->type_name("DIR");
    sub->callback([&f, &action, drain] { action = [&f, drain] { return cmd_drain(f, drain); }; });
  }
}

}  // namespace gpuq::cli
