// `gpuq run`.
#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include <cstdio>

#include "gpuq/core/plan.h"
#include "gpuq/live/queue.h"
#include "gpuq/live/run_loop.h"
#include "gpuq/live/store.h"

#include "cli.h"

namespace gpuq::cli {

int cmd_run(const Flags& f) {
  auto loaded = load_command(f);
  if (!loaded) return kExitBadInput;
  const std::vector<int>* gpus = &loaded->gpus;
  const Plan* plan = &loaded->plan;
  RunOptions opt = run_options(f, *gpus);
  PlanPaths paths = paths_for(f.plan);
  RunGuard guard(paths);
  warn_unknown_entries(*plan, paths, read_state(paths));
  return run_queue(*plan, paths, opt, stdout);
}

}  // namespace gpuq::cli
