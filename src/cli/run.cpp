// `gpuq run`.
#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <unistd.h>

#include "gpuq/live/commands.h"

#include "cli.h"
#include "gpuq/live/backend.h"

namespace gpuq::cli {

int cmd_run(Flags& f) {
  // The text as it was before the load: the version the reload on edit compares with (an
  // edit between the two is then reloaded at the first tick, never missed).
  std::string plan_text = plan_text_now(f.plan);
  auto loaded = load_command(f);
  if (!loaded) return kExitBadInput;
  std::unique_ptr<Backend> backend = chosen_backend(f);
  return run_plan(f, std::move(loaded->plan), loaded->gpus, plan_text, *backend,
                  [](const std::string& line) { fmt::print(stderr, "{}\n", line); });
}

void add_run_command(CLI::App& app, Flags& f, Action& action) {
  auto* run = app.add_subcommand("run", "run the plan: start jobs as they become ready, until all are finished");
  add_flags(run, f, SettingCommand::kRun);
  run->add_option("--node-dir", f.node_dir,
                  "share the node's GPUs with other runs through DIR (default: $GPUQ_NODE_DIR, else /var/lib/gpuq "
                  "when you may write there, else your own ~/.local/state/gpuq/node-HOST; off: run alone)")
      ->type_name("DIR");
  add_batch_run_flags(run, f);
  run->callback([&] { action = [&] { return cmd_run(f); }; });
}

}  // namespace gpuq::cli
