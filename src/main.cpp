// gpuq: a dependency and priority GPU job queue for one multi-GPU node.
#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include <cstdio>
#include <iostream>

#include "gpuq/plan.h"
#include "gpuq/simulate.h"

namespace {

using namespace gpuq;

/// Exit statuses: 0 success, 1 the command could not do its work, 2 bad input.
constexpr int kExitFailure = 1;
constexpr int kExitBadInput = 2;

/// Flags most subcommands share.
struct Common {
  std::string plan;
  std::string gpus = "0,1,2,3,4,5,6,7";
  double backfill_max_hours = 0.5;
};

void add_plan_flags(CLI::App* sub, Common& c) {
  sub->add_option("--plan", c.plan, "the plan file (JSON); its state, lock and logs/ live beside it")
      ->required();
  sub->add_option("--gpus", c.gpus, "GPU ids of this node, comma-separated")->capture_default_str();
}

void add_backfill_flag(CLI::App* sub, Common& c) {
  sub->add_option("--backfill-max-hours", c.backfill_max_hours,
                  "while a higher-priority job waits for GPUs, only jobs this short may start")
      ->capture_default_str()
      ->check(CLI::NonNegativeNumber);
}

/// Loads the plan for `c`, or prints every problem and returns nullopt with `rc` set.
std::optional<Plan> load_or_report(const Common& c, std::vector<int>& node_gpus, int& rc) {
  std::string err;
  auto ids = parse_gpu_list(c.gpus, &err);
  if (!ids) {
    fmt::print(stderr, "gpuq: {}\n", err);
    rc = kExitBadInput;
    return std::nullopt;
  }
  node_gpus = *ids;
  PlanLoad load = load_plan(c.plan, node_gpus);
  if (!load.plan) {
    fmt::print(stderr, "gpuq: the plan {} is not valid ({} problem{}):\n", c.plan, load.errors.size(),
               load.errors.size() == 1 ? "" : "s");
    for (const auto& e : load.errors) fmt::print(stderr, "  {}\n", e);
    rc = kExitBadInput;
    return std::nullopt;
  }
  for (const auto& w : load.warnings) fmt::print(stderr, "gpuq: warning: {}\n", w);
  return std::move(load.plan);
}

struct SimulateArgs {
  Common common;
  bool all = false;
};

void setup_simulate(CLI::App& app, SimulateArgs& a, std::function<int()>& action) {
  auto* sub = app.add_subcommand("simulate", "predict the timeline of the plan from est_hours");
  add_plan_flags(sub, a.common);
  add_backfill_flag(sub, a.common);
  sub->add_flag("--all", a.all, "also list eval_ jobs (hidden by default, as the original does)");
  sub->callback([&] {
    action = [&]() -> int {
      int rc = 0;
      std::vector<int> node;
      auto plan = load_or_report(a.common, node, rc);
      if (!plan) return rc;
      SimOptions opt;
      opt.node_gpus = node;
      opt.backfill_max_hours = a.common.backfill_max_hours;
      Simulation sim = simulate(*plan, opt);
      for (const auto& note : sim.notes) fmt::print(stderr, "gpuq: {}\n", note);
      if (!sim.stuck.empty()) {
        fmt::print(stderr, "gpuq: {}: {}", a.common.plan, format_stuck(*plan, sim));
        return kExitFailure;
      }
      std::string out = format_timeline(*plan, sim, opt, a.all);
      std::fwrite(out.data(), 1, out.size(), stdout);
      return 0;
    };
  });
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{
      "gpuq: a dependency and priority GPU job queue for one multi-GPU node.\n"
      "Runs a plan (a JSON list of jobs) on the node's GPUs: highest priority first, short jobs\n"
      "backfilled while a wide job waits, 2-GPU jobs on NVLink pairs, state kept beside the plan."};
  app.require_subcommand(1, 1);
  app.set_version_flag("--version", "gpuq 0.1.0");
  std::function<int()> action;
  SimulateArgs sim_args;
  setup_simulate(app, sim_args, action);
  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForAllHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForVersion& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    app.exit(e);
    return kExitBadInput;
  }
  try {
    return action ? action() : 0;
  } catch (const std::exception& e) {
    fmt::print(stderr, "gpuq: {}\n", e.what());
    return kExitFailure;
  }
}
