// `gpuq retry | kill | hold`.
#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include <cstdio>

#include "gpuq/live/launcher.h"
#include "gpuq/core/plan.h"
#include "gpuq/live/store.h"

#include "cli.h"

namespace gpuq::cli {

int cmd_control(const Flags& f, const std::string& action) {
  auto loaded = load_command(f);
  if (!loaded) return kExitBadInput;
  const Plan* plan = &loaded->plan;
  PlanPaths paths = paths_for(f.plan);
  FileStore store(paths);
  PosixLauncher launcher(paths);
  SystemClock clock;
  ControlResult r = control(*plan, f.plan, store, launcher, clock, action, f.jobs);
  for (const auto& line : r.lines) fmt::print(r.status == kExitBadInput ? stderr : stdout, "{}\n", line);
  return r.status;
}

}  // namespace gpuq::cli
