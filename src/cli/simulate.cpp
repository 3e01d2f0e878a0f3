// `gpuq simulate`.
#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include <cstdio>

#include "gpuq/core/outlook.h"
#include "gpuq/core/plan.h"
#include "gpuq/core/simulate.h"
#include "gpuq/live/look.h"
#include "gpuq/views/json.h"
#include "gpuq/views/reasons.h"
#include "gpuq/views/svg.h"
#include "gpuq/views/text.h"

#include "cli.h"
#include "gpuq/live/backend.h"

namespace gpuq::cli {

namespace {

/// simulate --nodes: the plan as a cluster's batch queue takes it (as `run` through it does), or
/// nullopt with the reason printed.
std::optional<Plan> cluster_plan(const Flags& f, const Plan& plan) {
  std::unique_ptr<Backend> cluster = cluster_backend(f);
  if (std::string why = cluster->plan_problem(plan, false); !why.empty()) {
    fmt::print(stderr, "gpuq: simulate --nodes: the plan {}: {}\n", f.plan, why);
    return std::nullopt;
  }
  for (const std::string& note : cluster->prediction_notes(plan)) fmt::print(stderr, "gpuq: simulate --nodes: {}\n", note);
  return cluster->plan_for(plan);
}

// --node: on the shared node as it is now; the look found the node directory, or why not (exit 2).
bool say_node(const Look& l) {
  if (l.node.dir.empty()) {
    fmt::print(stderr, "gpuq simulate --node: no node directory (--node-dir DIR, $GPUQ_NODE_DIR, or /var/lib/gpuq "
                       "when it exists and you may write there)\n");
    return false;
  }
  if (!l.node.problem.empty()) {
    fmt::print(stderr, "gpuq simulate --node: the node directory {}: {}\n", l.node.dir, l.node.problem);
    return false;
  }
  std::string said = l.node.line.empty() ? fmt::format("shared node {}: no other run\n", l.node.dir) : l.node.line;
  for (size_t at = 0, nl; (nl = said.find('\n', at)) != std::string::npos; at = nl + 1)
    fmt::print(stderr, "gpuq: {}\n", said.substr(at, nl - at));
  fmt::print(stderr, "gpuq: predicted on the node as it is now{}; other users' jobs that are not ready yet are not in "
                     "it (the node's fair share may start some of them first)\n",
             l.node.cap ? fmt::format(", at most {} GPU{} at once for you (the node config's cap)", *l.node.cap,
                                      *l.node.cap == 1 ? "" : "s")
                        : "");
  return true;
}

// What the look gathers for a prediction: the state and its run's settings only --from-state,
// the shared node only --node (from the plan's beginning unless --from-state), no GPU reading.
LookAsk simulate_ask(const Flags& f) {
  LookAsk ask;
  ask.run_plan_when_broken = false;
  ask.state = ask.refresh = f.from_state;
  ask.probe = false;
  ask.pairs_default = "original";  // the original's pairs unless --pairs says otherwise: its output stays the original's
  ask.node = f.simulate_node;
  ask.whole = !f.from_state;
  ask.run = ask.snapshots = false;
  return ask;
}

double makespan(const Simulation& sim) {
  double m = 0;
  for (const SimRow& r : sim.rows) m = std::max(m, r.end);
  return m;
}

/// What the cluster buys: the same plan's makespan on one such node, for the note on stderr.
std::string cluster_note(const Plan& plan, const SimOptions& opt, const Simulation& sim) {
  SimOptions one = opt;
  one.nodes = 1;
  Simulation alone = simulate(plan, one);
  double many = makespan(sim), single = makespan(alone);
  std::string head = fmt::format("gpuq: on {} nodes of {} GPUs (a job runs on one node, the first where it fits) "
                                 "the makespan is {:.1f}h",
                                 opt.nodes, opt.node_gpus.size(), many);
  if (!alone.stuck.empty() || many <= 0) return head + "\n";
  return head + fmt::format("; on one such node it is {:.1f}h ({:.2f}x as long)\n", single, single / many);
}

// Prints the prediction: the timeline (the original's), or JSON, or the jobs that never start.
int print_simulation(const Flags& f, const Plan& plan, const std::vector<int>& gpus, const SimOptions& opt,
                     LiveStart* from) {
  Simulation sim = simulate(plan, opt, from);
  for (const auto& note : sim.notes) fmt::print(stderr, "gpuq: {}\n", note);
  for (const Stuck& b : sim.blocked) fmt::print(stderr, "gpuq: {}: {}\n", plan.jobs[b.job].id, stuck_text(plan, opt, b));
  if (!f.svg.empty()) {
    std::vector<Bar> bars;
    for (const SimRow& r : sim.rows) bars.push_back({r.job, "predicted", r.start, r.end, r.gpus, r.node});
    if (!write_output(f.svg, gantt_svg(plan, bars, gpus, from ? std::optional<double>(0.0) : std::nullopt,
                                       "gpuq simulate: " + f.plan, opt.nodes)))
      return kExitFailure;
  }
  // Jobs that can never start on this node (and those waiting on them) leave the rest to predict:
  // the timeline is printed, they are listed, and the exit is run's for the same plan (3).
  const bool never_here = !from && only_never_here(plan, opt, sim.stuck);
  if (f.json) {
    std::string out = simulation_json(plan, f.plan, sim, opt);
    std::fwrite(out.data(), 1, out.size(), stdout);
    return sim.stuck.empty() || from ? 0 : never_here ? kExitJobsNotDone : kExitFailure;
  }
  std::string never_text;
  if (never_here) {
    never_text = fmt::format("gpuq: {} job(s) can never start on this node; the rest is predicted without them:\n",
                             sim.stuck.size());
    for (const Stuck& s : sim.stuck) never_text += fmt::format("  {}: {}\n", plan.jobs[s.job].id, stuck_text(plan, opt, s));
    sim.stuck.clear();
  }
  if (from && !sim.stuck.empty()) {
    fmt::print(stderr, "gpuq: {} job(s) never start as things stand:\n", sim.stuck.size());
    for (const Stuck& s : sim.stuck) fmt::print(stderr, "  {}: {}\n", plan.jobs[s.job].id, stuck_text(plan, opt, s));
    sim.stuck.clear();
  }
  if (!sim.stuck.empty()) {
    fmt::print(stderr, "gpuq: {}: {}", f.plan, format_stuck(plan, opt, sim));
    return kExitFailure;
  }
  std::string out = format_timeline(plan, sim, opt, f.all);
  std::fwrite(out.data(), 1, out.size(), stdout);
  std::fflush(stdout);
  std::string note = timeline_note(plan, sim, f.all);
  if (packs(plan, opt)) {  // what packing buys: the same prediction on whole GPUs
    SimOptions whole = opt;
    whole.pack = false;
    note += packing_note(plan, opt, sim, simulate(plan, whole, from));
  }
  if (opt.nodes > 1) note += cluster_note(plan, opt, sim);
  std::fputs((note + never_text).c_str(), stderr);
  keep_until_exit(std::move(sim));
  return never_text.empty() ? 0 : kExitJobsNotDone;
}

}  // namespace

int cmd_simulate(const Flags& given) try {
  huge_page_heap();
  Flags f = given;
  if (f.gpus_per_node) {
    f.gpus = fmt::format("0-{}", *f.gpus_per_node - 1);
    f.gpus_source = "--gpus-per-node";
    f.from[setting_index(*find_setting("gpus"))] = SettingSource::Flag;
  }
  f.reads_run_settings = f.from_state;  // predicting a running queue: with its run's settings
  LookAsk ask = simulate_ask(f);
  Look l = look_at(f, ask);
  if (!say_load(f, l.report) || (f.simulate_node && !say_node(l))) return kExitBadInput;
  std::optional<Plan> cluster;
  if (f.nodes && !(cluster = cluster_plan(f, *l.plan))) return kExitBadInput;
  Plan& plan = cluster ? *cluster : *l.plan;
  if (f.learned_estimates) plan = learn_into(f, plan, l.state);
  SimOptions opt;
  opt.node_gpus = f.nodes ? l.gpus : l.opt.node_gpus;  // without the drained GPUs (gpu_health.h), but a cluster's
  opt.backfill_max_hours = f.backfill_max_hours;
  opt.time_limit_factor = f.time_limit_factor;
  opt.max_retries = f.max_retries;  // the retries of a job predicted to time out (retry_on_timeout)
  opt.retry_after = f.retry_after;
  opt.gpu_mem_gib = f.gpu_mem_gib;
  opt.gpu_mem_headroom = f.gpu_mem_headroom;
  opt.nodes = static_cast<int>(f.nodes.value_or(1));
  opt.placement = l.opt.placement;
  opt.max_gpus = l.node.cap;
  opt.preemptible_default = l.opt.preemptible_default;
  opt.preempt_min_minutes = l.opt.preempt_min_minutes;
  // The node the plan names (node_cpus given): planned as it is, wherever simulate runs; run on
  // this machine lowers it to the cores it may pin (said below).
  opt.node_cpus = l.opt.node_cpus_asked > 0 && !f.from_state ? l.opt.node_cpus_asked : l.opt.node_cpus;
  opt.node_mem_gib = l.opt.node_mem_gib;
  // Drained GPUs (gpu_health.h) are left out by the look: said (--node: with the node's lines).
  if (GpuMask d = drained_mask(l.node.drained) & mask_of(l.gpus); d && !f.nodes && !f.simulate_node)
    fmt::print(stderr, "gpuq: {}\n", drained_prediction_note(d, mask_of(l.gpus)));
  std::optional<LiveStart> from;
  if (f.from_state || f.simulate_node) from = live_start_of(l, plan);
  if (f.from_state)
    for (const std::string& line : l.settings_notes) fmt::print(stderr, "gpuq: {}\n", line);
  if (f.from_state && !l.opt.host_note.empty() && opt.counts_host(plan))  // this machine's run, predicted
    fmt::print(stderr, "gpuq: {}\n", l.opt.host_note);
  int rc = print_simulation(f, plan, l.gpus, opt, from ? &*from : nullptr);
  keep_until_exit(std::move(l));
  keep_until_exit(std::move(cluster));
  return rc;
} catch (const BadLook& e) {
  fmt::print(stderr, "gpuq: {}\n", e.what());
  return kExitBadInput;
}

void add_simulate_command(CLI::App& app, Flags& f, Action& action) {
  auto* sim = app.add_subcommand("simulate", "predict the timeline of the plan from est_hours");
  add_flags(sim, f, SettingCommand::kSimulate);
  sim->add_flag("--json", f.json, "print one JSON object (schema in doc/commands.md) instead of the timeline");
  sim->add_option("--svg", f.svg, "also write the timeline as a Gantt chart (SVG) to FILE")
      ->type_name(kFileType);
  auto* from_state = sim->add_flag("--from-state", f.from_state,
                "predict from the live state: what is done stays done, running jobs finish their estimate");
  auto* nodes = sim->add_option("--nodes", f.nodes,
                                kNodesHelp)
                    ->check(CLI::Range(1, kMaxNodes))
                    ->excludes(from_state);
  sim->add_option("--gpus-per-node", f.gpus_per_node, "with --nodes: each node has G GPUs (instead of --gpus)")
      ->check(CLI::Range(1, kMaxGpuId + 1))
      ->needs(nodes)
      ->excludes(sim->get_option("--gpus"));
  sim->add_flag("--node", f.simulate_node,
                "on the shared node as it is now: other users' running jobs hold their GPUs until their "
                "predicted ends, their waiting jobs from their predicted starts, and your cap is kept (--node-dir)")
      ->excludes(nodes);
  sim->add_option("--node-dir", f.node_dir, "with --node: the node directory (default: the run's, $GPUQ_NODE_DIR, /var/lib/gpuq, else your own)")
      ->type_name("DIR")
      ->needs(sim->get_option("--node"));
  add_learned_estimates(sim, f);
  sim->callback([&] { action = [&] { return cmd_simulate(f); }; });
}

}  // namespace gpuq::cli
