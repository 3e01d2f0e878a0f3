// `gpuq gpus`: the node as gpuq sees it (the probe's reading, the topology, the pairs).
#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include <cstdio>
#include <cstdlib>

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

void add_gpus_command(CLI::App& app, Flags& f, Action& action) {
  auto* gpus = app.add_subcommand("gpus", "show the GPUs as gpuq sees them: memory, utilization, processes of no "
                                          "gpuq job, connections, the pairs it uses, and the probe");
  add_flags(gpus, f, SettingCommand::kGpus);
  gpus->add_flag("--json", f.json, "print one JSON object instead of text");
  gpus->callback([&] { action = [&] { return cmd_gpus(f); }; });
}

}  // namespace gpuq::cli
