// `gpuq simulate`.
#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include <cstdio>

#include "gpuq/live/local_files.h"
#include "gpuq/core/outlook.h"
#include "gpuq/core/plan.h"
#include "gpuq/live/probe.h"
#include "gpuq/live/queue.h"
#include "gpuq/core/simulate.h"
#include "gpuq/live/store.h"
#include "gpuq/views/json.h"
#include "gpuq/views/svg.h"
#include "gpuq/views/text.h"

#include "cli.h"

namespace gpuq::cli {

int cmd_simulate(const Flags& f) {
  huge_page_heap();
  auto loaded = load_command(f);
  if (!loaded) return kExitBadInput;
  const std::vector<int>* gpus = &loaded->gpus;
  const Plan* plan = &loaded->plan;
  if (f.learned_estimates) {
    State state;
    if (f.from_state) state = read_state(plan_paths(f));
    learn_into(f, loaded->plan, state);
  }
  SimOptions opt;
  opt.node_gpus = *gpus;
  opt.backfill_max_hours = f.backfill_max_hours;
  opt.time_limit_factor = f.time_limit_factor;
  // The original's pairs unless --pairs says otherwise: its output stays the original's.
  std::optional<Placement> placement = placement_of(f, "original", run_options(f, *gpus));
  if (!placement) return kExitBadInput;
  opt.placement = std::move(*placement);
  std::optional<SimStart> from;
  if (f.from_state) {
    PlanPaths paths = plan_paths(f);
    State state = read_state(paths);
    double now = unix_now();
    refresh(paths, state, now);
    RunOptions ro = run_options(f, *gpus);
    ro.placement = opt.placement;
    from = live_start(*plan, state, ro, now, free_now(state, ro, GpuReading{}),
                      LocalFiles(workdir_of(f, plan->workdir).path));
  }
  Simulation sim = simulate(*plan, opt, from ? &*from : nullptr);
  for (const auto& note : sim.notes) fmt::print(stderr, "gpuq: {}\n", note);
  for (const Stuck& b : sim.blocked) fmt::print(stderr, "gpuq: {}: {}\n", plan->jobs[b.job].id, b.why);
  if (!f.svg.empty()) {
    std::vector<Bar> bars;
    for (const SimRow& r : sim.rows) bars.push_back({r.job, "predicted", r.start, r.end, r.gpus});
    if (!write_output(f.svg, gantt_svg(*plan, bars, *gpus, from ? std::optional<double>(0.0) : std::nullopt,
                                       "gpuq simulate: " + f.plan)))
      return kExitFailure;
  }
  if (f.json) {
    std::string out = simulation_json(*plan, f.plan, sim, opt);
    std::fwrite(out.data(), 1, out.size(), stdout);
    return sim.stuck.empty() || from ? 0 : kExitFailure;
  }
  if (from && !sim.stuck.empty()) {
    fmt::print(stderr, "gpuq: {} job(s) never start as things stand:\n", sim.stuck.size());
    for (const Stuck& s : sim.stuck) fmt::print(stderr, "  {}: {}\n", plan->jobs[s.job].id, s.why);
    sim.stuck.clear();
  }
  if (!sim.stuck.empty()) {
    fmt::print(stderr, "gpuq: {}: {}", f.plan, format_stuck(*plan, sim));
    return kExitFailure;
  }
  std::string out = format_timeline(*plan, sim, opt, f.all);
  std::fwrite(out.data(), 1, out.size(), stdout);
  std::fflush(stdout);
  std::string note = timeline_note(*plan, sim, f.all);
  std::fputs(note.c_str(), stderr);
  return 0;
}

void add_simulate_command(CLI::App& app, Flags& f, Action& action) {
  auto* sim = app.add_subcommand("simulate", "predict the timeline of the plan from est_hours");
  add_flags(sim, f, {kGpus, kAll, kBackfill});
  add_time_limit_factor(sim, f);
  sim->add_flag("--json", f.json, "print one JSON object (schema in README) instead of the timeline");
  sim->add_option("--svg", f.svg, "also write the timeline as a Gantt chart (SVG) to FILE")
      ->type_name(kFileType);
  sim->add_flag("--from-state", f.from_state,
                "predict from the live state: what is done stays done, running jobs finish their estimate");
  add_learned_estimates(sim, f);
  add_gpu_flags(sim, f, "original");
  sim->callback([&] { action = [&] { return cmd_simulate(f); }; });
}

}  // namespace gpuq::cli
